package comm

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hetcomm/hetcomm/collective"
)

// event is one message as this rank saw it.
type event struct {
	peer  int // communicator rank of the other end
	bytes int64
	start time.Time // send: when the payload started; receive: the grant
	first time.Time // receive: when the first payload byte arrived
	end   time.Time // send: handed to the transport; receive: all arrived
}

// Timeline is what one rank recorded of its last Alltoallv.
type Timeline struct {
	algorithm collective.Algorithm
	plan      *collective.Plan
	start     time.Time
	sends     []event
	recvs     []event
}

// Timeline gathers, at rank 0, what every rank recorded of the last
// Alltoallv on this communicator and returns the plan that was predicted
// and what really happened, in the same shape (collective.Plan JSON), so
// the two timing diagrams can be drawn side by side. Times are seconds
// from the earliest start of the exchange on any rank, on rank 0's clock
// (clocks of other hosts are corrected by the probed offsets when known).
// Each measured transfer's Rate is the rate it achieved, its bytes over
// its duration; the predicted plan's rates are those it paced to.
// It is collective; ranks other than 0 get nil plans. predicted is nil when
// Naive was asked for by name (no plan is made then); when Auto chose to
// post everything at once, predicted is the naive plan on the fabric.
func (c *Comm) Timeline(ctx context.Context) (predicted, measured *collective.Plan, err error) {
	c.planMu.Lock()
	tl := c.timeline
	c.planMu.Unlock()
	var rec []int64
	if tl != nil {
		rec = append(rec, tl.start.UnixNano(), int64(len(tl.sends)), int64(len(tl.recvs)))
		for _, e := range append(append([]event{}, tl.sends...), tl.recvs...) {
			rec = append(rec, int64(e.peer), e.bytes, e.start.UnixNano(), e.end.UnixNano())
		}
	}
	parts, err := c.gather(ctx, 0, putInt64s(rec), false)
	if err != nil || c.rank != 0 {
		return nil, nil, err
	}
	if tl == nil {
		return nil, nil, &OpError{Op: "Timeline", Err: fmt.Errorf("no Alltoallv has run on this communicator")}
	}
	n := c.Size()
	type key struct{ src, dst int }
	sendEv := map[key]event{}
	recvEv := map[key]event{}
	t0 := int64(-1)
	var offs []float64
	if p := c.w.offsets.Load(); p != nil {
		offs = *p
	}
	for r, b := range parts {
		v := getInt64s(b)
		if len(v) < 3 {
			return nil, nil, &OpError{Op: "Timeline", Err: fmt.Errorf("rank %d recorded no Alltoallv", r)}
		}
		if ns, nr := v[1], v[2]; ns < 0 || nr < 0 || int64(len(v)) != 3+4*(ns+nr) {
			return nil, nil, &OpError{Op: "Timeline", Err: fmt.Errorf("%w: rank %d sent a malformed timeline", ErrProtocol, r)}
		}
		var shift int64 // nanoseconds from rank r's clock to rank 0's
		if g := c.group[r]; offs != nil && g < len(offs) {
			shift = int64(offs[g] * 1e9)
		}
		v[0] += shift
		for i := 3; i < len(v); i += 4 {
			v[i+2] += shift
			v[i+3] += shift
		}
		if t0 < 0 || v[0] < t0 {
			t0 = v[0]
		}
		ns, nr := int(v[1]), int(v[2])
		for i := 0; i < ns+nr; i++ {
			f := v[3+4*i:]
			if f[0] < 0 || f[0] >= int64(n) {
				return nil, nil, &OpError{Op: "Timeline", Err: fmt.Errorf("%w: rank %d recorded a message with rank %d", ErrProtocol, r, f[0])}
			}
			e := event{peer: int(f[0]), bytes: f[1], start: time.Unix(0, f[2]), end: time.Unix(0, f[3])}
			if i < ns {
				sendEv[key{r, e.peer}] = e
			} else {
				recvEv[key{e.peer, r}] = e
			}
		}
	}
	sec := func(t time.Time) float64 { return float64(t.UnixNano()-t0) / 1e9 }
	m := &collective.Plan{Kind: collective.KindAlltoall, Algorithm: tl.algorithm, Ranks: n}
	if tl.plan != nil {
		m.LowerBound = tl.plan.LowerBound
	}
	for k, s := range sendEv {
		t := collective.Transfer{Src: k.src, Dst: k.dst, Bytes: s.bytes, Start: sec(s.start), End: sec(s.end)}
		if r, ok := recvEv[k]; ok && r.end.After(s.end) && !c.eager(s.bytes) {
			t.End = sec(r.end)
		}
		if t.End > t.Start {
			t.Rate = float64(t.Bytes) / (t.End - t.Start)
		}
		m.Transfers = append(m.Transfers, t)
		if t.End > m.Predicted {
			m.Predicted = t.End
		}
	}
	sort.Slice(m.Transfers, func(i, j int) bool {
		a, b := m.Transfers[i], m.Transfers[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		return a.Src < b.Src || a.Src == b.Src && a.Dst < b.Dst
	})
	sendSeq, recvSeq := make([]int, n), make([]int, n)
	for i := range m.Transfers {
		t := &m.Transfers[i]
		t.SendSeq, t.RecvSeq = sendSeq[t.Src], recvSeq[t.Dst]
		sendSeq[t.Src]++
		recvSeq[t.Dst]++
	}
	return tl.plan, m, nil
}
