// Package taskmap maps graphs of subtasks with data dependencies onto
// heterogeneous machines: the static baseline mapping, the hybrid
// remapper of Maheswaran and Siegel ("A dynamic matching and scheduling
// algorithm for heterogeneous computing systems", HCW '98) in its three
// variants PS, CS and CD, and Generational Scheduling for comparison,
// with a discrete-event simulator that executes a mapping under run-time
// values drawn around the expected ones.
//
// A [Graph] lists subtasks, each with its expected execution time on every
// machine (the e_ij matrix), and data items, each with a size, one
// producer and any number of consumers. [NewProblem] adds the
// communication model (a [collective.Model]: latency plus per-byte time
// per ordered pair of machines) and the machines' availability times,
// validates everything and partitions the graph into blocks (section 3.2).
//
// [Baseline] is the static mapping the remapper starts from. A
// [Remapper] holds the run-time phase: the caller executes the mapping,
// and when the first subtask of block k-1 starts it calls
// [Remapper.Remap] for block k with an [Observation] of what has started
// and completed. [Simulate] does exactly that in simulated time; the
// taskrun package does it on hetcomm ranks.
//
// The package is pure: standard library (and collective's model) only, no
// goroutines, no clocks, and randomness only from a caller's *rand.Rand.
package taskmap
