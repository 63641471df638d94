package comm

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/transport"
)

// AlltoallvOptions tunes one Alltoallv call.
type AlltoallvOptions struct {
	// Algorithm is the planner (collective.Caterpillar, MaxMatch, MinMatch,
	// Greedy, OpenShop, Auto), Naive, or collective.Paced (every message
	// at once, each link paced to its share; links that cannot pace send
	// unpaced). "" means Config.Alltoallv. Every rank must ask for the
	// same one.
	Algorithm collective.Algorithm
	// Recv, if set, holds one receive buffer per rank, reused as MPI's
	// receive buffer is: what rank i sends lands in Recv[i][:n] when
	// cap(Recv[i]) >= n (the result then aliases it), in a new slice
	// otherwise. Iterative programs avoid allocating every exchange.
	Recv [][]byte
}

// Alltoallv sends send[j] to rank j and returns what every rank sent to
// this one, indexed by source. Sizes may differ per pair and need not be
// known in advance: the ranks first exchange their sizes, then every rank
// computes the same schedule from the sizes and the cost model with the
// configured planner, and executes it: each rank sends in its planned
// order, and a receiver grants large messages in its planned receive order
// so that one message at a time arrives, as the planners assume. Small
// messages go eagerly.
func (c *Comm) Alltoallv(ctx context.Context, send [][]byte) ([][]byte, error) {
	return c.AlltoallvWith(ctx, send, AlltoallvOptions{})
}

// Alltoall is Alltoallv for equal sizes: every send[j] must have the same
// length, on every rank (ErrMismatch otherwise).
func (c *Comm) Alltoall(ctx context.Context, send [][]byte) ([][]byte, error) {
	for j := range send {
		if len(send[j]) != len(send[0]) {
			return nil, &ArgError{Op: "Alltoall", Arg: "send", Msg: fmt.Sprintf("send[%d] has %d bytes, send[0] %d (use Alltoallv)", j, len(send[j]), len(send[0]))}
		}
	}
	recv, err := c.Alltoallv(ctx, send)
	if err != nil {
		return nil, err
	}
	for j := range recv {
		if len(send) > 0 && len(recv[j]) != len(send[0]) {
			return nil, opErr("Alltoall", &RankError{Rank: c.group[j], Err: fmt.Errorf("%w: Alltoall: rank %d sent %d bytes, rank %d %d", ErrMismatch, j, len(recv[j]), c.rank, len(send[0]))})
		}
	}
	return recv, nil
}

// AlltoallvWith is Alltoallv with per-call options.
func (c *Comm) AlltoallvWith(ctx context.Context, send [][]byte, o AlltoallvOptions) ([][]byte, error) {
	algo, err := c.checkAlltoallv(send, o)
	if err != nil {
		return nil, err
	}
	k, cancel, err := c.begin(ctx, opAlltoallv)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if c.Size() == 1 {
		// Nothing crosses the network: the timeline has no transfer.
		c.planMu.Lock()
		c.timeline = &Timeline{algorithm: algo, start: time.Now()}
		c.planMu.Unlock()
		return [][]byte{append([]byte{}, send[0]...)}, nil
	}
	mine, release := c.ownSizeRow(k, send, o, algo)
	defer release()
	hr, err := c.headRound(k, algo, send, o, mine)
	if err != nil {
		return nil, k.err(err)
	}
	hr.recv[c.rank] = append(recvBuf(o.Recv, c.rank, len(send[c.rank]))[:0], send[c.rank]...)
	// Every rank has the same proposals now: apply them before planning.
	c.w.applyDrift(hr.drifted)
	tl, err := c.exchangeLarge(k, algo, send, o.Recv, hr, mine.grants)
	if err != nil {
		return nil, k.err(err)
	}
	c.planMu.Lock()
	c.timeline = tl
	c.planMu.Unlock()
	return hr.recv, nil
}

