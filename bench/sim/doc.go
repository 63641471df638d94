// Package sim reproduces the papers' studies in simulation and plans
// collectives from JSON problems. It starts no ranks and opens no sockets:
// it calls the pure planners and simulators of collective and taskmap and
// writes tables and plots.
//
// `hetbench sim NAME` ([SimCommand]) runs one registered experiment:
// alltoall (Bhat, Prasanna and Raghavendra), multicast (Wu, Yeh and Liu),
// redistribute (Jeannot and Wagner) or remap (Maheswaran and Siegel). Each
// lives in its own file and registers itself with [Register] from an init
// function. `hetbench plan` ([PlanCommand]) plans one collective from a
// problem file (docs/plan-format.md) with one planner or all of them
// ([CompareAll]).
package sim
