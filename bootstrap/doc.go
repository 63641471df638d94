// Package bootstrap starts a world of ranks: it reads what the launcher
// says (hetrun's HETCOMM_* variables, or Slurm, Open MPI, MPICH/PALS,
// torchrun and Kubernetes Indexed Jobs, see [FromEnv]), meets the other
// ranks at a coordinator run by rank 0, and connects every pair of ranks
// once per rail (network interface) the two have in common ([Connect]).
//
// The start-up, step by step:
//
//  1. Every rank listens on each of its rails (HETCOMM_RAILS, or one
//     address on the route to the coordinator).
//  2. Every rank dials the coordinator, authenticates with the job secret
//     and sends its hello: its rank, its rails' addresses, its
//     certificate's fingerprint (tls, quic), its host and process id.
//  3. Once every rank has joined, the coordinator sends each the
//     directory (every rank's hello) and the ranks hang up.
//  4. Every rank dials the lower ranks and accepts the higher ones on
//     each rail they share, authenticating each link; a pair with several
//     rails gets one transport.RailSet over them.
//
// The package knows links and addresses, not collectives or cost models:
// comm.Init calls Connect and then probes the links it returns. The
// launcher (cmd/hetrun) uses only the environment contract: [Bootstrap],
// its [Bootstrap.Env] and [NewSecret].
package bootstrap
