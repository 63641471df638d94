package netprobe

import (
	"math"
	"slices"
	"sort"

	"github.com/hetcomm/hetcomm/collective"
)

// fabricPlan decides, at rank 0, the steps of flows of the fabric probe
// and infers the pair rates from what they found.
//
// Every step is a set of flows in which every rank sends at most one and
// receives at most one, and at most one flow leaves and one enters each
// group (rankGroups): within a group no segment lies between the ranks,
// and a segment between groups then carries one flow each way, which a
// single flow alone would meet too. So a flow's rate is what the pair
// reaches alone: min(sender's egress, receiver's ingress) on a switched
// network.
//
// Each rank's egress is estimated as the fastest flow it sent, its
// ingress as the fastest it received. An estimate is settled when it
// cannot be an underestimate that matters: a flow from i to k slower than
// k received from someone else was limited by i (i's egress is that
// rate), and a flow from i at i's best to the fastest receiver there is
// shows whatever i can send to anyone. The first step sends around a ring
// in each group; the next ones (up to maxNICRounds) match the unsettled
// senders with the fastest free receivers and the unsettled receivers
// with the fastest free senders. A pair's rate is then its flow's, if it
// was measured, else min(egress of i, ingress of j); it is in doubt when
// the smaller side of that minimum is not settled, or when one of its
// ends showed a flow slower than its ends three times (a network that is
// not limited by NICs alone); pairs in doubt are measured themselves, in steps of
// the same kind.
type fabricPlan struct {
	n      int
	groups []int
	cfg    Config
	obs    map[Pair]float64
	// outs and ins list each rank's pairs in obs, as sender and as
	// receiver (observe keeps them): the rules look at one rank's pairs,
	// and scanning obs for them made rank 0's planning of a 512-rank
	// probe take 17 s of CPU, 3 minutes at 1,024.
	outs, ins [][]Pair
	// settled caches settledOut and settledIn (0: not known yet, 1: no,
	// 2: yes) until the next Done.
	setOut, setIn []int8
	times         map[Pair]int       // how often each pair was measured
	meas          map[Pair][]float64 // every measurement of each pair alone
	// fanMeas are the rates of pairs seen in fan-outs limited by their
	// receiver (Done), which stand for a pair not measured alone.
	fanMeas map[Pair][]float64
	out     []float64 // fastest flow sent
	in      []float64 // fastest flow received
	// irregular marks ranks that showed a flow much slower than both its
	// ends: their pairs are measured, not inferred.
	irrOut, irrIn []bool
	// crossOut and crossIn are the fastest flows seen leaving and
	// entering each group.
	crossOut, crossIn map[int]float64
	latency           [][]float64 // from the pings, when known
	// fans are the fan-outs each rank ran (sendFan).
	fans map[int][]fanRec
	// inLow is what each rank was seen to receive in a fan-out that its
	// sender may have limited.
	inLow      map[int]float64
	rounds     int
	doubtSteps int
	last       []flowItem
}

func newFabricPlan(n int, groups []int, cfg Config) *fabricPlan {
	return &fabricPlan{n: n, groups: groups, cfg: cfg, obs: map[Pair]float64{}, outs: make([][]Pair, n), ins: make([][]Pair, n), setOut: make([]int8, n), setIn: make([]int8, n), times: map[Pair]int{}, meas: map[Pair][]float64{}, fanMeas: map[Pair][]float64{},
		out: make([]float64, n), in: make([]float64, n), irrOut: make([]bool, n), irrIn: make([]bool, n),
		crossOut: map[int]float64{}, crossIn: map[int]float64{}, fans: map[int][]fanRec{}, inLow: map[int]float64{}}
}

// irregular: a flow slower than both its ends reach with others by this
// factor has a limit of its own. Noise on a busy machine slows flows by
// up to 15%, and a token bucket that refilled while a rank waited speeds
// the flow an end's estimate rests on by up to 10% on slow NICs: on
// racks32 a pair from a 20 Mbit/s NIC, measured at 2.05 MB/s (the median
// of three), against that NIC's best of 2.58 (it carries 2.39), made at
// 1.25 two ranks irregular and took 32 steps more (20.6 s).
const irregular = 1.3

// settleTol: a flow slower than a rank's best by this factor was limited
// by its other end.
const settleTol = 1.1

// settleSure: a flow slower by this factor than its far end reaches with
// others shows, alone, that its near end limited it (beyond the noise
// of two flows, which may be settleTol apart).
const settleSure = 1.2

// step collects the flows of one step under its rules.
type step struct {
	p                 *fabricPlan
	sends, recvs      []bool
	crossOut, crossIn map[int]float64 // expected rates leaving, entering each group
	pairs             map[Pair]bool
	items             []flowItem
}

func (pl *fabricPlan) newStep() *step {
	return &step{p: pl, sends: make([]bool, pl.n), recvs: make([]bool, pl.n),
		crossOut: map[int]float64{}, crossIn: map[int]float64{}, pairs: map[Pair]bool{}}
}

// fits tells whether a flow from a to b can join the step: a sends
// nothing yet, b receives nothing yet, b is not sending to a (the two
// flows would share their connections' acknowledgements and their ends'
// CPUs), and if it leaves a's group, what the step's flows are expected
// to carry out of a's group and into b's stays within what a single flow
// was seen to carry out of and into them (the segments between groups,
// if any, carried that much; before any flow crossed, one flow at a
// time).
func (s *step) fits(a, b int) bool {
	return !s.sends[a] && s.fitsRecv(a, b)
}

