// Command lu factorises a dense N x N matrix with partial pivoting,
// PA = LU, distributed by block-cyclic rows, with the pivot rows and the
// panel's U block sent through Multicast.
//
//	hetrun -n 4 ./examples/lu -n 512 -nb 16
//	hetrun -n 4 ./examples/lu -n 1024 -nb 32 -algo ecfp
//
// Rows are dealt to ranks in blocks of -nb rows, round-robin. The
// factorisation is right-looking and blocked by panels of nb columns, each
// panel's rows belonging to one rank. For every column of a panel the
// ranks find the pivot with an Allreduce (largest magnitude, lowest row
// on ties); then one Multicast carries up to three messages at once: the
// pivot row to the rank that owns row k (which stores it as row k), the
// old row k back to the pivot row's owner, and the pivot row's panel part
// to every rank that has rows below k. At the end of a panel its owner
// solves for the panel's rows of U and multicasts them to every rank with
// rows below the panel, which update their rows. The check regenerates A
// and computes ||PA - LU||_F / ||A||_F; the exit status is 0 only when it
// is below -tol.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	n := flag.Int("n", 512, "matrix order N")
	nb := flag.Int("nb", 16, "rows per block of the block-cyclic distribution, and panel width")
	algo := flag.String("algo", string(comm.DefaultMulticast), "Multicast planner: fef, ecf, wr, eaf, rr, rrs, ecfp, wrp, eafp, rrp, rrsp, auto or naive")
	seed := flag.Uint64("seed", 1, "seed of the matrix entries")
	tol := flag.Float64("tol", 1e-10, "largest accepted ||PA - LU||_F / ||A||_F")
	corrupt := flag.Int("corrupt", -1, "testing: this rank alters one entry of its factor before the check, to show that the check fails")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n P lu [flags]\n\nBlocked LU with partial pivoting on block-cyclic rows; pivot rows and panels travel by Multicast.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	if *n < 1 || *nb < 1 {
		log.Fatal("lu: -n and -nb must be at least 1")
	}

	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("lu: %v", err)
	}
	defer c.Close()
	me, p := c.Rank(), c.Size()

	m := newMatrix(*n, *nb, p, me, *seed)
	f := &factoriser{c: c, m: m, opts: comm.MulticastOptions{Algorithm: collective.Algorithm(*algo)}}
	if err := c.Barrier(ctx); err != nil {
		log.Fatalf("lu: rank %d: %v", me, err)
	}
	start := time.Now()
	if err := f.factorise(ctx); err != nil {
		log.Fatalf("lu: rank %d: %v", me, err)
	}
	elapsed := time.Since(start).Seconds()
	if me == *corrupt && len(m.rows) > 0 {
		m.rows[len(m.rows)/2] += 1e-6
	}

	res, err := residual(ctx, c, m, f.ipiv)
	if err != nil {
		log.Fatalf("lu: rank %d: check: %v", me, err)
	}
	worst, err := comm.Allreduce(ctx, c, []float64{elapsed, f.tPivot, f.tMulticast, f.tCompute}, comm.Max)
	if err != nil {
		log.Fatalf("lu: rank %d: %v", me, err)
	}
	ok := res <= *tol
	if me == 0 {
		status := "OK"
		if !ok {
			status = "FAILED"
		}
		flops := 2.0 / 3.0 * math.Pow(float64(*n), 3)
		fmt.Printf("lu: %s: %d ranks, N=%d, nb=%d block-cyclic rows, multicast %s, ||PA-LU||_F/||A||_F = %.2e (tol %.0e)\n",
			status, p, *n, *nb, *algo, res, *tol)
		fmt.Printf("lu: factorised in %.3f s (%.2f GFLOP/s); %d pivot searches, %d multicasts; busiest rank: pivot search %.3f s, multicasts %.3f s, compute %.3f s\n",
			worst[0], flops/worst[0]/1e9, f.searches, f.multicasts, worst[1], worst[2], worst[3])
	}
	if !ok {
		if me == 0 {
			fmt.Fprintf(os.Stderr, "lu: the residual %.3g exceeds %.0e\n", res, *tol)
		}
		c.Close()
		os.Exit(1)
	}
}

