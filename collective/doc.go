// Package collective is hetcomm's planning core: given a cost [Model] and a
// communication pattern it returns a [Plan], plain data that the simulator
// and the runtime executor both consume.
//
// It implements three papers:
//
//   - total exchange (all-to-all personalised): the caterpillar baseline,
//     series of maximum- or minimum-weight complete matchings, the greedy
//     technique and the open-shop heuristic of Bhat, Prasanna and
//     Raghavendra ([PlanExchange]);
//   - multiple multicast: FEF, ECF, WR, EAF, RR, RRS and the preemptive
//     ECFP, WRP, EAFP, RRP, RRSP of Wu, Yeh and Liu ([PlanMulticast]);
//   - cluster-to-cluster redistribution through a backbone that carries at
//     most k transfers: GGP and OGGP of Jeannot and Wagner, and brute force
//     for comparison ([PlanRedistribution]).
//
// The package is pure: standard library only, no goroutines, no clocks, and
// randomness only from an explicit seed, so the same code reproduces the
// papers' simulations and plans the live collectives.
package collective