// fitsRecv is fits without the rule that a sends one flow (a fan-out
// adds flows from a sender that has one).
func (s *step) fitsRecv(a, b int) bool {
	if a == b || s.recvs[b] || s.pairs[Pair{b, a}] {
		return false
	}
	ga, gb := s.p.groups[a], s.p.groups[b]
	if ga == gb {
		return true
	}
	e := s.p.expect(a, b)
	if used, busy := s.crossOut[ga]; busy && used+e > s.p.crossOut[ga] {
		return false
	}
	if used, busy := s.crossIn[gb]; busy && used+e > s.p.crossIn[gb] {
		return false
	}
	return true
}

// fitsIn is fitsRecv without the budget of a's group: b receives nothing
// yet, is not sending to a, and what the step's flows carry into b's
// group stays within what a single flow was seen to carry into it.
func (s *step) fitsIn(a, b int) bool {
	if a == b || s.recvs[b] || s.pairs[Pair{b, a}] {
		return false
	}
	if ga, gb := s.p.groups[a], s.p.groups[b]; ga != gb {
		if used, busy := s.crossIn[gb]; busy && used+s.p.expect(a, b) > s.p.crossIn[gb] {
			return false
		}
	}
	return true
}

func (s *step) add(a, b int, doubt bool) {
	s.sends[a], s.recvs[b], s.pairs[Pair{a, b}] = true, true, true
	if ga, gb := s.p.groups[a], s.p.groups[b]; ga != gb {
		s.crossOut[ga] += s.p.expect(a, b)
		s.crossIn[gb] += s.p.expect(a, b)
	}
	it := flowItem{A: a, B: b, Bytes: s.p.size(a, b), Doubt: doubt}
	if s.p.latency != nil {
		it.RTT = 2 * s.p.latency[a][b]
	}
	s.items = append(s.items, it)
}

// expect is the rate a flow from a to b is expected to have: what the
// NICs showed, when the slower of them is settled; else infinite (it may
// be faster than it showed).
func (pl *fabricPlan) expect(a, b int) float64 {
	e := math.Inf(1)
	if out := pl.out[a]; out > 0 && pl.settledOut(a) {
		e = out
	}
	if in := pl.in[b]; in > 0 && pl.settledIn(b) {
		e = min(e, in)
	}
	return e
}

// size is the transfer size that should take flowTime at the rate the
// flow is expected to have (0: unknown).
func (pl *fabricPlan) size(a, b int) int64 {
	rate := min(pl.out[a], pl.in[b])
	if rate <= 0 {
		return 0
	}
	return int64(rate * flowTime.Seconds())
}

// Next returns the next step, empty when done.
func (pl *fabricPlan) Next() []flowItem {
	var items []flowItem
	switch {
	case pl.rounds == 0:
		items = pl.ring()
	case pl.rounds < minNICRounds,
		pl.rounds < maxNICRounds && len(pl.inDoubt()) > 2*pl.n:
		items = pl.settle()
	}
	if len(items) > 0 {
		pl.rounds++
	} else {
		pl.rounds = maxNICRounds
		items = pl.doubts()
	}
	pl.last = items
	return items
}

// ring sends from every rank to the next of its group, and around the
// groups of one rank.
func (pl *fabricPlan) ring() []flowItem {
	s := pl.newStep()
	members := map[int][]int{}
	var gs []int
	for r, g := range pl.groups {
		if len(members[g]) == 0 {
			gs = append(gs, g)
		}
		members[g] = append(members[g], r)
	}
	var singles []int
	for _, g := range gs {
		m := members[g]
		if len(m) == 1 {
			singles = append(singles, m[0])
			continue
		}
		for k, a := range m {
			s.add(a, m[(k+1)%len(m)], false)
		}
	}
	if len(singles) > 1 {
		for k, a := range singles {
			if b := singles[(k+1)%len(singles)]; s.fits(a, b) {
				s.add(a, b, false)
			}
		}
	}
	return s.items
}

// settledOut tells whether rank i's egress is known exactly: a flow from
// i was slower than its receiver received from someone else, so i
// limited it.
func (pl *fabricPlan) settledOut(i int) bool {
	return cached(&pl.setOut[i], func() bool {
		return pl.fanSettled(i) || pl.limited(pl.outs[i], pl.out[i], pl.farIn)
	})
}

// farIn is what the receiver of pair d takes from others, as far as more
// than one flow shows it (sure).
func (pl *fabricPlan) farIn(d Pair) float64 { return pl.sure(d.B, pl.in, pl.ins, pl.inLow) }

// farOut is what the sender of pair d sends to others (sure).
func (pl *fabricPlan) farOut(d Pair) float64 { return pl.sure(d.A, pl.out, pl.outs, nil) }

// limited tells whether a rank's estimate best (from its pairs, the
// other end of each able to do far) is confirmed (top) and the rank's
// flows show that it limits them (limitedFlows).
func (pl *fabricPlan) limited(pairs []Pair, best float64, far func(Pair) float64) bool {
	if _, ok := pl.top(pairs); !ok {
		return false
	}
	near, settles := pl.limitedFlows(pairs, best, far, nil)
	return settles || len(near) >= nicFlows
}

