package collective

import (
	"math"
	"math/bits"
)

// openShopPicker finds, for a sender of the open shop heuristic, the
// receiver it still has to serve that is available earliest, the nearest
// in cyclic order (j - i) mod P among equals.
//
// Receivers sit in one [recvOrder] keyed by (recvavail, rank), and each
// sender has a bitset of the receivers it still has to serve (its row).
// The sender walks the order from the front to the first receiver in its
// row, j0 at time a: the earliest. If j0 > i it is also the nearest of
// its tie group (the group is ordered by rank); if j0 < i and the next
// receiver in the order shares time a, the nearest is the first receiver
// after i in the row at time a, and j0 if there is none.
//
// The walk passes only receivers the sender has served: it is short while
// the sender has much left to send and grows as the sender goes on. Once
// a walk passes more receivers than the sender has left, the sender scans
// its own row instead, then and for good, in one pass in cyclic order
// from i+1 that keeps the first receiver at the minimum time. With five NIC
// classes at 1,024 ranks a pick costs about 40 steps, close to the
// smaller of the two for every pick.
type openShopPicker struct {
	n, words  int
	todo      []uint64 // row i, bit j: i still sends to j
	recvAvail []float64
	ord       *recvOrder
	scan      []bool // scan[i]: i scans its row (its walks got too long)
}

// openShopPick is a sender's receiver j, its time a and its place in
// the order (at.block < 0: not known).
type openShopPick struct {
	j  int
	a  float64
	at orderPos
}

func newOpenShopPicker(n int) *openShopPicker {
	words := (n + 63) >> 6
	return &openShopPicker{n: n, words: words, todo: make([]uint64, n*words),
		recvAvail: make([]float64, n), ord: newRecvOrder(n), scan: make([]bool, n)}
}

func (ps *openShopPicker) row(i int) []uint64 { return ps.todo[i*ps.words : (i+1)*ps.words] }

// pick picks for sender i, whose row has k > 0 bits set.
func (ps *openShopPicker) pick(i, k int) openShopPick {
	row := ps.row(i)
	j, a, at, tied := 0, 0.0, orderPos{-1, 0}, false
	if !ps.scan[i] {
		j, a, at, tied = ps.ord.first(row, k)
	}
	if at.block < 0 {
		ps.scan[i] = true
		j, a = ps.scanRow(row, i)
		return openShopPick{j: j, a: a, at: orderPos{-1, 0}}
	}
	if tied && j < i {
		if r := ps.firstAt(row, i+1, ps.n, a); r >= 0 {
			return openShopPick{j: r, a: a, at: orderPos{-1, 0}}
		}
	}
	return openShopPick{j: j, a: a, at: at}
}

// scanRow returns the receiver in row available earliest, the first in
// cyclic order from i+1 among equals, and its time: one pass over the
// row in that order, keeping a receiver only if it is strictly earlier.
func (ps *openShopPicker) scanRow(row []uint64, i int) (int, float64) {
	j, a := -1, math.Inf(1)
	scan := func(lo, hi int) {
		for w := lo >> 6; w<<6 < hi; w++ {
			v := row[w]
			if w == lo>>6 {
				v &^= 1<<(lo&63) - 1
			}
			if (w+1)<<6 > hi {
				v &= 1<<(hi&63) - 1
			}
			for ; v != 0; v &= v - 1 {
				r := w<<6 + bits.TrailingZeros64(v)
				if t := ps.recvAvail[r]; t < a || j < 0 {
					j, a = r, t
				}
			}
		}
	}
	scan(i+1, ps.n)
	scan(0, i+1)
	return j, a
}

// firstAt returns the first receiver in [lo, hi) set in row and available
// at time a, or -1.
func (ps *openShopPicker) firstAt(row []uint64, lo, hi int, a float64) int {
	for w := lo >> 6; w<<6 < hi; w++ {
		v := row[w]
		if w == lo>>6 {
			v &^= 1<<(lo&63) - 1
		}
		for ; v != 0; v &= v - 1 {
			r := w<<6 + bits.TrailingZeros64(v)
			if r >= hi {
				return -1
			}
			if ps.recvAvail[r] == a {
				return r
			}
		}
	}
	return -1
}

// place returns p's place in the order.
func (ps *openShopPicker) place(p openShopPick) orderPos {
	if p.at.block >= 0 {
		return p.at
	}
	return ps.ord.locate(recvKey{p.a, int32(p.j)})
}

// recvOrder keeps every receiver ordered by (time, rank), for the open
// shop heuristic: a sender walks it from the front to its earliest
// receiver, and the chosen receiver moves to its new, later time.
//
// It is a list of sorted blocks (a one-level B-tree): the walk reads
// contiguous arrays; a move takes the key out where the walk found it (or
// a binary search does) and puts it back by a search from the back, where
// new times mostly go, each with a shift within one block of at most
// 2*orderBlock keys.
type recvOrder struct {
	blocks [][]recvKey
	spare  [][]recvKey // emptied blocks, for reuse by splits
}

type recvKey struct {
	t float64
	r int32
}

func (a recvKey) less(b recvKey) bool { return a.t < b.t || (a.t == b.t && a.r < b.r) }

// orderBlock is the size of a freshly filled or split block; blocks hold
// 1 to 2*orderBlock keys.
const orderBlock = 32

