// Command transpose transposes a dense N x N float64 matrix distributed by
// row blocks, with one Alltoallv per transpose: the motivating case of the
// total-exchange paper (every rank sends a different block to every other
// rank, and the block sizes differ when N is not a multiple of the number
// of ranks or the blocks are deliberately uneven).
//
//	hetrun -n 4 ./examples/transpose -n 1000 -iters 5 -algo auto
//	hetrun -n 3 ./examples/transpose -n 999 -dist skew -algo openshop
//
// Rank r owns rows lo(r)..hi(r)-1 of A, every column. It sends rank s the
// sub-block A[lo(r):hi(r), lo(s):hi(s)], packed already transposed, so
// that s copies it into columns lo(r):hi(r) of its rows of B = A^T.
// Element A[i][j] holds i*N+j (exact in float64), so every rank checks
// every element it received. The matrix is transposed back and forth
// -iters times; each result is checked element by element. Rank 0 prints
// one summary line; the exit status is 0 only if every element was right.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	n := flag.Int("n", 1024, "matrix order N (any N >= number of ranks; N/P need not be whole)")
	iters := flag.Int("iters", 4, "number of transposes (each result is checked)")
	algo := flag.String("algo", "auto", "Alltoallv planner: caterpillar, maxmatch, minmatch, greedy, openshop, auto or naive")
	dist := flag.String("dist", "even", "row distribution: even (N/P rows, the remainder spread) or skew (rank r gets rows in proportion to r+1)")
	corrupt := flag.Int("corrupt", -1, "testing: this rank alters one received element of the first transpose, to show that the check fails")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n P transpose [flags]\n\nTransposes a row-block distributed N x N matrix with Alltoallv and checks every element.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)

	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("transpose: %v", err)
	}
	defer c.Close()
	me, p := c.Rank(), c.Size()
	if *n < p || *iters < 1 {
		log.Fatalf("transpose: need -n >= %d (the number of ranks) and -iters >= 1", p)
	}
	bounds, err := rowBounds(*n, p, *dist)
	if err != nil {
		log.Fatalf("transpose: %v", err)
	}
	opts := comm.AlltoallvOptions{Algorithm: collective.Algorithm(*algo)}

	a := newLocal(*n, bounds, me)
	a.fill()
	var (
		bad   int64
		times []float64
	)
	for it := 0; it < *iters; it++ {
		if err := c.Barrier(ctx); err != nil {
			log.Fatalf("transpose: rank %d: %v", me, err)
		}
		t0 := time.Now()
		b, err := transpose(ctx, c, a, opts)
		if err != nil {
			log.Fatalf("transpose: rank %d: transpose %d: %v", me, it, err)
		}
		times = append(times, time.Since(t0).Seconds())
		if it == 0 && me == *corrupt && len(b.data) > 0 {
			b.data[len(b.data)-1]++
		}
		// After an odd number of transposes the matrix is A^T, after an
		// even number A again.
		if w := b.check(it%2 == 0); w > 0 {
			bad += w
			fmt.Fprintf(os.Stderr, "transpose: rank %d: transpose %d: %d wrong elements\n", me, it, w)
		}
		a = b
	}

	sums, err := comm.Allreduce(ctx, c, []int64{bad}, comm.Sum)
	if err != nil {
		log.Fatalf("transpose: rank %d: %v", me, err)
	}
	slowest, err := comm.Allreduce(ctx, c, times, comm.Max)
	if err != nil {
		log.Fatalf("transpose: rank %d: %v", me, err)
	}
	if me == 0 {
		status := "OK"
		if sums[0] != 0 {
			status = fmt.Sprintf("FAILED (%d wrong elements)", sums[0])
		}
		moved := float64(*n) * float64(*n) * 8
		best := slices.Min(slowest)
		med := collective.Median(slowest)
		fmt.Printf("transpose: %s: %d ranks, N=%d (%s rows %v), %d transposes, algo %s, %.1f MB each, best %.2f ms (%.3f GB/s), median %.2f ms\n",
			status, p, *n, *dist, blockSizes(bounds), *iters, *algo, moved/1e6, best*1e3, moved/best/1e9, med*1e3)
	}
	if sums[0] != 0 {
		c.Close()
		os.Exit(1)
	}
}