// limitedFlows returns the rates of a rank's flows, measured alone, that
// it limited (their other end, far, could do settleTol more) and that
// came within nicNear of its best (appended to buf), and whether one of
// them at its best (within 5%) shows the rank's limit: its other end
// could do settleSure more, or two such other ends settleTol more each.
// A gap of 10% is within the noise of two flows: on racks32 a 400
// Mbit/s sender's flow into a 100 Mbit/s NIC, 5% low, against a flow
// into that NIC 5% high, settled the sender's egress at 11.7 MB/s, and
// every pair from it to a fast receiver came out at a quarter of its
// rate. (A flow of a fan-out that looked limited by its receiver may
// have got less than its share from TCP alone: on racks32 a 200 Mbit/s
// receiver's pairs came out at half their rate, settled by such a
// flow.)
//
// nicFlows flows near the best settle the rank too, not reaching it:
// their median is the rank's rate (nicRates), and best a pair of its own
// that read fast. On racks32 a 50 Mbit/s sender's flow into a 50 Mbit/s
// receiver read 6.46 MB/s twice, while its flows to faster receivers read
// 5.9-6.1: none came within 5% of 6.46, and its pairs were measured one a
// step, 12 steps more (9.9 s).
func (pl *fabricPlan) limitedFlows(pairs []Pair, best float64, far func(Pair) float64, buf []float64) (near []float64, settles bool) {
	near = buf[:0]
	witnesses := 0
	for _, d := range pairs {
		r := pl.obs[d]
		if r <= 0 || pl.times[d] == 0 || r*nicNear < best {
			continue
		}
		f := far(d)
		if f < settleTol*r {
			continue
		}
		near = append(near, r)
		if r*1.05 < best {
			continue
		}
		if f >= settleSure*r {
			settles = true
		} else if witnesses++; witnesses == 2 {
			settles = true
		}
	}
	return near, settles
}

// cached returns f(), computed once until *c is cleared (Done).
func cached(c *int8, f func() bool) bool {
	if *c == 0 {
		*c = 1
		if f() {
			*c = 2
		}
	}
	return *c == 2
}

// observe records v as pair d's rate.
func (pl *fabricPlan) observe(d Pair, v float64) {
	if _, ok := pl.obs[d]; !ok {
		pl.outs[d.A] = append(pl.outs[d.A], d)
		pl.ins[d.B] = append(pl.ins[d.B], d)
	}
	pl.obs[d] = v
}

// fanSettled tells whether a fan-out showed rank i's egress: its
// receivers could take more, and it reached i's best.
func (pl *fabricPlan) fanSettled(i int) bool {
	for _, f := range pl.fans[i] {
		if f.rate > 0 && f.room >= settleTol*f.rate && f.rate*1.05 >= pl.out[i] {
			return true
		}
	}
	return false
}

// settledIn is settledOut for rank j's ingress.
func (pl *fabricPlan) settledIn(j int) bool {
	return cached(&pl.setIn[j], func() bool {
		return pl.limited(pl.ins[j], pl.in[j], pl.farOut)
	})
}

// loneIn tells whether rank j's ingress is shown by flows measured
// alone: two of them, from senders that could send settleTol more, reached
// in[j] (within 5%), so j took no more. What a flow of a fan-out showed
// above that does not raise the estimate then: even sized to take
// flowTime each, a fan-out's flow into a 12.5 MB/s NIC read 14.2 MB/s on
// racks32 (whose flows alone from seven senders got 11.4-12.2), and every
// pair into it came out 14% high.
func (pl *fabricPlan) loneIn(j int) bool {
	n := 0
	for _, d := range pl.ins[j] {
		if r := pl.obs[d]; pl.times[d] > 0 && r*1.05 >= pl.in[j] && pl.out[d.A] >= settleTol*r {
			n++
		}
	}
	return n >= 2
}

// sure is rank r's estimate est[r] (its pairs are pairs[r]; low, when
// not nil, what it was seen to take at least) as far as more than one
// flow shows it: when the flow that gives it may be flattered
// (flattered), the best of the others. The settling rules take a flow
// 10% slower than what its far end reaches with others as limited by its
// near end: a flow that a token bucket or a late timer flattered (on
// racks32 12.78 MB/s into a 12.5 MB/s NIC whose other flows got
// 11.9-12.0) once made a 25 MB/s sender that had sent 11.4 MB/s into it
// look settled at 12, and every pair from it to a fast receiver came out
// at half its rate.
func (pl *fabricPlan) sure(r int, est []float64, pairs [][]Pair, low map[int]float64) float64 {
	best, _ := pl.top(pairs[r])
	if others, ok := pl.flattered(best, pairs[r], low[r]); ok {
		return others
	}
	return est[r]
}

// second is the best rate among pairs other than best.
func (pl *fabricPlan) second(best Pair, pairs []Pair) float64 {
	v := 0.0
	for _, d := range pairs {
		if d != best {
			v = max(v, pl.obs[d])
		}
	}
	return v
}

// flattered tells whether best, a rank's best pair of pairs, may be a flow
// that flattery made faster: it stands out (standsOut), but by no more
// than flattery does (flatters) above the others, the best of the rank's
// other pairs or floor (what the rank was seen to take at least), which
// it returns. A flow that stands out by more met a faster far end.
func (pl *fabricPlan) flattered(best Pair, pairs []Pair, floor float64) (others float64, ok bool) {
	if !pl.standsOut(best, pairs) {
		return 0, false
	}
	others = max(floor, pl.second(best, pairs))
	return others, pl.obs[best] <= flatters*others
}

