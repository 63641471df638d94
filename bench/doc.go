// Package bench reproduces the papers' studies in simulation, plans from
// JSON problems, and (later) runs live benchmarks on the testbed. Its
// command is bench/cmd/hetbench. The runtime never imports it.
//
// Each simulation experiment lives in its own file and registers itself
// with [Register] from an init function, so `hetbench sim NAME` finds it.
package bench