// matrix is one rank's rows of the N x N matrix, dealt in blocks of nb
// rows round-robin: global row i belongs to rank (i/nb) mod p and is
// local row (i/(nb p))*nb + i mod nb. In place, the rows hold L (below
// the diagonal, unit diagonal implied) and U.
type matrix struct {
	n, nb, p, me int
	seed         uint64
	mine         []int     // global indices of my rows, ascending
	rows         []float64 // my rows, row major, len(mine)*n
	last         []int     // last[r]: the largest global row of rank r, -1 if none
}

func newMatrix(n, nb, p, me int, seed uint64) *matrix {
	m := &matrix{n: n, nb: nb, p: p, me: me, seed: seed, last: make([]int, p)}
	for r := range m.last {
		m.last[r] = -1
	}
	for i := 0; i < n; i++ {
		o := m.owner(i)
		m.last[o] = i
		if o == me {
			m.mine = append(m.mine, i)
		}
	}
	m.rows = make([]float64, len(m.mine)*n)
	for li, i := range m.mine {
		row := m.rows[li*n : (li+1)*n]
		for j := range row {
			row[j] = entry(seed, i, j)
		}
	}
	return m
}

// entry is A[i][j]: pseudo-random in [-1, 1), a function of its arguments.
func entry(seed uint64, i, j int) float64 {
	z := seed*0x9E3779B97F4A7C15 ^ uint64(i+1)*0xBF58476D1CE4E5B9 ^ uint64(j+1)*0x94D049BB133111EB
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11)/float64(1<<53)*2 - 1
}

func (m *matrix) owner(i int) int { return (i / m.nb) % m.p }

// row returns my global row i.
func (m *matrix) row(i int) []float64 {
	li := (i/(m.nb*m.p))*m.nb + i%m.nb
	return m.rows[li*m.n : (li+1)*m.n]
}

// below returns my global rows greater than k.
func (m *matrix) below(k int) []int {
	return m.mine[sort.SearchInts(m.mine, k+1):]
}

// ranksBelow returns the ranks other than skip that own a row greater
// than k.
func (m *matrix) ranksBelow(k int, skip ...int) []int {
	var out []int
	for r := 0; r < m.p; r++ {
		if m.last[r] > k && !slices.Contains(skip, r) {
			out = append(out, r)
		}
	}
	return out
}

type factoriser struct {
	c    *comm.Comm
	m    *matrix
	opts comm.MulticastOptions
	ipiv []int // ipiv[k]: the row swapped with row k at step k

	searches, multicasts         int
	tPivot, tMulticast, tCompute float64
}

// argmax keeps the candidate (|value|, row) with the larger magnitude, the
// lower row on ties: associative and commutative, as Allreduce needs.
var argmax comm.Op[float64] = func(dst, src []float64) {
	if src[0] > dst[0] || (src[0] == dst[0] && src[1] < dst[1]) {
		copy(dst, src)
	}
}

func (f *factoriser) factorise(ctx context.Context) error {
	m := f.m
	n := m.n
	f.ipiv = make([]int, n)
	for k0 := 0; k0 < n; k0 += m.nb {
		kend := min(k0+m.nb, n)
		for k := k0; k < kend; k++ {
			if err := f.column(ctx, k, kend); err != nil {
				return fmt.Errorf("column %d: %w", k, err)
			}
		}
		if kend < n {
			if err := f.trailing(ctx, k0, kend); err != nil {
				return fmt.Errorf("panel %d..%d: %w", k0, kend-1, err)
			}
		}
	}
	return nil
}