// flatters is the most that a token bucket's burst, a late timer or a
// flow that ended early makes one flow faster than the rate it met, as
// seen on the netlab testbeds (1.06 times the rank's other flows, and up
// to 1.29 times its NIC: 6.15 MB/s into a 5 MB/s NIC whose other flows
// got 4.8): a flow that stands out by more met a faster far end.
const flatters = 1.3

// settle matches the unsettled senders, fastest first, with the fastest
// free receivers they have not sent to, and the unsettled receivers with
// the fastest free senders.
func (pl *fabricPlan) settle() []flowItem {
	s := pl.newStep()
	byOut, byIn := pl.order(pl.out), pl.order(pl.in)
	for _, a := range byOut {
		if pl.settledOut(a) || s.sends[a] || pl.irrOut[a] {
			continue
		}
		if pl.needsFan(a) && s.addFan(a, byIn) {
			continue
		}
		for _, b := range byIn {
			if _, seen := pl.obs[Pair{a, b}]; !seen && s.fits(a, b) {
				s.add(a, b, false)
				break
			}
		}
	}
	for _, a := range byOut {
		if pl.settledOut(a) && !s.sends[a] && !pl.irrOut[a] {
			s.addIngressFan(a)
		}
	}
	for _, b := range byIn {
		if pl.settledIn(b) || s.recvs[b] || pl.irrIn[b] {
			continue
		}
		for _, a := range byOut {
			if _, seen := pl.obs[Pair{a, b}]; !seen && s.fits(a, b) {
				s.add(a, b, false)
				break
			}
		}
	}
	if len(s.items) == 0 {
		return nil
	}
	// The ranks left free measure pairs in doubt meanwhile.
	for _, d := range pl.inDoubt() {
		if s.fits(d.A, d.B) {
			s.add(d.A, d.B, true)
		}
	}
	return s.items
}

// A fan-out settles the egress of a rank that no single flow can: one
// whose best flow is as fast as any rank was seen to receive (the ranks
// of the fastest class, or of a class of equal NICs, would never show
// that their egress is what limited their flows). The rank sends to
// several receivers of its group at once; if they can take more
// together (fanRoom times its best) and the aggregate stays at its best,
// its egress is that; else the aggregate is a new best, and a second fan
// tries again. The group's receivers share no segment with it, and
// none receives anything else in the step.

// fanRec is one fan-out: the aggregate rate and what its receivers were
// known to take together (their count times the slowest's ingress).
type fanRec struct{ rate, room float64 }

// fanRoom: the receivers of a fan-out take at least this factor of the
// sender's best together.
const fanRoom = 1.2

// maxFan bounds the receivers of a fan-out, and maxFans the fan-outs per
// rank.
const (
	maxFan  = 4
	maxFans = 2
)

// needsFan tells whether only a fan-out can settle rank a's egress: no
// other rank received anything faster than settleTol times a's best.
func (pl *fabricPlan) needsFan(a int) bool {
	if pl.out[a] <= 0 || len(pl.fans[a]) >= maxFans {
		return false
	}
	for b, r := range pl.in {
		if b != a && r >= settleTol*pl.out[a] {
			return false
		}
	}
	return true
}

// addFan adds a fan-out from a to the fewest free receivers of its group
// (fastest first) that take fanRoom times a's best together, and tells
// whether it could.
func (s *step) addFan(a int, byIn []int) bool {
	// Receivers of a's group if they can (no segment lies between them),
	// else, once the first NIC steps are over (a fan across groups takes
	// a crossing the single flows of those steps could use), the
	// fastest anywhere.
	return s.tryFan(a, byIn, true) || s.p.rounds >= minNICRounds && s.tryFan(a, byIn, false)
}

// A fan across groups may take more out of a's group than a single
// flow was seen to carry, as the only flows leaving the group in the
// step: its aggregate then shows a's egress up to what the group's
// uplink carries, which is also the most any pair leaving the group
// reaches alone (and a's pairs within the group are limited by their
// receivers, or the fan within the group would have served). Its
// receivers' groups keep their budgets; the aggregate raises what a's
// group was seen to send out (Done).
func (s *step) tryFan(a int, byIn []int, own bool) bool {
	pl := s.p
	if _, busy := s.crossOut[pl.groups[a]]; !own && busy {
		return false // the fan is to be the only thing leaving a's group
	}
	var rcv []int
	for _, b := range byIn {
		if len(rcv) == maxFan {
			break
		}
		if own && pl.groups[b] != pl.groups[a] {
			continue
		}
		if pl.in[b] <= 0 || !(own && s.fitsRecv(a, b) || !own && s.fitsIn(a, b)) {
			continue
		}
		rcv = append(rcv, b)
		if float64(len(rcv))*pl.in[b] < fanRoom*pl.out[a] {
			continue
		}
		if len(rcv) < 2 {
			// One receiver that takes that much is a single flow's job.
			return false
		}
		s.addFanOut(a, rcv)
		if !own {
			s.crossOut[pl.groups[a]] = math.Inf(1)
		}
		return true
	}
	return false
}