// newRecvOrder holds receivers 0..n-1, all at time 0.
func newRecvOrder(n int) *recvOrder {
	o := &recvOrder{}
	for r := 0; r < n; r += orderBlock {
		b := o.newBlock()
		for k := r; k < n && k < r+orderBlock; k++ {
			b = append(b, recvKey{0, int32(k)})
		}
		o.blocks = append(o.blocks, b)
	}
	return o
}

func (o *recvOrder) newBlock() []recvKey {
	if k := len(o.spare); k > 0 {
		b := o.spare[k-1]
		o.spare = o.spare[:k-1]
		return b[:0]
	}
	return make([]recvKey, 0, 2*orderBlock)
}

// orderPos is a key's place: block and index in the block.
type orderPos struct{ block, idx int }

// locate returns the place of k, which must be in the order.
func (o *recvOrder) locate(k recvKey) orderPos {
	bi := o.blockFor(k)
	b := o.blocks[bi]
	p := searchBlock(b, k)
	if p == len(b) || b[p] != k {
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
		if b[len(b)-1].less(k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// searchBlock returns the first index in b whose key is not below k.
func searchBlock(b []recvKey, k recvKey) int {
	lo, hi := 0, len(b)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if b[mid].less(k) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// remove takes out the key at at.
func (o *recvOrder) remove(at orderPos) {
	b := o.blocks[at.block]
	b = append(b[:at.idx], b[at.idx+1:]...)
	if len(b) == 0 && len(o.blocks) > 1 {
		o.spare = append(o.spare, b)
		o.blocks = append(o.blocks[:at.block], o.blocks[at.block+1:]...)
	} else {
		o.blocks[at.block] = b
	}
}

// insert puts k in its place. New times are mostly late: the search runs
// from the back.
func (o *recvOrder) insert(k recvKey) {
	bi := len(o.blocks) - 1
	for bi > 0 && !o.blocks[bi-1][len(o.blocks[bi-1])-1].less(k) {
		bi--
	}
	b := o.blocks[bi]
	if len(b) == 2*orderBlock {
		// Split: the upper half goes to a new block after this one.
		nb := append(o.newBlock(), b[orderBlock:]...)
		b = b[:orderBlock]
		o.blocks[bi] = b
		o.blocks = append(o.blocks, nil)
		copy(o.blocks[bi+2:], o.blocks[bi+1:])
		o.blocks[bi+1] = nb
		if b[len(b)-1].less(k) {
			bi++
			b = nb
		}
	}
	p := len(b)
	for p > 0 && k.less(b[p-1]) {
		p--
	}
	b = append(b, recvKey{})
	copy(b[p+1:], b[p:])
	b[p] = k
	o.blocks[bi] = b
}

// first returns the first receiver in the order whose bit is set in row,
// its time and place, and whether the key after it has the same time. It
// gives up after passing limit receivers, with at.block == -1.
func (o *recvOrder) first(row []uint64, limit int) (r int, t float64, at orderPos, tied bool) {
	for bi, b := range o.blocks {
		for p, k := range b {
			if row[k.r>>6]>>(k.r&63)&1 == 0 {
				if limit--; limit < 0 {
					return 0, 0, orderPos{-1, 0}, false
				}
				continue
			}
			switch {
			case p+1 < len(b):
				tied = b[p+1].t == k.t
			case bi+1 < len(o.blocks):
				tied = o.blocks[bi+1][0].t == k.t
			}
			return int(k.r), k.t, orderPos{bi, p}, tied
		}
	}
	return 0, 0, orderPos{-1, 0}, false
}

// senderTree is a tournament (loser) tree of senders keyed by (time,
// rank): a sender's new time costs one comparison per level.
type senderTree struct {
	m     int       // leaves, a power of two; leaf r is sender r
	t     []float64 // time of each leaf
	key   []int32   // rank of each leaf, or m+rank (and time +Inf) once done
	loser []int32   // loser[k], 1 <= k < m: the leaf that lost at node k
	win   int32     // the leaf that is first
}

func newSenderTree(n int, active func(r int) bool) *senderTree {
	m := 1
	for m < n {
		m <<= 1
	}
	s := &senderTree{m: m, t: make([]float64, m), key: make([]int32, m), loser: make([]int32, m)}
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
		if s.less(b, a) {
			a, b = b, a
		}
		win[k], s.loser[k] = a, b
	}
	s.win = win[1]
	return s
}

// less reports whether leaf a comes before leaf b. It is written without
// branches (the outcome is a coin toss near the root): each level of
// update then costs no misprediction.
func (s *senderTree) less(a, b int32) bool { return s.lessInt(a, b) != 0 }

// lessInt is less as 1 or 0.
func (s *senderTree) lessInt(a, b int32) int32 {
	ta, tb := s.t[a], s.t[b]
	return b2i(ta < tb) | b2i(ta == tb)&b2i(s.key[a] < s.key[b])
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// top returns the first sender, or -1 if every sender is done.
func (s *senderTree) top() int {
	if int(s.key[s.win]) >= s.m {
		return -1
	}
	return int(s.win)
}

// update gives the first sender time t, or retires it (done).
func (s *senderTree) update(t float64, done bool) {
	w := s.win
	s.t[w] = t
	if done {
		// After every real time, +Inf included.
		s.t[w], s.key[w] = math.Inf(1), w+int32(s.m)
	}
	c := w
	for k := (int(w) + s.m) >> 1; k >= 1; k >>= 1 {
		// Swap when the loser comes first, by a mask.
		l := s.loser[k]
		x := (l ^ c) & -int32(s.lessInt(l, c))
		s.loser[k], c = l^x, c^x
	}
	s.win = c
}
