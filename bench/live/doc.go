// Package live holds the hetbench commands that run real ranks and links
// and time them, as opposed to the simulations of bench/sim:
//
//   - `hetbench live` ([LiveCommand]) starts N ranks of the hetbench
//     executable through hetrun's launcher, runs Alltoallv, multiple
//     multicast, redistribution, Bcast, Allgather or Allreduce on them
//     (Bcast and Allreduce with each of their algorithms, forced with
//     comm.WithAlgorithm, each result checked once before it is timed)
//     and reports OSU-style timings beside the planner's prediction and
//     the lower bounds; with -peer mpi it runs the same pattern with Open
//     MPI (bench/peer/alltoallv.c: MPI_Alltoallv, MPI_Ibcast, MPI_Bcast,
//     MPI_Allgather or MPI_Allreduce) and prints the ratio;
//   - `hetbench probe` ([ProbeCommand]) starts N ranks, probes every link
//     and prints (or writes) the cost model;
//   - `hetbench synthetic` ([SyntheticCommand]) runs the multi-network
//     paper's synthetic benchmark over each rail, mux, agg and muxagg, in
//     one process over loopback with emulated shaping or on netlab hosts
//     through an agent.
//
// The rank sides are the hidden commands live-rank, probe-rank and
// synthetic-rank ([LiveRankCommand], [ProbeRankCommand],
// [SyntheticRankCommand]). Every command's -emulate flag accepts a model
// or a netlab topology (comm.LoadEmulation). The patterns of the live runs
// ([PatternSizes], [MulticastPattern], [RedistributionSizes]) are the
// ones the C peer builds.
package live