// alltoallvAlgorithm reports whether Alltoallv knows algo: a one-port
// planner, auto, or a flow-level plan (naive, paced).
func alltoallvAlgorithm(algo collective.Algorithm) bool {
	return algo == collective.Auto || collective.IsFlowPlan(algo) || collective.KindOf(algo) == collective.KindAlltoall
}

// checkAlltoallv checks Alltoallv's arguments and returns the algorithm
// to run.
func (c *Comm) checkAlltoallv(send [][]byte, o AlltoallvOptions) (collective.Algorithm, error) {
	n := c.Size()
	if len(send) != n {
		return "", &ArgError{Op: "Alltoallv", Arg: "send", Msg: fmt.Sprintf("%d buffers for %d ranks", len(send), n)}
	}
	if o.Recv != nil && len(o.Recv) != n {
		return "", &ArgError{Op: "Alltoallv", Arg: "Recv", Msg: fmt.Sprintf("%d buffers for %d ranks", len(o.Recv), n)}
	}
	algo := o.Algorithm
	if algo == "" {
		algo = c.w.cfg.Alltoallv
	}
	if !alltoallvAlgorithm(algo) {
		return "", &ArgError{Op: "Alltoallv", Arg: "algorithm", Msg: fmt.Sprintf("unknown %q (want %v, auto, naive or paced)", algo, collective.Algorithms(collective.KindAlltoall))}
	}
	return algo, nil
}

// ownSizeRow is this rank's head for the first round: one round of direct
// messages in which every rank sends every other its row of sizes, which
// messages it sends inline, its algorithm and model, (on the world
// communicator) the drifted rates it observed on its incoming links, and
// the receive buffers it grants in advance; and the message itself when
// it is small enough to ride along. Afterwards every rank knows the whole
// size matrix and has every small message; only the large ones remain, to
// be planned.
//
// With receive buffers, a large message may land in its buffer with no
// rendezvous request or grant at all, should the exchange turn out naive
// (every rank decides that alike, from the heads): the slots exist before
// this rank's head leaves, and a sender uses a grant only after it has the
// head, so no payload arrives before its slot. release forgets the slots.
func (c *Comm) ownSizeRow(k *coll, send [][]byte, o AlltoallvOptions, algo collective.Algorithm) (row *sizeRow, release func()) {
	n := c.Size()
	inlineMax := c.w.cfg.EagerLimit
	if inlineMax < 0 {
		inlineMax = int(^uint(0) >> 1)
	}
	row = newSizeRow(n)
	for j, b := range send {
		row.sizes[j] = int64(len(b))
		row.inline[j] = j != c.rank && (len(b) == 0 || len(b) <= inlineMax)
	}
	row.algo = hashString(string(algo))
	row.model = c.w.modelDigest()
	row.plans = c.plansDigest(algo)
	if c.id == worldCommID {
		for src, rate := range c.w.driftProposals() {
			row.drift[src] = rate
		}
	}
	var granted []slotKey
	if o.Recv != nil {
		for j := range n {
			if j != c.rank && cap(o.Recv[j]) > inlineMax {
				key := slotKey{slotData, c.group[j], collCtx(c.id), k.tag, preGrantSeq}
				c.w.getSlot(key, o.Recv[j][:cap(o.Recv[j])])
				granted = append(granted, key)
				row.grants[j] = int64(cap(o.Recv[j]))
			}
		}
	}
	return row, func() {
		for _, key := range granted {
			c.w.dropSlot(key)
		}
	}
}

// heads is what the first round of an Alltoallv leaves.
type heads struct {
	algo    collective.Algorithm    // the algorithm this rank asked for
	recv    [][]byte                // the messages that came inline, by source
	bytes   [][]int64               // the size matrix of the large messages that remain
	grants  []int64                 // the buffer each rank granted this one in advance
	drifted map[int]map[int]float64 // receiver -> source -> observed rate
	// plansDiffer: some rank's plans digest is not this rank's (its
	// planner planned other calls: see a2aplan.go).
	plansDiffer bool
}

