package comm

import (
	"errors"
	"fmt"
	"net"
)

type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }

// Sentinel errors; match them with errors.Is.
var (
	// ErrClosed reports an operation on a closed communicator. It matches
	// net.ErrClosed.
	ErrClosed error = &sentinel{"comm: closed", net.ErrClosed}
	// ErrRankFailed is matched by every error caused by a rank that died,
	// closed early or stopped answering.
	ErrRankFailed = errors.New("comm: rank failed")
	// ErrArgument is matched by every argument error (see ArgError).
	ErrArgument = errors.New("comm: invalid argument")
	// ErrTruncated reports a message larger than the receive buffer.
	ErrTruncated = errors.New("comm: message truncated")
	// ErrMismatch reports collective calls that do not match between ranks
	// (another collective, another algorithm, inconsistent sizes).
	ErrMismatch = errors.New("comm: mismatched collective calls")
	// ErrProtocol reports a message that breaks the protocol (an unknown
	// rendezvous, a wrong length).
	ErrProtocol = errors.New("comm: protocol error")
	// ErrConcurrent reports a collective called on a communicator while
	// another collective runs on it (from another goroutine). The second
	// call fails at once, and the communicator breaks on every rank (the
	// running call and every later one fail too), since the ranks may
	// have paired the two goroutines' calls differently: no call returns
	// data another call's messages made. Use one goroutine for the
	// collectives of a communicator, and Dup it for others. Point-to-point
	// calls from several goroutines are allowed.
	ErrConcurrent = errors.New("comm: concurrent collectives on one communicator")
)

// RankError reports an operation that failed because of one rank: it
// died, closed, timed out or sent something wrong. Like net.OpError it
// says which operation, which rank, and why.
type RankError struct {
	Op   string // "send", "recv", "alltoallv", "init", ...
	Rank int    // the rank at fault, in the world's numbering
	Err  error  // the cause
}

func (e *RankError) Error() string {
	return fmt.Sprintf("comm: %s: rank %d: %v", e.Op, e.Rank, e.Err)
}

func (e *RankError) Unwrap() error { return e.Err }

// ArgError reports an invalid argument, detected before any byte moves.
type ArgError struct {
	Op  string
	Arg string
	Msg string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("comm: %s: %s: %s", e.Op, e.Arg, e.Msg)
}

func (e *ArgError) Unwrap() error { return ErrArgument }

// failure is the cause recorded for a failed rank.
type failure struct {
	msg   string
	cause error
}

func (f *failure) Error() string {
	if f.cause != nil {
		return f.msg + ": " + f.cause.Error()
	}
	return f.msg
}

func (f *failure) Unwrap() []error {
	if f.cause != nil {
		return []error{ErrRankFailed, f.cause}
	}
	return []error{ErrRankFailed}
}
