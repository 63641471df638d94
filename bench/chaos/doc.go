// Package chaos is "hetbench chaos": the fault scenarios of issue 17, each
// run as a bounded loop of trials over every transport, with a table of
// what happened. Ranks are real processes (this executable's hidden
// chaos-rank command), each in its own process group, so that they can be
// killed (SIGKILL) or stopped (SIGSTOP); every trial has a deadline after
// which a rank still running counts as a hang and is killed.
//
// The scenarios:
//
//   - kill/OP and stop/OP: SIGKILL or SIGSTOP of a random non-zero rank at
//     a random time in the middle of OP (alltoallv and bcast with 4 ranks;
//     send-sender and send-receiver: 256 MiB Sends between 2 ranks, the
//     victim, rank 1, sending or receiving). Every survivor must fail with a *comm.RankError naming
//     the victim, within -limit (6 s) of the signal.
//   - spoof: the unsigned reliable-UDP SYN of issue 17, from one rank's
//     address to another's sockets, and 10,000 random and spoofed
//     datagrams (raw sockets, root) at a running 4-rank UDP job, which
//     must finish with correct data.
//   - flood: 1,000 idle connections held open on the coordinator's port
//     and on every rank's listener (in this process) delay a 4-rank start
//     by less than 2 s, compared with a start without them.
//   - concurrent: two goroutines run collectives on one Comm; every call
//     returns correct data or comm.ErrConcurrent, and every rank sees
//     ErrConcurrent.
//   - mismatch/KIND: one random rank calls with another length, another
//     root or another collective; every rank must fail with
//     comm.ErrMismatch, from that call or, where its part of the call
//     needed nothing back and it returned nil (comm.ErrMismatch's
//     documented exception), from the Barrier it calls next.
//   - loss: 20% of the packets dropped by nftables in a network namespace
//     (root); an Alltoallv job completes with correct data or fails on
//     every rank, and never hangs.
package chaos