// addIngressFan adds a fan-out from a, whose egress is settled, to the
// free receivers of its group whose ingress is not, slowest first, as
// many as a's egress shared among them still shows (settleTol times
// what each was seen to receive, up to maxFan): a receiver that takes
// less than its share shows its ingress.
func (s *step) addIngressFan(a int) {
	pl := s.p
	var cand []int
	for b := range pl.n {
		if pl.groups[b] == pl.groups[a] && !pl.settledIn(b) && !pl.irrIn[b] && s.fitsRecv(a, b) {
			cand = append(cand, b)
		}
	}
	sort.SliceStable(cand, func(x, y int) bool { return pl.in[cand[x]] < pl.in[cand[y]] })
	var rcv []int
	for _, b := range cand {
		if len(rcv) == maxFan || float64(len(rcv)+1)*settleTol*pl.in[b] > pl.out[a] {
			break
		}
		rcv = append(rcv, b)
	}
	if len(rcv) < 2 {
		return
	}
	s.addFanOut(a, rcv)
}

// addFanOut adds the flows of a fan-out from a to rcv, each sized to
// take flowTime at its share of a's best.
func (s *step) addFanOut(a int, rcv []int) {
	share := s.p.out[a] / float64(len(rcv))
	for _, b := range rcv {
		s.add(a, b, false)
		it := &s.items[len(s.items)-1]
		it.Fan = true
		it.Bytes = int64(share * flowTime.Seconds())
	}
}

// order lists the ranks by decreasing rate, then increasing rank.
func (pl *fabricPlan) order(rate []float64) []int {
	o := make([]int, pl.n)
	for i := range o {
		o[i] = i
	}
	sort.SliceStable(o, func(a, b int) bool { return rate[o[a]] > rate[o[b]] })
	return o
}

// inDoubt lists the pairs whose inferred rate is in doubt.
func (pl *fabricPlan) inDoubt() []Pair {
	so, si := make([]bool, pl.n), make([]bool, pl.n)
	for r := 0; r < pl.n; r++ {
		so[r], si[r] = pl.settledOut(r), pl.settledIn(r)
	}
	// What reaches a rank from outside its group (or leaves it for
	// outside), when two senders (receivers) that could do more all met
	// the same limit: the pairs across groups are at that limit.
	xo, xi := make([]bool, pl.n), make([]bool, pl.n)
	for r := 0; r < pl.n; r++ {
		xo[r], xi[r] = pl.acrossOut(r, si), pl.acrossIn(r, so)
	}
	loneOut, loneIn := pl.lone()
	var out []Pair
	again := map[Pair]bool{}
	for r := 0; r < pl.n; r++ {
		// A rank's best flow is measured again (up to three times) when
		// the rank is not settled and that flow is its only support or
		// stands above its others (a token bucket that refilled while a
		// starved rank waited flatters a slow link's flow: on racks32,
		// 2.70 MB/s through two 2.5 MB/s NICs whose other flows got
		// 2.33-2.47; neither rank then settled, and each of their pairs
		// took a step of its own, 21 steps more); and, settled or not,
		// when it may be flattered, since the estimate is that flow (a
		// 20 Mbit/s rank's ingress rested on one flow at 2.75 MB/s, its
		// others at 2.44, and every pair into it came out 13% high).
		for _, side := range []struct {
			top     func(int) (Pair, bool)
			pairs   [][]Pair
			settled []bool
		}{{pl.topOut, pl.outs, so}, {pl.topIn, pl.ins, si}} {
			d, ok := side.top(r)
			_, flat := pl.flattered(d, side.pairs[r], 0)
			if ((!ok || pl.standsOut(d, side.pairs[r])) && !side.settled[r] || flat) && d.A >= 0 && pl.times[d] < 3 {
				again[d] = true
			}
		}
	}
	for d, ms := range pl.meas {
		// Two measurements 10% apart: a third decides.
		if len(ms) == 2 && max(ms[0], ms[1]) > settleTol*min(ms[0], ms[1]) {
			again[d] = true
		}
	}
	for i := 0; i < pl.n; i++ {
		for j := 0; j < pl.n; j++ {
			if i == j {
				continue
			}
			// A pair seen only in a fan-out is inferred like one not
			// seen (a flow of a fan-out may have got less than its
			// share from TCP alone).
			if r, seen := pl.obs[Pair{i, j}]; seen && (pl.times[Pair{i, j}] > 0 || len(pl.fanMeas[Pair{i, j}]) == 0) {
				// Measured once, and much slower than its ends: noise, or a
				// limit of its own? Once more decides, up to three times.
				// What the ends reach is what the irregular judgement
				// (Done) takes, their confirmed best alone: a flow that
				// flattery made 1.35 times faster than a 5 MB/s NIC had
				// every pair from that rank measured three times, one
				// a step (26 steps on racks32).
				if again[Pair{i, j}] || pl.times[Pair{i, j}] < 3 && r > 0 && r*irregular < min(loneOut[i], loneIn[j]) {
					out = append(out, Pair{i, j})
				}
				continue
			}
			if pl.irrOut[i] || pl.irrIn[j] || pl.out[i] <= 0 || pl.in[j] <= 0 {
				out = append(out, Pair{i, j})
				continue
			}
			okOut := pl.out[i] <= 1.05*pl.in[j] && so[i]
			okIn := pl.in[j] <= 1.05*pl.out[i] && si[j]
			if pl.groups[i] != pl.groups[j] {
				okOut = okOut || xo[i] && pl.in[j] >= pl.out[i]
				okIn = okIn || xi[j] && pl.out[i] >= pl.in[j]
			}
			if !okOut && !okIn {
				out = append(out, Pair{i, j})
			}
		}
	}
	return out
}

