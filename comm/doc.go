// Package comm is hetcomm's runtime: the API a Go SPMD program calls.
//
//	c, err := comm.Init(ctx, nil) // rank, size, coordinator, secret: from hetrun, srun, mpirun, torchrun...
//	defer c.Close()
//	recv, err := c.Alltoallv(ctx, send) // planned from the measured link costs and these sizes
//	total, err := comm.Allreduce(ctx, c, []float64{x}, comm.Sum)
//
// Init joins the world (see bootstrap.FromEnv for the launchers it
// understands), authenticates every connection with the job's secret,
// measures every link (package netprobe; HETCOMM_PROBE) and returns the
// world communicator.
//
// The cost model stays fresh while the job runs: rates that Alltoallv
// observes off the model by more than Config.Drift, and with
// Config.Refresh (HETCOMM_REFRESH) those a background refresher measures
// on idle links, update every rank's model at the next world Alltoallv;
// Reprobe measures everything again. Model returns the current model.
//
// # Point-to-point
//
// Send, Recv, RecvInto, Isend, Irecv, Sendrecv, Probe and Iprobe follow
// MPI's semantics. Messages between a pair of ranks are non-overtaking: two
// messages from one sender that match the same receive (by source and tag,
// including AnySource and AnyTag) are received in the order they were sent
// — for Isend, the order of the Isend calls. Messages up to
// Config.EagerLimit go at once; larger ones wait for the receiver's
// matching receive and then land straight in its buffer. ProcNull, as
// MPI_PROC_NULL, is a peer that sends and receives nothing at once.
//
// # Several NICs
//
// With several rails (HETCOMM_RAILS: one address or network per NIC) each
// pair of ranks talks over a transport.RailSet, which multiplexes small
// messages and splits large ones across the NICs (Config.RailPolicy); the
// probe measures every rail and the planners see each pair's rails summed
// up. A NIC that fails hands its traffic to the others. See docs/rails.md.
//
// # Collectives
//
// Barrier, Bcast, Gather(v), Scatter(v), Allgather(v), Reduce, Allreduce
// (and AllreduceInto, which writes into a buffer of the caller's),
// ReduceScatter(Block), Scan, Exscan and the typed helpers (SendSlice,
// AllgathervSlice, ...) work with or without a cost model. With one,
// Bcast, Allgather(v), Allreduce and Reduce choose their algorithm from
// its predictions (collective.PlanBcast, PlanAllgather, PlanAllreduce):
// pipelined trees built from the rates, a paced mesh or a ring,
// reduce-scatter in blocks in proportion to the NIC rates. Config and
// WithAlgorithm force one. Reductions combine in rank order, so an Op
// need only be associative, as in MPI. Alltoall(v) is planned with the
// total-exchange planners of package
// collective and executed so that each rank receives one large message at
// a time in the planned order; Multicast and Redistribute use the
// multicast and redistribution planners the same way. Collectives must be
// called in the same order on every rank of a communicator; a rank that
// calls another collective is reported (ErrMismatch), not mixed up.
//
// # Failures
//
// A rank that dies, closes early or stops answering makes every pending and
// later operation that depends on it fail, on every rank, with a
// *RankError naming it (errors.Is(err, ErrRankFailed)). Argument errors
// are *ArgError (ErrArgument) and are reported before any byte moves.
// Closed communicators return errors matching net.ErrClosed; timeouts match
// context.DeadlineExceeded.
package comm