// column factorises column k of the panel that ends before column kend:
// pivot search, row swap, and the update of the panel's columns.
func (f *factoriser) column(ctx context.Context, k, kend int) error {
	m := f.m
	n := m.n
	t0 := time.Now()
	cand := []float64{-1, float64(n)}
	for _, i := range m.mine[sort.SearchInts(m.mine, k):] {
		if v := math.Abs(m.row(i)[k]); v > cand[0] {
			cand[0], cand[1] = v, float64(i)
		}
	}
	best, err := comm.Allreduce(ctx, f.c, cand, argmax)
	if err != nil {
		return fmt.Errorf("pivot search: %w", err)
	}
	f.searches++
	f.tPivot += time.Since(t0).Seconds()
	if best[0] == 0 || best[0] < 0 {
		return fmt.Errorf("the matrix is singular: column %d has no nonzero pivot", k)
	}
	pv := int(best[1])
	f.ipiv[k] = pv
	ok, op := m.owner(k), m.owner(pv)

	// Up to three messages in one multiple multicast: the pivot row to
	// row k's owner, row k to the pivot row's owner, and the pivot row's
	// panel part to every other rank with rows below k.
	t0 = time.Now()
	var msgs []comm.MulticastMsg
	var fullIdx, oldIdx, panelIdx = -1, -1, -1
	if op != ok {
		fullIdx = len(msgs)
		msgs = append(msgs, comm.MulticastMsg{Source: op, Dests: []int{ok}})
		if m.me == op {
			msgs[fullIdx].Data = comm.AsBytes(m.row(pv))
		}
		oldIdx = len(msgs)
		msgs = append(msgs, comm.MulticastMsg{Source: ok, Dests: []int{op}})
		if m.me == ok {
			msgs[oldIdx].Data = comm.AsBytes(m.row(k))
		}
	}
	if dests := m.ranksBelow(k, op, ok); len(dests) > 0 {
		panelIdx = len(msgs)
		msgs = append(msgs, comm.MulticastMsg{Source: op, Dests: dests})
		if m.me == op {
			msgs[panelIdx].Data = comm.AsBytes(m.row(pv)[k:kend])
		}
	}
	var got [][]byte
	if len(msgs) > 0 {
		if got, err = f.c.MulticastWith(ctx, msgs, f.opts); err != nil {
			return fmt.Errorf("pivot row multicast: %w", err)
		}
		f.multicasts++
	}
	f.tMulticast += time.Since(t0).Seconds()

	// The swap, and the pivot row's panel part on every rank.
	t0 = time.Now()
	var pivot []float64 // columns k..kend-1 of the pivot row
	switch {
	case m.me == ok && m.me == op:
		if pv != k {
			rk, rp := m.row(k), m.row(pv)
			for j := range rk {
				rk[j], rp[j] = rp[j], rk[j]
			}
		}
		pivot = m.row(k)[k:kend]
	case m.me == ok:
		v, err := comm.FromBytes[float64](got[fullIdx])
		if err != nil || len(v) != n {
			return fmt.Errorf("pivot row from rank %d: %d bytes, want %d", op, len(got[fullIdx]), 8*n)
		}
		copy(m.row(k), v)
		pivot = m.row(k)[k:kend]
	case m.me == op:
		v, err := comm.FromBytes[float64](got[oldIdx])
		if err != nil || len(v) != n {
			return fmt.Errorf("row %d from rank %d: %d bytes, want %d", k, ok, len(got[oldIdx]), 8*n)
		}
		pivot = slices.Clone(m.row(pv)[k:kend])
		copy(m.row(pv), v)
	case panelIdx >= 0 && got[panelIdx] != nil:
		v, err := comm.FromBytes[float64](got[panelIdx])
		if err != nil || len(v) != kend-k {
			return fmt.Errorf("pivot panel row from rank %d: %d bytes, want %d", op, len(got[panelIdx]), 8*(kend-k))
		}
		pivot = v
	}
	if pivot != nil {
		d := pivot[0]
		for _, i := range m.below(k) {
			r := m.row(i)
			l := r[k] / d
			r[k] = l
			if l == 0 {
				continue
			}
			for j := 1; j < len(pivot); j++ {
				r[k+j] -= l * pivot[j]
			}
		}
	}
	f.tCompute += time.Since(t0).Seconds()
	return nil
}