// acrossIn tells whether rank j's ingress from outside its group is
// known: flows into j from senders of two other groups, each at j's
// best (within 5%) while its sender's egress is settled above that,
// met the same limit, j's NIC or the segment between (which then limits
// every sender outside, and Probe's segment tests find it). A rank of
// the fastest class whose group holds no sender as fast is reached at
// full speed only from outside, through an uplink that may be slower
// than its NIC: its ingress is then never settled, and each pair into
// it from a fast sender outside would be measured on its own (47 steps
// of one flow for one such rank of 256 on racks, in simulation).
// so[r] tells whether rank r's egress is settled.
func (pl *fabricPlan) acrossIn(j int, so []bool) bool {
	return pl.acrossLimit(pl.in[j], pl.ins[j], func(d Pair) (int, bool) {
		return d.A, pl.groups[d.A] != pl.groups[j] && so[d.A]
	}, pl.out)
}

// acrossOut is acrossIn for rank i's egress to outside its group (si[r]:
// rank r's ingress is settled).
func (pl *fabricPlan) acrossOut(i int, si []bool) bool {
	return pl.acrossLimit(pl.out[i], pl.outs[i], func(d Pair) (int, bool) {
		return d.B, pl.groups[d.B] != pl.groups[i] && si[d.B]
	}, pl.in)
}

// acrossLimit: among the rank's pairs, far ends in two distinct groups
// (mine gives a pair's far end and whether it counts) reached best
// (within 5%), each while able to do at least 5% more (far). Two groups,
// so that a segment between the rank's group and one other alone cannot
// be what both met.
func (pl *fabricPlan) acrossLimit(best float64, pairs []Pair, mine func(Pair) (int, bool), far []float64) bool {
	if best <= 0 {
		return false
	}
	seen := -1
	for _, d := range pairs {
		r := pl.obs[d]
		end, ok := mine(d)
		if !ok || r*1.05 < best || far[end] < 1.05*r || seen >= 0 && pl.groups[end] == seen {
			continue
		}
		if seen >= 0 {
			return true
		}
		seen = pl.groups[end]
	}
	return false
}

// doubts packs the pairs in doubt into a step. A sender with several
// pairs in doubt whose egress only a fan-out can settle (needsFan) fans
// out first: settled, it takes its pairs out of doubt at once, where
// measuring them would take a step each.
func (pl *fabricPlan) doubts() []flowItem {
	s := pl.newStep()
	doubt := pl.inDoubt()
	per := map[int]int{}
	for _, d := range doubt {
		per[d.A]++
	}
	byIn := pl.order(pl.in)
	for _, a := range pl.order(pl.out) {
		if per[a] >= 2 && !pl.settledOut(a) && !pl.irrOut[a] && pl.needsFan(a) {
			if !s.tryFan(a, byIn, true) {
				s.tryFan(a, byIn, false)
			}
		}
	}
	// A pair that gives one of its ends its estimate, unconfirmed, goes
	// first (holdsUp): a rank takes one flow a step, and while a
	// fan-out's flow or a flow alone that flattery may have made faster
	// holds the estimate up, every other pair of the rank looks limited
	// by its far end and stays in doubt (on racks32 a 50 Mbit/s
	// receiver's pairs took a step each, nine in all, before the
	// fan-out's flow that held it up was measured alone).
	first := make([]Pair, 0, len(doubt))
	var rest []Pair
	for _, d := range doubt {
		if pl.holdsUp(d) {
			first = append(first, d)
		} else {
			rest = append(rest, d)
		}
	}
	for _, d := range append(first, rest...) {
		if s.fits(d.A, d.B) {
			s.add(d.A, d.B, true)
		}
	}
	if len(s.items) > 0 {
		pl.doubtSteps++
	}
	return s.items
}

// holdsUp tells whether pair d gives one of its ends its estimate while
// nothing confirms it: seen only in fan-outs, or measured alone once or
// twice without two measurements that agree (unconfirmed).
func (pl *fabricPlan) holdsUp(d Pair) bool {
	r := pl.obs[d]
	return r > 0 && (pl.times[d] == 0 || pl.unconfirmed(d)) && (r >= pl.out[d.A] || r >= pl.in[d.B])
}

// unconfirmed tells whether pair d was measured alone once, or twice with
// the two more than 5% apart (pairValue keeps the faster of two; on
// racks32, 2.63 then 2.39 MB/s between two 2.5 MB/s NICs held the
// sender's estimate up, and its pairs were measured one a step).
func (pl *fabricPlan) unconfirmed(d Pair) bool {
	ms := pl.meas[d]
	return len(ms) == 1 || len(ms) == 2 && max(ms[0], ms[1]) > 1.05*min(ms[0], ms[1])
}

