// Package netprobe measures the network between the ranks of a job and
// turns the measurements into a [collective.Model], the cost model from
// which package collective plans every collective. It probes through a
// [Port], which comm implements on a private communicator, so the probes
// cross the same transport stack as the collectives they will plan.
//
// # Links
//
// [Probe] is collective. It measures every ordered pair of ranks in the
// rounds of a round-robin tournament ([Tournament]) with a barrier between
// rounds, so no rank takes part in two probes at once; within a round,
// [Schedule] picks which end of each pair measures first so that the flows
// crossing the likely cuts of the ranks (two clusters behind one backbone)
// are balanced between the two directions.
//
// For each direction i->j, rank i sends a sweep of message sizes ([Sweep]:
// growing by a factor of 4 until the size-dependent part of the time
// dominates, within [Config]'s size and time budgets), each answered by a
// one-byte acknowledgement, and keeps the fastest repetition of each size.
// One message of m bytes then costs T + m/B:
//
//   - B, per direction (the two directions of a link may differ), comes
//     from the slope that [FitLine] (Theil-Sen, robust to outliers) fits
//     to the large transfers of the sweep;
//   - T is half the round trip of tiny messages, the same both ways: a
//     difference of one-way delays cannot be observed without a common
//     clock.
//
// A link too fast for the sizes used to show its rate gets the fastest
// rate measured anywhere. Probes of one round share no rank but may share
// a link of the network's core; the directions whose rate disagrees with
// what both their ends achieve with the other ranks ([Suspects]) are
// measured again, in steps that keep apart the directions that may have
// collided, or alone.
//
// With a [RailPort] of several rails (NICs), every rail is probed in turn
// and the model lists each rail; its top-level costs are each pair's rails
// summed up under the rail policy ([EffectiveRails]).
//
// # Shared segments
//
// Pair probes cannot see a link that several pairs share, such as a
// backbone between two clusters: one pair alone never fills it. Last, the
// probe tests up to three candidate cuts (Config.Cuts, which comm fills
// with the ranks of each subnet; the cut [collective.Clusters] finds in
// the pair rates; the two halves of the ranks) with concurrent flows: every
// rank of one side sends to every rank of the other at once, both ways,
// paced to its share of the NIC bound when the port is a [PacedPort]. A
// direction that takes over 1.25 times the bound (1.6 unpaced) is limited
// by a segment; a second round, paced to 1.2 times the capacity the first
// found, measures it again (flows offered at twice a segment's rate lose
// packets, which underrates it). The first segment found goes into the
// model's Segments and every test into [Result].Cuts ([CutProbe]).
//
// # Node overheads and clocks
//
// Besides the links, every rank fits its own send and receive overheads,
// S(i,m) = Sc + Sm·m and R(j,m) = Rc + Rm·m, to the time its Send calls
// took and the time its Recv calls took once the message had arrived, on
// messages of at most 64 KiB (beyond a socket buffer, a send also waits
// for the transmission). And every rank estimates, during its probe with
// rank 0, the offset from its clock to rank 0's from the round trip of
// least delay (Cristian's method): [Result].Offsets.
//
// # The directory
//
// Each rank sends what it measured (its links as a sender, its overheads,
// its clock offset) to rank 0, which assembles the model and broadcasts it
// as the directory, a [Result] in JSON: every rank returns the same one
// ([DecodeResult] parses and validates it).
//
// [Directory] adds a cache and the probing modes: [ModeFull] always probes
// and refreshes the cache; [ModeCached] has rank 0 look for a model cached
// for the same network (a [Key]: the transport, the ranks' hosts and their
// rails' addresses) and broadcast it, and probes only without a sound one;
// [ModeOff] tells the caller not to probe at all (comm then uses a model
// file or a uniform model). The cache file ([CachePath] in the given
// directory; [DefaultCacheDir] is $HETCOMM_CACHE_DIR, else hetcomm under
// the user's cache directory) is written atomically by rank 0 and read
// back only if it is for the same key and holds a valid model
// ([LoadCache], [SaveCache]). Unless it is given a model, comm.Init runs
// Directory at start-up in the mode of HETCOMM_PROBE (cached by default).
//
// # Drift
//
// [Drift] watches the rates a rank observes on its incoming links during
// collectives and, once several observations in a row are off the model
// by more than a threshold, proposes the median of the latest of them as
// the link's new rate. It is pure: the caller feeds it observations and applies the
// proposals.
//
// netprobe imports transport and collective (for the Model type); it does
// no planning.
package netprobe
