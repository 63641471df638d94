package collective

import (
	"math"
	"math/bits"
)

// openShopPicker finds, for a sender of the open shop heuristic at its
// time s, the receiver it still has to serve that can take the message
// first: the smallest max(recvavail, s), so that every receiver already
// idle at s counts as available at s. Among equals it takes the receiver
// with the most receive time left (the one whose own work is longest:
// left idle, it would be the last to finish), and then the nearest in
// cyclic order (j - i) mod P.
//
// Senders come in order of time, so s never decreases, and a receiver
// idle at s stays idle until it is picked. The receivers busy at s sit in
// one [recvOrder] keyed by (recvavail, rank); those idle at s in another
// keyed by (-receive time left, rank), into which the first moves every
// receiver whose time s has reached; a bitset marks them too. Each
// sender has a bitset of the receivers it still has to serve (its row).
// If its row has idle receivers (one AND per word tells), it walks the
// idle order from the front to the first of them, the one with the most
// work left; otherwise it walks the busy order to the first receiver in
// its row, the earliest. Ties within the key's first part are settled by
// a pass over the row.
//
// The walks pass receivers the sender has served: they are short while
// the sender has much left to send and grow as the sender goes on. A walk
// of the idle order that passes more receivers than the sender has idle
// ones gives way to a pass over those; once a walk of the busy order
// passes more than 8k + 128 receivers, k the number the sender has left,
// the sender scans its own row instead, then and for good, in one pass in cyclic order from i+1 that
// keeps a receiver only if it is strictly better.
type openShopPicker struct {
	n, words  int
	todo      []uint64 // row i, bit j: i still sends to j
	recvAvail []float64
	recvLeft  []float64 // receive time each receiver has left
	busy      *recvOrder
	idle      *recvOrder
	idleBits  []uint64 // bit r: r is in the idle order
	s         float64  // the latest sender time: idle holds every receiver with recvAvail <= s
	scan      []bool   // scan[i]: i scans its row (its walks got too long)
	wbuf      []wordMask
}

// openShopPick is a sender's receiver j and its time a, and j's place in
// its order when the search found it there (block -1: not known).
type openShopPick struct {
	j   int
	a   float64
	pos orderPos
}

func newOpenShopPicker(n int) *openShopPicker {
	words := (n + 63) >> 6
	ps := &openShopPicker{n: n, words: words, todo: make([]uint64, n*words),
		recvAvail: make([]float64, n), recvLeft: make([]float64, n), busy: newRecvOrder(n),
		idle: &recvOrder{}, idleBits: make([]uint64, words), s: math.Inf(-1), scan: make([]bool, n)}
	ps.idle.blocks = append(ps.idle.blocks, ps.idle.newBlock())
	return ps
}

func (ps *openShopPicker) row(i int) []uint64 { return ps.todo[i*ps.words : (i+1)*ps.words] }

// better reports whether, for sender i, receiver r beats receiver b (b <
// 0: none yet) when both can start at the same time: more receive time
// left, then nearer in cyclic order.
func (ps *openShopPicker) better(r, b, i int) bool {
	if b < 0 {
		return true
	}
	if lr, lb := ps.recvLeft[r], ps.recvLeft[b]; lr != lb {
		return lr > lb
	}
	n := ps.n
	return (r-i+n)%n < (b-i+n)%n
}

// advance moves to the idle order every receiver available at s.
func (ps *openShopPicker) advance(s float64) {
	ps.s = s
	for {
		b := ps.busy.blocks[0]
		if b.n == 0 || b.t[0] > s {
			return
		}
		r := b.r[0]
		ps.busy.remove(orderPos{0, 0})
		ps.idle.insert(recvKey{-ps.recvLeft[r], r})
		ps.idleBits[r>>6] |= 1 << (r & 63)
	}
}

// take removes receiver j, picked at time s, from its order (at pos if
// its block is not -1) and puts it back in the busy one at its new time
// end, with its receive time left down by c.
func (ps *openShopPicker) take(j int, pos orderPos, c, end float64) {
	if ps.idleBits[j>>6]>>(j&63)&1 != 0 {
		if pos.block < 0 {
			pos = ps.idle.locate(recvKey{-ps.recvLeft[j], int32(j)})
		}
		ps.idle.remove(pos)
		ps.idleBits[j>>6] &^= 1 << (j & 63)
	} else {
		if pos.block < 0 {
			pos = ps.busy.locate(recvKey{ps.recvAvail[j], int32(j)})
		}
		ps.busy.remove(pos)
	}
	ps.recvAvail[j] = end
	ps.recvLeft[j] -= c
	ps.busy.insert(recvKey{end, int32(j)})
}