// Done records the rates of the step Next returned last: each flow's,
// and each fan-out's aggregate (by sender).
//
// A fan-out gives its sender's egress (fanRec), and more: a flow of it
// that was clearly slower than its fastest (by settleTol), or every flow
// of one that did not fill the sender's known egress, was limited by its
// receiver if no segment lay between them (the two are in one group),
// so it is the pair's rate alone, a measurement of the pair;
// the others' rates only show that their receivers take that much.
func (pl *fabricPlan) Done(items []flowItem, rates []float64, fans map[int]float64) {
	// What is settled changes with what this step found.
	clear(pl.setOut)
	clear(pl.setIn)
	defer clear(pl.setIn)
	defer clear(pl.setOut)
	fan := map[int][]int{}
	for k, it := range items {
		if it.Fan {
			fan[it.A] = append(fan[it.A], k)
		}
	}
	alone := make([]bool, len(items))
	for a, ks := range fan {
		f := fanRec{rate: fans[a], room: math.Inf(1)}
		// A fan whose receivers are all outside a's group: its aggregate
		// left the group at once.
		across := true
		for _, k := range ks {
			across = across && pl.groups[items[k].B] != pl.groups[a]
		}
		if r := fans[a]; across && r > 0 && !math.IsInf(r, 0) && !math.IsNaN(r) {
			pl.crossOut[pl.groups[a]] = max(pl.crossOut[pl.groups[a]], r)
		}
		top, sum := 0.0, 0.0
		for _, k := range ks {
			f.room = min(f.room, pl.in[items[k].B])
			if r := rates[k]; r > 0 && !math.IsInf(r, 0) {
				top, sum = max(top, r), sum+r
			}
		}
		f.room *= float64(len(ks))
		switch {
		case math.IsNaN(f.rate) || f.rate <= 0:
			f = fanRec{} // tried
		case math.IsInf(f.rate, 0):
			f.rate = math.MaxFloat64 / 4
		}
		pl.fans[a] = append(pl.fans[a], f)
		pl.setOut[a] = 0
		slack := pl.settledOut(a) && sum*settleTol < pl.out[a]
		for _, k := range ks {
			r := rates[k]
			switch {
			case r <= 0 || math.IsNaN(r) || math.IsInf(r, 0):
			case pl.groups[a] == pl.groups[items[k].B] && (slack || r*settleTol < top):
				// Across groups a segment may have slowed it.
				alone[k] = true
			default:
				pl.inLow[items[k].B] = max(pl.inLow[items[k].B], r)
			}
		}
	}
	for k, it := range items {
		if it.Fan && !alone[k] {
			continue
		}
		r := rates[k]
		d := Pair{it.A, it.B}
		if math.IsNaN(r) || r <= 0 {
			pl.observe(d, max(pl.obs[d], 0)) // tried: not in doubt any more
			pl.times[d] = 3
			continue
		}
		if math.IsInf(r, 0) {
			r = math.MaxFloat64 / 4
		}
		if it.Fan {
			// A flow of a fan-out that its receiver limited stands for
			// the pair only until the pair is measured alone: TCP's
			// flows from one sender do not share it evenly, and a flow
			// that got less than its share looks limited by its receiver
			// (on twoclusters' equal NICs, 6 of 12.5 MB/s, twice, then
			// 11.6 alone, and the median of the three was 6).
			if pl.times[d] == 0 {
				pl.fanMeas[d] = append(pl.fanMeas[d], r)
				pl.observe(d, pairValue(pl.fanMeas[d]))
			}
			continue
		}
		pl.times[d]++
		pl.meas[d] = append(pl.meas[d], r)
		pl.observe(d, pairValue(pl.meas[d]))
		if ga, gb := pl.groups[it.A], pl.groups[it.B]; ga != gb {
			pl.crossOut[ga] = max(pl.crossOut[ga], r)
			pl.crossIn[gb] = max(pl.crossIn[gb], r)
		}
	}
	clear(pl.out)
	clear(pl.in)
	for d, r := range pl.obs {
		pl.out[d.A] = max(pl.out[d.A], r)
		pl.in[d.B] = max(pl.in[d.B], r)
	}
	for a, fs := range pl.fans {
		for _, f := range fs {
			pl.out[a] = max(pl.out[a], f.rate)
		}
	}
	for b, r := range pl.inLow {
		if r > pl.in[b] && pl.loneIn(b) {
			continue
		}
		pl.in[b] = max(pl.in[b], r)
	}
	// A flow much slower than what both its ends reach with others, three
	// times: the network is not limited by NICs alone around them. What
	// the ends reach is judged by flows measured alone: a flow of a
	// fan-out can show more than its receiver's NIC (on racks32 here, 6.3
	// MB/s into a 5 MB/s NIC, after which every pair of two ranks was
	// measured one by one, 86 steps).
	// And by their confirmed best (confirmedLone): one lone flow into a
	// 5 MB/s NIC read 6.15 MB/s there, and made every pair into it
	// irregular (53 flows, 75 steps, 26 s).
	loneOut, loneIn := pl.lone()
	for d, r := range pl.obs {
		if pl.times[d] >= 3 && r*irregular < min(loneOut[d.A], loneIn[d.B]) {
			pl.irrOut[d.A], pl.irrIn[d.B] = true, true
		}
	}
}

// lone returns every rank's confirmed best egress and ingress alone
// (confirmedLone).
func (pl *fabricPlan) lone() (out, in []float64) {
	out, in = make([]float64, pl.n), make([]float64, pl.n)
	for r := range pl.n {
		out[r], in[r] = pl.confirmedLone(pl.outs[r]), pl.confirmedLone(pl.ins[r])
	}
	return out, in
}

