// Package taskrun executes a task graph on the ranks of a hetcomm
// communicator, mapped by the algorithms of package taskmap: the static
// baseline, the hybrid remapper (PS, CS, CD) or generational scheduling.
//
// Every rank declares the same [Graph] (tasks are Go functions with
// declared input and output items, as byte slices or, through [Typed],
// typed slices) and calls [Run]. The root rank maps the tasks while they
// execute, as the hybrid remapper prescribes: block 0 goes out at once,
// block k is remapped when the first task of block k-1 starts, from the
// completion times measured so far and expected times elsewhere. Each rank
// runs the tasks it receives in order, each once its inputs are there;
// outputs go directly from the producer's rank to the consumers' ranks
// with Isend and Irecv, on a private communicator split from the caller's.
//
// Expected execution times come from Task.Expected (seconds per rank),
// or from Task.Work times a per-rank speed: given (Config.SecondsPerUnit),
// probed at start-up (Config.Probe, or [DefaultProbe]), or measured in an
// earlier run (Config.Profile from Result.Profile). The communication
// model is the communicator's (netprobe's) when it has one.
package taskrun