// pick picks for sender i at time s (never below an earlier call's),
// whose row has k > 0 bits set.
func (ps *openShopPicker) pick(i, k int, s float64) openShopPick {
	ps.advance(s)
	row := ps.row(i)
	// Receivers in the row that are idle: one AND per word.
	idle := 0
	for w, v := range row {
		idle += bits.OnesCount64(v & ps.idleBits[w])
	}
	if idle > 0 {
		// The idle order's walk passes the idle receivers i has served;
		// past as many as it has idle ones to choose from, a pass over
		// those is cheaper.
		limit := idle
		if j, pos, ok := ps.walk(ps.idle, row, i, &limit); ok {
			return openShopPick{j: j, a: ps.recvAvail[j], pos: pos}
		}
		j := ps.bestIdle(row, i)
		return openShopPick{j: j, a: ps.recvAvail[j], pos: orderPos{-1, 0}}
	}
	if !ps.scan[i] {
		// A step of the walk costs less than one of the scan (no
		// comparison of times): it may pass eight times as many.
		limit := 8*k + 128
		if j, pos, ok := ps.walk(ps.busy, row, i, &limit); ok {
			return openShopPick{j: j, a: ps.recvAvail[j], pos: pos}
		}
		ps.scan[i] = true
	}
	j := ps.earliestBusy(row, i)
	return openShopPick{j: j, a: ps.recvAvail[j], pos: orderPos{-1, 0}}
}

// walk walks order o for sender i to the first receiver in its row, and
// settles ties within its key's first part by a pass over the row. It
// gives up (false) after passing more than *limit receivers. It returns
// the receiver and, unless a tie was settled, its place in o (else block
// -1).
func (ps *openShopPicker) walk(o *recvOrder, row []uint64, i int, limit *int) (int, orderPos, bool) {
	j, pos, t, tied, ok := o.first(row, limit)
	if !ok || !tied {
		return j, pos, ok
	}
	best := -1
	for w, v := range row {
		for ; v != 0; v &= v - 1 {
			r := w<<6 + bits.TrailingZeros64(v)
			var same bool
			if o == ps.idle {
				same = ps.idleBits[w]>>(r&63)&1 != 0 && -ps.recvLeft[r] == t
			} else {
				same = ps.recvAvail[r] == t
			}
			if same && ps.better(r, best, i) {
				best = r
			}
		}
	}
	return best, orderPos{-1, 0}, true
}

// cyclicWords lists the words of a row in cyclic order from bit i+1 of
// n: word w of the row with mask m, for each (w, m) in the result. The
// word holding i+1 comes first with the bits from i+1 on and last with
// those below.
func cyclicWords(i, n int, buf *[]wordMask) []wordMask {
	ws := (*buf)[:0]
	lo := i + 1
	if lo == n {
		lo = 0
	}
	w0 := lo >> 6
	words := (n + 63) >> 6
	ws = append(ws, wordMask{w0, ^uint64(0) << (lo & 63)})
	for w := w0 + 1; w < words; w++ {
		ws = append(ws, wordMask{w, ^uint64(0)})
	}
	for w := 0; w < w0; w++ {
		ws = append(ws, wordMask{w, ^uint64(0)})
	}
	if lo&63 != 0 {
		ws = append(ws, wordMask{w0, 1<<(lo&63) - 1})
	}
	*buf = ws
	return ws
}

type wordMask struct {
	w int
	m uint64
}

// bestIdle returns the idle receiver in row with the most receive time
// left, the first in cyclic order from i+1 among equals.
func (ps *openShopPicker) bestIdle(row []uint64, i int) int {
	j, best := -1, 0.0
	for _, wm := range cyclicWords(i, ps.n, &ps.wbuf) {
		for v := row[wm.w] & wm.m & ps.idleBits[wm.w]; v != 0; v &= v - 1 {
			r := wm.w<<6 + bits.TrailingZeros64(v)
			if l := ps.recvLeft[r]; j < 0 || l > best {
				j, best = r, l
			}
		}
	}
	return j
}

// earliestBusy returns the receiver in row (all busy) available earliest,
// then with the most receive time left, then the first in cyclic order
// from i+1.
func (ps *openShopPicker) earliestBusy(row []uint64, i int) int {
	j, at := -1, 0.0
	for _, wm := range cyclicWords(i, ps.n, &ps.wbuf) {
		for v := row[wm.w] & wm.m; v != 0; v &= v - 1 {
			r := wm.w<<6 + bits.TrailingZeros64(v)
			if t := ps.recvAvail[r]; j < 0 || t < at || t == at && ps.recvLeft[r] > ps.recvLeft[j] {
				j, at = r, t
			}
		}
	}
	return j
}