// confirmedLone is the best rate of the pairs measured alone, except
// that a best that no second measurement confirms (unconfirmed: measured
// once, or twice more than 5% apart; and no other pair within settleTol
// below it) and that stands above the next by
// no more than flattery does (flatters) gives way to the next: it may be
// one flow that a token bucket or a late timer flattered. 0 with none
// measured alone.
func (pl *fabricPlan) confirmedLone(pairs []Pair) float64 {
	type lone struct {
		r    float64
		once bool
	}
	var ls []lone
	for _, d := range pairs {
		if pl.times[d] > 0 {
			// Two measurements that disagree confirm nothing:
			// pairValue takes the faster, which may be the
			// flattered one (on racks32, 6.43 then 4.54 MB/s from a 5
			// MB/s NIC, whose every pair then looked irregular: 36
			// steps more, 26 s).
			ls = append(ls, lone{pl.obs[d], pl.unconfirmed(d)})
		}
	}
	slices.SortFunc(ls, func(a, b lone) int { return cmpDesc(a.r, b.r) })
	for k, l := range ls {
		if k+1 == len(ls) || !l.once || ls[k+1].r*settleTol >= l.r || l.r > flatters*ls[k+1].r {
			return l.r
		}
	}
	return 0
}

// pairValue is a pair's rate from its measurements: the faster of one or
// two (noise on a busy machine slows flows), the median of three (two
// that disagree by over 10% are measured a third time, so that one flow
// a timer or a token bucket flattered does not stand for the pair).
func pairValue(ms []float64) float64 {
	if len(ms) <= 2 {
		return slices.Max(ms)
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return s[len(s)/2]
}

// topOut returns the pair that gives rank i its egress estimate, and
// whether that estimate is confirmed: measured twice, or within 10% of
// another pair's from i.
func (pl *fabricPlan) topOut(i int) (Pair, bool) {
	return pl.top(pl.outs[i])
}

// standsOut tells whether best, a rank's best pair of pairs, stands more
// than 5% above every other pair of the rank that was measured, while
// unconfirmed (one measurement, or two more than 5% apart: pairValue
// takes the faster of two, and noise slows flows but a refilled token
// bucket speeds one up).
func (pl *fabricPlan) standsOut(best Pair, pairs []Pair) bool {
	if best.A < 0 || !pl.unconfirmed(best) {
		return false
	}
	second := pl.second(best, pairs)
	return second > 0 && second*1.05 < pl.obs[best]
}

// topIn is topOut for rank j's ingress.
func (pl *fabricPlan) topIn(j int) (Pair, bool) {
	return pl.top(pl.ins[j])
}

func (pl *fabricPlan) top(pairs []Pair) (Pair, bool) {
	best, second := Pair{-1, -1}, 0.0
	bestR := 0.0
	for _, d := range pairs {
		r := pl.obs[d]
		if r <= 0 {
			continue
		}
		if r > bestR || r == bestR && (d.A < best.A || d.A == best.A && d.B < best.B) {
			if bestR > 0 {
				second = max(second, bestR)
			}
			best, bestR = d, r
		} else {
			second = max(second, r)
		}
	}
	if best.A < 0 {
		return best, false
	}
	return best, pl.times[best] >= 2 || second*settleTol >= bestR
}

// Rates returns the pair rates: min(egress of i, ingress of j) from the
// NIC rates (nicRates), or the pair's own flow where it ran clearly
// slower than that (a limit of its own; a flow a little slower met noise,
// and the NICs, each from several flows, are the steadier estimate). 0 on
// the diagonal and where nothing is known (fixRates fills those).
func (pl *fabricPlan) Rates() [][]float64 {
	out, in := pl.nicRates()
	m := make([][]float64, pl.n)
	for i := range m {
		m[i] = make([]float64, pl.n)
		for j := range m[i] {
			if i == j {
				continue
			}
			m[i][j] = min(out[i], in[j])
			if r := pl.obs[Pair{i, j}]; r > 0 && r*irregular < m[i][j] && pl.times[Pair{i, j}] >= 3 {
				m[i][j] = r
			}
			if m[i][j] >= math.MaxFloat64/8 {
				m[i][j] = 0
			}
		}
	}
	return m
}

// nicRates returns each rank's egress and ingress for the pair rates. A
// rank with nicFlows flows or more that it limited near its best
// (limitedFlows, the flows that settle it) gets their median; the others
// keep their estimate, the fastest flow. The plan's rules go by the
// fastest: a NIC is known once one flow shows it, and noise on a busy
// machine slows flows. But a token bucket's burst speeds up flows of slow
// NICs, by up to 12% on racks32 (a 16 kB bucket on each side against a
// 60 ms transfer at 20 to 50 Mbit/s), and the fastest of several is the
// one it sped up most. Replayed on the flows of 179 recorded racks32
// probes, the median took the probes with a pair over 10% off from 27 to
// 18: 18 NIC estimates came within 10% of their shaping, 2 left it (a
// 100 and a 200 Mbit/s NIC, 0.91 and 0.90 of it).
func (pl *fabricPlan) nicRates() (out, in []float64) {
	out, in = slices.Clone(pl.out), slices.Clone(pl.in)
	var buf []float64
	median := func(pairs []Pair, best float64, far func(Pair) float64) float64 {
		buf, _ = pl.limitedFlows(pairs, best, far, buf)
		if len(buf) < nicFlows {
			return best
		}
		return collective.Median(buf)
	}
	for r := range pl.n {
		out[r] = median(pl.outs[r], pl.out[r], pl.farIn)
		in[r] = median(pl.ins[r], pl.in[r], pl.farOut)
	}
	return out, in
}

// nicFlows is how many flows a rank limited, near its best, give its NIC
// rate as their median (replayed as above: with two, 20 probes with a
// pair off, 8 NIC estimates out of 10%; with four, 23).
const nicFlows = 3

// nicNear: the flows of a rank within this factor of its best show its
// NIC (the rest met something slower, or noise).
const nicNear = 1.15