// headRound sends this rank's head, with its inline messages riding
// behind it in the same message (one vectored write on stream links: no
// copy), to every other rank, and reads theirs.
func (c *Comm) headRound(k *coll, algo collective.Algorithm, send [][]byte, o AlltoallvOptions, mine *sizeRow) (*heads, error) {
	n := c.Size()
	head := mine.encode()
	rows, err := k.exchange(head, func(j int) []byte {
		if mine.inline[j] {
			return send[j]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	h := &heads{algo: algo, recv: make([][]byte, n), bytes: make([][]int64, n), grants: make([]int64, n)}
	for i, b := range rows {
		if err := c.readHead(i, b, len(head), mine, o, h); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// readHead takes in rank i's head b (this rank's own, for i == rank): its
// row of the size matrix, its drift proposals, its grant to this rank and
// the inline message it sent this rank.
func (c *Comm) readHead(i int, b []byte, headLen int, mine *sizeRow, o AlltoallvOptions, h *heads) error {
	n := c.Size()
	if len(b) < headLen {
		return &RankError{Rank: c.group[i], Err: fmt.Errorf("%w: rank %d sent a %d-byte size row, expected %d", ErrMismatch, i, len(b), headLen)}
	}
	v, err := decodeSizeRow(b[:headLen], n)
	if err != nil {
		return &RankError{Rank: c.group[i], Err: err}
	}
	if v.algo != mine.algo {
		return &RankError{Rank: c.group[i], Err: fmt.Errorf("%w: rank %d asked for another Alltoallv algorithm than %q", ErrMismatch, i, h.algo)}
	}
	if v.model != mine.model {
		return &RankError{Rank: c.group[i], Err: fmt.Errorf("%w: rank %d plans with another cost model than this rank", ErrMismatch, i)}
	}
	if v.plans != mine.plans {
		h.plansDiffer = true
	}
	if c.id == worldCommID {
		for src, rate := range v.drift {
			if rate != 0 {
				if h.drifted == nil {
					h.drifted = map[int]map[int]float64{}
				}
				if h.drifted[i] == nil {
					h.drifted[i] = map[int]float64{}
				}
				h.drifted[i][src] = rate
			}
		}
	}
	h.bytes[i] = v.sizes
	h.bytes[i][i] = 0
	kept := false // h.recv[i] is the inline message where it arrived, in b
	if i != c.rank {
		h.grants[i] = v.grants[c.rank]
		if v.inline[c.rank] {
			data := b[headLen:len(b):len(b)]
			if int64(len(data)) != v.sizes[c.rank] {
				return c.sizeMismatch(i, " inline", int64(len(data)), v.sizes[c.rank])
			}
			switch {
			case o.Recv != nil && cap(o.Recv[i]) >= len(data):
				data = append(o.Recv[i][:0], data...)
			case len(data) == 0:
				data = []byte{}
			default:
				kept = true
			}
			h.recv[i] = data
		}
	}
	for j := range n {
		if v.inline[j] {
			h.bytes[i][j] = 0
		}
	}
	// The row's buffer goes back to the pool unless the caller receives
	// the inline message in it.
	if i != c.rank && !kept {
		putPayload(b)
	}
	return nil
}

// exchangeLarge moves the messages that did not ride inline: by the
// algorithm's plan, or all at once (naive, or auto when that is
// predicted faster), and records the timeline.
func (c *Comm) exchangeLarge(k *coll, algo collective.Algorithm, send, bufs [][]byte, h *heads, mine []int64) (*Timeline, error) {
	tl := &Timeline{algorithm: algo, start: time.Now()}
	var plan *collective.Plan
	if algo != Naive {
		var err error
		if plan, err = c.planFor(k.tag, h.bytes, algo, !h.plansDiffer); err != nil {
			return nil, err
		}
		tl.plan, tl.algorithm = plan, plan.Algorithm
	}
	switch {
	case plan == nil || plan.Algorithm == Naive:
		return tl, c.naiveExchange(k, send, h.recv, bufs, h.bytes, h.grants, mine, nil, tl)
	case plan.Algorithm == collective.Paced:
		return tl, c.naiveExchange(k, send, h.recv, bufs, h.bytes, h.grants, mine, c.pacingRates(plan), tl)
	}
	return tl, c.executePlan(k, plan, send, h.recv, bufs, tl)
}

// pacingRates returns the rate the paced plan gives each message this
// rank sends, by destination (0: unpaced).
func (c *Comm) pacingRates(plan *collective.Plan) []float64 {
	rates := make([]float64, c.Size())
	for _, t := range plan.Transfers {
		if t.Src == c.rank {
			rates[t.Dst] = t.Rate
		}
	}
	return rates
}

// canPace reports whether every link of this communicator can pace (the
// same on every rank: the links are all of the world's transport).
func (c *Comm) canPace() bool {
	for _, g := range c.group {
		if l := c.w.links[g]; l != nil && !transport.CanPace(l) {
			return false
		}
	}
	return c.Size() > 1
}

// LastAlgorithm returns the algorithm the last Alltoallv on this
// communicator ran (Auto resolved to the planner, or Naive), "" if none.
func (c *Comm) LastAlgorithm() collective.Algorithm {
	c.planMu.Lock()
	defer c.planMu.Unlock()
	if c.timeline == nil {
		return ""
	}
	return c.timeline.algorithm
}

// sizeMismatch is the error for a message from rank src (of this
// communicator) whose size is not the one src announced in its size row.
func (c *Comm) sizeMismatch(src int, how string, got, announced int64) error {
	return &RankError{Rank: c.group[src], Err: fmt.Errorf("%w: rank %d sent %d bytes%s, it announced %d", ErrMismatch, src, got, how, announced)}
}

// recvBuf returns bufs[i][:n] when it is large enough, else a new slice.
func recvBuf(bufs [][]byte, i, n int) []byte {
	if bufs != nil && cap(bufs[i]) >= n {
		return bufs[i][:n]
	}
	return make([]byte, n)
}

func hashString(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// model returns the cost model of this communicator's ranks.
func (c *Comm) model() *collective.Model {
	m := c.w.model.Load()
	if m == nil {
		return collective.NewUniformModel(c.Size(), 50e-6, 1e9)
	}
	return m.Sub(c.group)
}

func (c *Comm) eager(n int64) bool {
	lim := c.w.cfg.EagerLimit
	return lim < 0 || n <= int64(lim)
}

// executePlan runs this rank's part of a total-exchange plan: the send
// side in plan order (eager messages at once, large ones when their
// receiver grants them), the receive side granting large messages in plan
// order, and both at the same time.
func (c *Comm) executePlan(k *coll, plan *collective.Plan, send, recv, bufs [][]byte, tl *Timeline) error {
	w := c.w
	me := c.rank
	ctxID := collCtx(c.id)
	sendOrder := plan.SendOrder(me)
	recvOrder := plan.RecvOrder(me)
	tl.sends = make([]event, 0, len(sendOrder))
	tl.recvs = make([]event, 0, len(recvOrder))

	// Post the eager receives first, so their order is fixed.
	eagerReqs := map[int]*recvReq{}
	for _, ti := range recvOrder {
		t := plan.Transfers[ti]
		if c.eager(t.Bytes) {
			eagerReqs[t.Src] = c.postRecv(ctxID, t.Src, k.tag)
		}
	}

	var wg sync.WaitGroup
	var recvErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		recvErr = c.receivePlanned(k, plan, recvOrder, eagerReqs, recv, bufs, tl)
	}()
	sendErr := func() error {
		for _, ti := range sendOrder {
			t := plan.Transfers[ti]
			if int64(len(send[t.Dst])) != t.Bytes {
				return fmt.Errorf("%w: plan says %d bytes to rank %d, the buffer has %d", ErrProtocol, t.Bytes, t.Dst, len(send[t.Dst]))
			}
			g := c.group[t.Dst]
			ev := event{peer: t.Dst, bytes: t.Bytes}
			if c.eager(t.Bytes) {
				ev.start = time.Now()
				if err := w.sendMsg(k.ctx, g, transport.Header{Type: transport.MsgEager, Comm: ctxID, Tag: k.tag, Flags: k.op}, send[t.Dst]); err != nil {
					return err
				}
				ev.end = time.Now()
				tl.sends = append(tl.sends, ev)
				continue
			}
			if _, err := w.awaitSlot(k.ctx, slotKey{slotCTS, g, ctxID, k.tag, 0}, c); err != nil {
				return err
			}
			ev.start = time.Now()
			if err := w.sendMsg(k.ctx, g, transport.Header{Type: transport.MsgRndvData, Comm: ctxID, Tag: k.tag, Flags: k.op}, send[t.Dst]); err != nil {
				return err
			}
			ev.end = time.Now()
			tl.sends = append(tl.sends, ev)
		}
		return nil
	}()
	wg.Wait()
	if sendErr != nil {
		return sendErr
	}
	return recvErr
}

// receivePlanned grants this rank's large incoming messages one at a time,
// in plan order, then collects the eager ones.
func (c *Comm) receivePlanned(k *coll, plan *collective.Plan, order []int, eagerReqs map[int]*recvReq, recv, bufs [][]byte, tl *Timeline) error {
	w := c.w
	ctxID := collCtx(c.id)
	for _, ti := range order {
		t := plan.Transfers[ti]
		if c.eager(t.Bytes) {
			continue
		}
		g := c.group[t.Src]
		buf := recvBuf(bufs, t.Src, int(t.Bytes))
		key := slotKey{slotData, g, ctxID, k.tag, 0}
		s := w.getSlot(key, buf)
		ev := event{peer: t.Src, bytes: t.Bytes, start: time.Now()}
		err := w.sendMsg(k.ctx, g, transport.Header{Type: transport.MsgCTS, Comm: ctxID, Tag: k.tag, Flags: k.op}, nil)
		if err == nil {
			err = w.await(k.ctx, s.ch, g, c)
		}
		if err == nil {
			err = s.err
		}
		w.dropSlot(key)
		if err != nil {
			for _, r := range eagerReqs {
				w.unpost(ctxID, r)
			}
			return err
		}
		if !s.begin.IsZero() {
			ev.first = s.begin
			c.w.observe(g, t.Bytes, s.at.Sub(s.begin).Seconds())
		}
		ev.end = s.at
		recv[t.Src] = buf
		tl.recvs = append(tl.recvs, ev)
	}
	for _, ti := range order {
		t := plan.Transfers[ti]
		r, ok := eagerReqs[t.Src]
		if !ok {
			continue
		}
		delete(eagerReqs, t.Src)
		data, err := k.finish(r)
		if err != nil {
			for _, r := range eagerReqs {
				w.unpost(ctxID, r)
			}
			return err
		}
		if int64(len(data)) != t.Bytes {
			return c.sizeMismatch(t.Src, "", int64(len(data)), t.Bytes)
		}
		if bufs != nil && cap(bufs[t.Src]) >= len(data) {
			data = append(bufs[t.Src][:0], data...)
		}
		recv[t.Src] = data
		tl.recvs = append(tl.recvs, event{peer: t.Src, bytes: t.Bytes, start: time.Now(), end: time.Now()})
	}
	return nil
}

// pace paces the link to every destination with a rate (transport
// SetPacing) and returns the function that clears them again.
func (c *Comm) pace(rates []float64) func() {
	var paced []transport.Link
	for j, r := range rates {
		if r <= 0 || j == c.rank {
			continue
		}
		l := c.w.links[c.group[j]]
		if err := transport.SetPacing(l, r); err != nil {
			c.w.log.Warn("comm: cannot pace a link; the message goes unpaced", "peer", c.group[j], "err", err)
			continue
		}
		paced = append(paced, l)
	}
	return func() {
		for _, l := range paced {
			if err := transport.SetPacing(l, 0); err != nil {
				c.w.log.Warn("comm: cannot clear a link's pacing", "err", err)
			}
		}
	}
}

// naiveExchange posts every send and every receive at once, as Gloo does,
// and lets the transport sort them out. A message to a rank that granted
// a large enough buffer in advance (theirs[j]) goes straight to it; one
// from a rank this one granted (mine[i]) lands in that buffer. With rates
// (a paced plan), the link to each destination with a rate is paced to it
// for the exchange, and those messages go eagerly.
func (c *Comm) naiveExchange(k *coll, send, recv, bufs [][]byte, bytes [][]int64, theirs, mine []int64, rates []float64, tl *Timeline) error {
	n := c.Size()
	me := c.rank
	w := c.w
	ctxID := collCtx(c.id)
	if rates != nil {
		defer c.pace(rates)()
	}
	reqs := make([]*recvReq, n)
	for i := 0; i < n; i++ {
		if i != me && bytes[i][me] > 0 && bytes[i][me] > mine[i] {
			reqs[i] = c.postRecv(ctxID, i, k.tag)
		}
	}
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for j := 0; j < n; j++ {
		if j == me || bytes[me][j] == 0 { // sent inline, or nothing to send
			continue
		}
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			start := time.Now()
			// The pre-granted and paced sends below go straight to the
			// link: they stop, as coll's sends do, once two calls were
			// seen to overlap here (ErrConcurrent).
			err := c.concurrentErr()
			switch {
			case err != nil:
			case bytes[me][j] <= theirs[j]:
				w.preGranted.Add(1)
				err = w.sendMsg(k.ctx, c.group[j], transport.Header{Type: transport.MsgRndvData, Comm: ctxID, Tag: k.tag, Flags: k.op, Seq: preGrantSeq}, send[j])
			case rates != nil && rates[j] > 0:
				// A paced message goes eagerly: a grant sent back on a
				// link busy with a paced payload would wait behind it.
				var p *pending
				if p, err = c.startSendMode(k.ctx, j, ctxID, k.tag, k.op, send[j], true, 0); err == nil {
					err = c.finishSend(k.ctx, p, c)
				}
			default:
				err = k.send(j, send[j])
			}
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			tl.sends = append(tl.sends, event{peer: j, bytes: int64(len(send[j])), start: start, end: time.Now()})
			mu.Unlock()
		}(j)
	}
	for i := 0; i < n; i++ {
		if i == me || bytes[i][me] == 0 || reqs[i] != nil {
			continue
		}
		// Granted in advance: wait for the payload in its buffer.
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			s, err := w.awaitSlot(k.ctx, slotKey{slotData, c.group[i], ctxID, k.tag, preGrantSeq}, c)
			if err == nil && int64(s.n) != bytes[i][me] {
				err = c.sizeMismatch(i, "", int64(s.n), bytes[i][me])
			}
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			recv[i] = s.buf[:s.n]
			tl.recvs = append(tl.recvs, event{peer: i, bytes: bytes[i][me], start: start, first: s.begin, end: s.at})
			mu.Unlock()
		}(i)
	}
	for i := 0; i < n; i++ {
		if reqs[i] == nil {
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			var buf []byte
			if bufs != nil {
				buf = bufs[i][:cap(bufs[i])]
			}
			data, err := k.finishInto(reqs[i], buf)
			if err != nil {
				fail(err)
				return
			}
			if int64(len(data)) != bytes[i][me] {
				fail(c.sizeMismatch(i, "", int64(len(data)), bytes[i][me]))
				return
			}
			mu.Lock()
			recv[i] = data
			tl.recvs = append(tl.recvs, event{peer: i, bytes: bytes[i][me], start: start, end: time.Now()})
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return firstErr
}
