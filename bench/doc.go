// Package bench holds what the hetbench commands share: result tables that
// write themselves as CSV, JSON and Markdown ([Table]), line plots
// ([LinePlot]), sample statistics ([Summarize]), and the commands' exit
// statuses and flag parsing ([ParseFlags]).
//
// The commands live in two packages: bench/sim reproduces the papers'
// studies in simulation and plans collectives from JSON problems (nothing
// runs on a network), and bench/live runs ranks and links and times them.
// Their executable is bench/cmd/hetbench. The runtime never imports any of
// them.
package bench