// recvOrder keeps every receiver ordered by (time, rank), for the open
// shop heuristic: a sender walks it from the front to its earliest
// receiver, and the chosen receiver moves to its new, later time.
//
// It is a list of sorted blocks (a one-level B-tree), each holding its
// times and its ranks in two arrays: the walk reads only the ranks, 16 to
// a cache line. A key leaves from where the walk found it (or a binary
// search over the blocks' last keys and then within the block does), and
// comes back by a search from the back, where new times mostly go; either
// shifts at most 2*orderBlock keys of one block.
type recvOrder struct {
	blocks []*orderBlk
	spare  []*orderBlk // emptied blocks, for reuse by splits
}

// orderBlk is one block of a [recvOrder]: keys (t[k], r[k]) for k < n,
// sorted.
type orderBlk struct {
	n int
	t [2 * orderBlock]float64
	r [2 * orderBlock]int32
}

type recvKey struct {
	t float64
	r int32
}

func (a recvKey) less(b recvKey) bool { return a.t < b.t || (a.t == b.t && a.r < b.r) }

// key returns the block's k-th key.
func (b *orderBlk) key(k int) recvKey { return recvKey{b.t[k], b.r[k]} }

// keyLess reports whether the block's k-th key comes before x.
func (b *orderBlk) keyLess(k int, x recvKey) bool {
	return b.t[k] < x.t || (b.t[k] == x.t && b.r[k] < x.r)
}

// orderBlock is the size of a freshly filled or split block; blocks hold
// 1 to 2*orderBlock keys.
const orderBlock = 32

// newRecvOrder holds receivers 0..n-1, all at time 0.
func newRecvOrder(n int) *recvOrder {
	o := &recvOrder{}
	for r := 0; r < n; r += orderBlock {
		b := o.newBlock()
		for k := r; k < n && k < r+orderBlock; k++ {
			b.r[b.n] = int32(k)
			b.n++
		}
		o.blocks = append(o.blocks, b)
	}
	return o
}

func (o *recvOrder) newBlock() *orderBlk {
	if k := len(o.spare); k > 0 {
		b := o.spare[k-1]
		o.spare = o.spare[:k-1]
		b.n = 0
		return b
	}
	return &orderBlk{}
}

// orderPos is a key's place: block and index in the block.
type orderPos struct{ block, idx int }

// at returns the key at p.
func (o *recvOrder) at(p orderPos) recvKey { return o.blocks[p.block].key(p.idx) }

// locate returns the place of k, which must be in the order.
func (o *recvOrder) locate(k recvKey) orderPos {
	bi := o.blockFor(k)
	b := o.blocks[bi]
	p := b.search(k)
	if p == b.n || b.t[p] != k.t || b.r[p] != k.r {
		panic("collective: internal error: receiver missing from the open shop's order")
	}
	return orderPos{bi, p}
}