// trailing finishes the panel k0..kend-1: its owner solves for the
// panel's rows of U right of the panel (U12 = L11^-1 A12) and multicasts
// them; every rank updates its rows below the panel (A22 -= L21 U12).
func (f *factoriser) trailing(ctx context.Context, k0, kend int) error {
	m := f.m
	n := m.n
	owner := m.owner(k0)
	w := n - kend
	t0 := time.Now()
	var u12 []float64
	if m.me == owner {
		u12 = make([]float64, 0, (kend-k0)*w)
		for t := k0; t < kend; t++ {
			rt := m.row(t)
			for s := k0; s < t; s++ {
				l := rt[s]
				if l == 0 {
					continue
				}
				rs := m.row(s)
				for j := kend; j < n; j++ {
					rt[j] -= l * rs[j]
				}
			}
			u12 = append(u12, rt[kend:]...)
		}
	}
	f.tCompute += time.Since(t0).Seconds()

	if dests := m.ranksBelow(kend-1, owner); len(dests) > 0 {
		t0 = time.Now()
		msg := comm.MulticastMsg{Source: owner, Dests: dests}
		if m.me == owner {
			msg.Data = comm.AsBytes(u12)
		}
		got, err := f.c.MulticastWith(ctx, []comm.MulticastMsg{msg}, f.opts)
		if err != nil {
			return fmt.Errorf("U block multicast: %w", err)
		}
		f.multicasts++
		f.tMulticast += time.Since(t0).Seconds()
		if m.me != owner && got[0] != nil {
			v, err := comm.FromBytes[float64](got[0])
			if err != nil || len(v) != (kend-k0)*w {
				return fmt.Errorf("U block from rank %d: %d bytes, want %d", owner, len(got[0]), 8*(kend-k0)*w)
			}
			u12 = v
		}
	}

	t0 = time.Now()
	for _, i := range m.below(kend - 1) {
		r := m.row(i)
		for t := k0; t < kend; t++ {
			l := r[t]
			if l == 0 {
				continue
			}
			u := u12[(t-k0)*w : (t-k0+1)*w]
			dst := r[kend:]
			for j := range u {
				dst[j] -= l * u[j]
			}
		}
	}
	f.tCompute += time.Since(t0).Seconds()
	return nil
}

// residual returns ||PA - LU||_F / ||A||_F: every rank gathers the whole
// factor, then computes the rows of LU that it owns and compares them with
// the rows of A that the pivoting moved there, regenerated from the seed.
func residual(ctx context.Context, c *comm.Comm, m *matrix, ipiv []int) (float64, error) {
	n := m.n
	all, err := comm.AllgathervSlice(ctx, c, m.rows)
	if err != nil {
		return 0, err
	}
	lu := make([][]float64, n) // every row of the factor
	next := make([]int, m.p)
	for i := 0; i < n; i++ {
		o := m.owner(i)
		lu[i] = all[o][next[o]*n : (next[o]+1)*n]
		next[o]++
	}
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for k, pv := range ipiv {
		perm[k], perm[pv] = perm[pv], perm[k]
	}
	var diff2, norm2 float64
	prod := make([]float64, n)
	for _, i := range m.mine {
		clear(prod)
		li := lu[i]
		// Row i of LU: sum over t <= i of L[i][t] * U[t][:], with
		// L[i][i] = 1 and U[t][j] = 0 for j < t.
		for t := 0; t <= i; t++ {
			l := 1.0
			if t < i {
				l = li[t]
			}
			ut := lu[t]
			for j := t; j < n; j++ {
				prod[j] += l * ut[j]
			}
		}
		for j := 0; j < n; j++ {
			a := entry(m.seed, perm[i], j)
			d := a - prod[j]
			diff2 += d * d
			norm2 += a * a
		}
	}
	s, err := comm.Allreduce(ctx, c, []float64{diff2, norm2}, comm.Sum)
	if err != nil {
		return 0, err
	}
	return math.Sqrt(s[0]) / math.Sqrt(s[1]), nil
}
