// Package e2e holds end-to-end tests: they build hetrun and the examples
// and run real processes, under hetrun, by hand with the launcher
// contract, and under a real one-node Slurm.
package e2e
