// Package netprobe measures the network between the ranks of a job and
// turns the measurements into a [collective.Model], the cost model from
// which package collective plans every collective. It probes through a
// [Port], which comm implements on a private communicator, so the probes
// cross the same transport stack as the collectives they will plan.
//
// # Links: the fabric probe (the default)
//
// [Probe] is collective. By default (Config.Method [MethodFabric]) it
// measures what the fabric model needs rather than every pair, so its
// time grows with the number of steps, not of pairs:
//
//   - latencies: pairs exchange a few tiny round trips, in rounds
//     without barriers, each rank in one pair a round (and, in the first
//     three rounds, a few small messages for the send and receive
//     overheads); T is half the shortest round trip, the same both ways.
//     Up to Config.PingAll ranks (16) every pair, in the rounds of a
//     tournament; beyond, a sample in a few rounds (each rank with two or
//     more of its group, every pair of groups, one pair a rank kept to
//     check), and the other pairs inferred as a_i + a_j + D(group of i,
//     group of j) fitted by least squares, unless the check pairs show
//     that the network's latencies are not of that form: then the other
//     pairs are pinged too (pings.go);
//   - NICs: steps of concurrent flows in which every rank sends at most
//     one and receives at most one, and at most one flow leaves or enters
//     each group of ranks (Config.Cuts: subnets) until a flow crossing
//     between groups was seen, then no more than such a flow carried, so
//     that no two flows share a bottleneck. A flow is a few large
//     transfers (measureFlows: the median of three, sized to take 60 ms).
//     A rank's egress is the fastest flow it sent, its ingress the
//     fastest it received; the first step sends around a ring in each
//     group, the next ones pair the ranks whose estimate is not settled
//     with the fastest partners (see fabricPlan). A rank whose egress no
//     single flow can show (no other rank received faster: the fastest
//     NICs, or NICs all alike) sends to several receivers at once, a
//     fan-out, whose aggregate is its egress if the receivers could
//     take more; a rank whose egress is known fans out to slower
//     receivers of its group, and each flow clearly slower than the
//     fan's fastest shows its receiver's ingress. Those steps go on
//     (up to 12) while more pairs are in doubt than twice the ranks;
//   - pair rates: min(egress of i, ingress of j), or the pair's own flow
//     where it was measured clearly slower; for the rates a rank with
//     three or more flows it limited near its best has the median of them
//     as its NIC, not the fastest (which a token bucket's burst may have
//     sped up; nicRates); a pair is measured itself when
//     that inference is in doubt (the smaller side of the minimum is not
//     known exactly, an estimate rests on one flow, or its ends showed
//     flows much slower than their NICs).
//
// So the fabric probe assumes a switched network limited by NICs and
// segments; on links shaped pair by pair, whose rates are not the
// minimum of two NICs, use the tournament. A [RailPort] of several rails
// is probed rail by rail with the tournament.
//
// # Links: the tournament (HETCOMM_PROBE=pairwise)
//
// With [MethodPairwise] ([ModePairwise]), [Probe] measures every ordered
// pair of ranks in the
// rounds of a round-robin tournament ([Tournament]) with a barrier between
// rounds, so no rank takes part in two probes at once; within a round,
// [Schedule] picks which end of each pair measures first so that the flows
// crossing the likely cuts of the ranks (two clusters behind one backbone)
// are balanced between the two directions.
//
// For each direction i->j, rank i sends a sweep of message sizes ([Sweep]:
// growing by a factor of 4 until the size-dependent part of the time
// dominates, within [Config]'s size and time budgets), each answered by
// an 8-byte acknowledgement (the echoing rank's clock), and keeps the
// fastest repetition of each size.
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
// fabric probe tests the cut around every group of ranks (Config.Cuts,
// when there are several: racks behind their uplinks) and keeps every
// segment found. From six groups on, a third of them are tested at once,
// each against its own share of the other groups' ranks (dealt round
// robin across the groups), so that each uplink under test carries a
// full load and every other about half of one or less: four rounds at
// most, however many groups. Otherwise, and with the tournament, the probe tests up
// to three candidate cuts (Config.Cuts, which comm fills with the ranks
// of each subnet; the cut [collective.Clusters] finds in the pair rates;
// the two halves of the ranks) and keeps the first segment found. A test
// runs concurrent flows: every rank of one side sends to every rank of
// the other at once, both ways, each flow its share of its ends' NICs,
// paced to it when the port is a [PacedPort]. A direction that takes over
// 1.25 times the NIC bound (1.6 unpaced) is limited by a segment; a
// second round, paced to 1.2 times the capacity the first found, measures
// it again (flows offered at twice a segment's rate lose packets, which
// underrates it), and is offered 1.2 times more while the flows keep
// their pace (three rounds at most). Each flow goes as eight messages,
// and a direction's capacity is the more of what crossed by the time all
// but an eighth of its receivers were done (the most of any round) and
// what crossed while every flow ran (the arrivals on rank 0's clock,
// from an eighth of the bytes to half; the median of the rounds). A
// segment so measured within 10% of what the NICs on its two sides feed
// it, both ways, is dropped (a noisy first round found it). The
// segments go into the model's Segments and every test into
// [Result].Cuts ([CutProbe], with each round's two measures).
//
// # Node overheads and clocks
//
// Besides the links, every rank fits its own send and receive overheads,
// S(i,m) = Sc + Sm·m and R(j,m) = Rc + Rm·m, to the time its Send calls
// took and the time its Recv calls took once the message had arrived, on
// messages of at most 64 KiB (beyond a socket buffer, a send also waits
// for the transmission). And every rank estimates the offset from its
// clock to rank 0's from the round trip of least delay (Cristian's
// method): [Result].Offsets. The tournament measures it in every rank's
// probe with rank 0; the fabric probe from the echoes of its pings (each
// acknowledgement carries the echoing rank's clock), composed along the
// fewest pings from rank 0.
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
// Directory at start-up in the mode of HETCOMM_PROBE (cached by default;
// pairwise forces the tournament).
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