// blockFor returns the block that holds k, or that k belongs in: the
// first block whose last key is not below k, or the last block.
func (o *recvOrder) blockFor(k recvKey) int {
	lo, hi := 0, len(o.blocks)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		b := o.blocks[mid]
		if b.keyLess(b.n-1, k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// search returns the first index in b whose key is not below k, by a
// binary search without branches on the keys.
func (b *orderBlk) search(k recvKey) int {
	base, n := 0, b.n
	for n > 1 {
		half := n >> 1
		m := base + half - 1
		lt := b2i(b.t[m] < k.t) | b2i(b.t[m] == k.t)&b2i(b.r[m] < k.r)
		base += half & -int(lt)
		n -= half
	}
	if n == 1 && b.keyLess(base, k) {
		base++
	}
	return base
}

// remove takes out the key at at.
func (o *recvOrder) remove(at orderPos) {
	b := o.blocks[at.block]
	copy(b.t[at.idx:b.n-1], b.t[at.idx+1:b.n])
	copy(b.r[at.idx:b.n-1], b.r[at.idx+1:b.n])
	b.n--
	if b.n == 0 && len(o.blocks) > 1 {
		o.spare = append(o.spare, b)
		o.blocks = append(o.blocks[:at.block], o.blocks[at.block+1:]...)
	}
}

// insert puts k in its place. New times are mostly late: the search runs
// from the back, over the blocks' last keys and then within the block,
// where it moves every key it passes up by one as it goes.
func (o *recvOrder) insert(k recvKey) {
	bi := len(o.blocks) - 1
	for bi > 0 {
		b := o.blocks[bi-1]
		if b.keyLess(b.n-1, k) {
			break
		}
		bi--
	}
	b := o.blocks[bi]
	if b.n == 2*orderBlock {
		o.split(bi)
		if nb := o.blocks[bi+1]; nb.t[0] < k.t || nb.t[0] == k.t && nb.r[0] < k.r {
			b = nb
		}
	}
	p := b.n
	for p > 0 && !b.keyLess(p-1, k) {
		b.t[p], b.r[p] = b.t[p-1], b.r[p-1]
		p--
	}
	b.t[p], b.r[p] = k.t, k.r
	b.n++
}

// split moves the upper half of full block bi to a new block after it.
func (o *recvOrder) split(bi int) {
	b := o.blocks[bi]
	nb := o.newBlock()
	copy(nb.t[:], b.t[orderBlock:])
	copy(nb.r[:], b.r[orderBlock:])
	nb.n, b.n = orderBlock, orderBlock
	o.blocks = append(o.blocks, nil)
	copy(o.blocks[bi+2:], o.blocks[bi+1:])
	o.blocks[bi+1] = nb
}

// first returns the first receiver in the order whose bit is set in row,
// its place, its key's time, and whether the key after it has the same
// time. Every receiver it passes costs one of *limit; when that goes below
// zero it gives up. ok is false if it gave up or found none.
func (o *recvOrder) first(row []uint64, limit *int) (r int, pos orderPos, t float64, tied, ok bool) {
	left := *limit
	for bi, b := range o.blocks {
		for p, k := range b.r[:b.n] {
			if row[k>>6]>>(k&63)&1 == 0 {
				if left--; left < 0 {
					*limit = left
					return 0, orderPos{}, 0, false, false
				}
				continue
			}
			*limit = left
			switch {
			case p+1 < b.n:
				tied = b.t[p+1] == b.t[p]
			case bi+1 < len(o.blocks):
				tied = o.blocks[bi+1].t[0] == b.t[p]
			}
			return int(k), orderPos{bi, p}, b.t[p], tied, true
		}
	}
	*limit = left
	return 0, orderPos{}, 0, false, false
}

// senderTree is a tournament (loser) tree of senders keyed by time, then
// the most send time left, then rank: a sender's new time costs one
// comparison per level. Each node keeps its loser's time next to its
// rank, and the sender going up carries its own, so a level reads one
// node and compares two times; only equal times look further.
type senderTree struct {
	m     int       // leaves, a power of two; leaf r is sender r
	t     []float64 // time of each leaf
	work  []float64 // send time each leaf has left (set it before update)
	key   []int32   // rank of each leaf, or m+rank (and time +Inf) once done
	nodes []treeNode
	win   int32 // the leaf that is first
}

// treeNode is node k of a senderTree, 1 <= k < m: the leaf that lost
// there and its time.
type treeNode struct {
	t float64
	l int32
}

func newSenderTree(n int, work []float64, active func(r int) bool) *senderTree {
	m := 1
	for m < n {
		m <<= 1
	}
	s := &senderTree{m: m, t: make([]float64, m), work: make([]float64, m), key: make([]int32, m), nodes: make([]treeNode, m)}
	copy(s.work, work)
	for r := range s.key {
		s.key[r] = int32(r)
		if r >= n || !active(r) {
			s.t[r], s.key[r] = math.Inf(1), int32(m+r)
		}
	}
	// Winners bottom-up, in a scratch array: node k's winner.
	win := make([]int32, 2*m)
	for r := 0; r < m; r++ {
		win[m+r] = int32(r)
	}
	for k := m - 1; k >= 1; k-- {
		a, b := win[2*k], win[2*k+1]
		if s.lessInt(b, a) != 0 {
			a, b = b, a
		}
		win[k], s.nodes[k] = a, treeNode{s.t[b], b}
	}
	s.win = win[1]
	return s
}

// lessInt is 1 if leaf a comes before leaf b, else 0.
func (s *senderTree) lessInt(a, b int32) int32 {
	ta, tb := s.t[a], s.t[b]
	wa, wb := s.work[a], s.work[b]
	return b2i(ta < tb) | b2i(ta == tb)&(b2i(wa > wb)|b2i(wa == wb)&b2i(s.key[a] < s.key[b]))
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// update gives the first sender time t, or retires it (done).
func (s *senderTree) update(t float64, done bool) {
	c := s.win
	s.t[c] = t
	if done {
		// After every real time, +Inf included.
		t = math.Inf(1)
		s.t[c], s.key[c] = t, c+int32(s.m)
	}
	// The carried leaf c and its time t go up; at each node the one that
	// comes first goes on and the other stays, swapped without branches
	// (the outcome is a coin toss near the root) unless the times are
	// equal.
	tb := math.Float64bits(t)
	nodes := s.nodes
	for k := (int(c) + s.m) >> 1; k >= 1; k >>= 1 {
		nd := &nodes[k]
		lt, l := nd.t, nd.l
		var first int32
		if lt == math.Float64frombits(tb) {
			first = s.lessInt(l, c)
		} else {
			first = b2i(lt < math.Float64frombits(tb))
		}
		mask := -first
		x := (l ^ c) & mask
		ltb := math.Float64bits(lt)
		xb := (ltb ^ tb) & uint64(int64(mask))
		nd.l, c = l^x, c^x
		nd.t, tb = math.Float64frombits(ltb^xb), tb^xb
	}
	s.win = c
}