// rowBounds returns the first row of every rank, and N at the end: rank r
// owns rows bounds[r]..bounds[r+1]-1.
func rowBounds(n, p int, dist string) ([]int, error) {
	b := make([]int, p+1)
	switch dist {
	case "even":
		for r := 0; r <= p; r++ {
			b[r] = r * n / p
		}
	case "skew":
		// Rank r gets about (r+1)/sum of the rows, at least one.
		w := p * (p + 1) / 2
		acc := 0
		for r := 0; r < p; r++ {
			acc += r + 1
			b[r+1] = max(acc*n/w, b[r]+1)
		}
		b[p] = n
		for r := p - 1; r > 0 && b[r] >= b[r+1]; r-- {
			b[r] = b[r+1] - 1
		}
	default:
		return nil, fmt.Errorf("-dist %q: want even or skew", dist)
	}
	return b, nil
}

func blockSizes(b []int) []int {
	s := make([]int, len(b)-1)
	for r := range s {
		s[r] = b[r+1] - b[r]
	}
	return s
}

// local is one rank's row block: rows lo..hi-1 of an N x N matrix, row
// major.
type local struct {
	n, me  int
	bounds []int
	lo, hi int
	data   []float64
}

func newLocal(n int, bounds []int, me int) *local {
	lo, hi := bounds[me], bounds[me+1]
	return &local{n: n, me: me, bounds: bounds, lo: lo, hi: hi, data: make([]float64, (hi-lo)*n)}
}

// value is the element at (i, j) of the original matrix A.
func value(n, i, j int) float64 { return float64(i)*float64(n) + float64(j) }

func (l *local) fill() {
	for i := l.lo; i < l.hi; i++ {
		row := l.data[(i-l.lo)*l.n:]
		for j := 0; j < l.n; j++ {
			row[j] = value(l.n, i, j)
		}
	}
}

// check counts the elements that differ from A^T (transposed) or A.
func (l *local) check(transposed bool) int64 {
	var bad int64
	for i := l.lo; i < l.hi; i++ {
		row := l.data[(i-l.lo)*l.n:]
		for j := 0; j < l.n; j++ {
			want := value(l.n, i, j)
			if transposed {
				want = value(l.n, j, i)
			}
			if row[j] != want {
				bad++
			}
		}
	}
	return bad
}

// transpose returns this rank's rows of the transpose of the distributed
// matrix whose rows l holds.
func transpose(ctx context.Context, c *comm.Comm, l *local, opts comm.AlltoallvOptions) (*local, error) {
	p := len(l.bounds) - 1
	rows := l.hi - l.lo
	send := make([][]float64, p)
	for s := 0; s < p; s++ {
		// The block for s: columns lo(s)..hi(s)-1 of my rows, stored
		// column by column, which is row by row of the transposed block.
		slo, shi := l.bounds[s], l.bounds[s+1]
		buf := make([]float64, (shi-slo)*rows)
		for j := slo; j < shi; j++ {
			out := buf[(j-slo)*rows:]
			for i := 0; i < rows; i++ {
				out[i] = l.data[i*l.n+j]
			}
		}
		send[s] = buf
	}
	bufs := make([][]byte, p)
	for s := range send {
		bufs[s] = comm.AsBytes(send[s])
	}
	recv, err := c.AlltoallvWith(ctx, bufs, opts)
	if err != nil {
		return nil, err
	}
	t := newLocal(l.n, l.bounds, l.me)
	for r := 0; r < p; r++ {
		blk, err := comm.FromBytes[float64](recv[r])
		if err != nil {
			return nil, fmt.Errorf("block from rank %d: %w", r, err)
		}
		rlo, rhi := l.bounds[r], l.bounds[r+1]
		if want := (rhi - rlo) * rows; len(blk) != want {
			return nil, fmt.Errorf("block from rank %d has %d elements, want %d", r, len(blk), want)
		}
		w := rhi - rlo
		for i := 0; i < rows; i++ {
			copy(t.data[i*l.n+rlo:i*l.n+rhi], blk[i*w:(i+1)*w])
		}
	}
	return t, nil
}
