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
	// (another collective, another algorithm, another root, length or
	// built-in operator). The error names the rank and what differed.
	// The rank that finds a mismatch breaks the communicator on every
	// rank before it returns, so that none waits for a message that will
	// not come: the mismatched call fails with ErrMismatch on every rank
	// that still waits in it, and every later call on the communicator
	// fails with the same error. A message that comes for a collective
	// call its receiver has finished, or that is still unmatched when the
	// call ends, is a mismatch too (another root or length makes another
	// plan), found where it lands, even after the call returned.
	//
	// What no message can reveal without a round trip that every correct
	// call would pay for:
	//   - A rank whose part needs nothing back (a Bcast root whose pieces
	//     go eagerly, a Gather or Reduce sender, a leaf of the reduction
	//     tree, Scan's last rank) may return nil from a mismatched call.
	//     Its communicator breaks as soon as the others' notice arrives,
	//     and its next collective fails with the mismatch's error (one
	//     that needs nothing from the others may still succeed first).
	//   - Two operators of the caller's (not Sum, Prod, Min or Max), and
	//     element types of the same size, are not told apart; Scan and
	//     Exscan do not carry the operator at all.
	//
	// Ranks that only wait, and send nothing that reaches the others (two
	// ranks that both believe they are the root of a Gather or a Reduce;
	// ranks told a root that does not believe it is one), are found by
	// asking: a call that has waited 1 s asks the ranks it waits for
	// which call they are in (again after 2, 4, 8 and 16 s, then every
	// 16 s; they ask the ranks they wait for in turn), and a
	// rank in that call, or past it, with another collective or another
	// root breaks the communicator. Such a mismatch fails about 1 s after
	// the last rank called.
	ErrMismatch = errors.New("comm: mismatched collective calls")
	// ErrProtocol reports a message that breaks the protocol (an unknown
	// rendezvous, a wrong length).
	ErrProtocol = errors.New("comm: protocol error")
	// ErrConcurrent reports a collective called on a communicator while
	// another collective runs on it (from another goroutine). The second
	// call fails at once, and the communicator breaks on every rank (the
	// running call and every later one fail too), since the ranks may
	// have paired the two goroutines' calls differently. The rank that
	// sees the two calls breaks its communicator at once and hands its
	// notice to every link before the second call returns. A running call
	// on a communicator broken so takes no message, not even one that had
	// already arrived for it. Use one goroutine for the collectives of a
	// communicator, and Dup it for others. Point-to-point calls from
	// several goroutines are allowed.
	//
	// What no rank can tell: calls that do not overlap on a rank are not
	// concurrent there (collectives from several goroutines in turn are
	// allowed), and the ranks pair calls by their order. Two goroutines
	// that race for a communicator may each be let in first on different
	// ranks; a call that takes every message it needs before a notice
	// reaches it returns them, whichever goroutine's call sent them, as
	// it would if the goroutines had called in turn, in different orders
	// on different ranks. So does a call that took them all before its
	// own rank saw the second call. Telling would need a round trip at the
	// end of every call.
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
