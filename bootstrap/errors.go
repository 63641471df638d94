package bootstrap

import (
	"errors"
	"fmt"
)

// ErrProtocol reports a rendezvous message that breaks the start-up
// protocol: a directory of the wrong size, a rank that published no
// address or a bad fingerprint, an unexpected message type.
var ErrProtocol = errors.New("bootstrap: protocol error")

// EnvError reports an unusable launch environment.
type EnvError struct {
	Var string // the variable at fault, if one is
	Msg string
}

func (e *EnvError) Error() string {
	if e.Var != "" {
		return "bootstrap: " + e.Var + ": " + e.Msg
	}
	return "bootstrap: " + e.Msg
}

// PeerError reports a start-up that failed because of one rank: it did
// not join the coordinator, did not connect, or the coordinator (rank 0)
// could not be reached.
type PeerError struct {
	Rank int    // the rank at fault
	Msg  string // what did not happen
	Err  error  // the cause, if any
}

func (e *PeerError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("bootstrap: rank %d: %s: %v", e.Rank, e.Msg, e.Err)
	}
	return fmt.Sprintf("bootstrap: rank %d: %s", e.Rank, e.Msg)
}

func (e *PeerError) Unwrap() error { return e.Err }
