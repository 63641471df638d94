// Command fft2d computes 2-D FFTs of a stream of frames as a pipeline
// across two groups of ranks: group A does the row FFTs, a corner turn
// with Redistribute hands the frame to group B, and group B does the
// column FFTs, while group A already transforms the rows of the next
// frame.
//
//	hetrun -n 4 ./examples/fft2d -rows 512 -cols 512 -frames 8
//	hetrun -n 8 ./examples/fft2d -groups clusters -algo ggp -perpair
//
// Group A owns the frame by row blocks, group B by column blocks; the
// corner turn sends every A rank's rows of every B rank's columns (packed
// column by column) with one Redistribute per frame, planned by OGGP (or
// -algo) from the real sizes. Group B checks every column it produced
// against a serial 2-D transform of the same frame (the naive DFT on
// small frames, the serial FFT otherwise) and the exit status is 0 only if
// the largest error relative to the largest output is below -tol.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"slices"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
)

type config struct {
	rows, cols, frames int
	seed               uint64
	ref                string
	tol                float64
	corrupt            int
	opts               comm.RedistributeOptions
}

func main() {
	var cfg config
	flag.IntVar(&cfg.rows, "rows", 512, "rows of a frame (a power of two, at least the size of group A)")
	flag.IntVar(&cfg.cols, "cols", 512, "columns of a frame (a power of two, at least the size of group B)")
	flag.IntVar(&cfg.frames, "frames", 8, "number of frames streamed through the pipeline")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the input frames")
	groups := flag.String("groups", "auto", "the two groups: half (first half of the ranks rows, second half columns), clusters (collective.Clusters of the probed model), or auto (clusters when the model shows two clusters, half otherwise)")
	algo := flag.String("algo", "oggp", "Redistribute planner: oggp, ggp or bruteforce")
	flag.IntVar(&cfg.opts.K, "k", 0, "transfers the backbone carries at once (0: measured, or min of the group sizes without a model)")
	flag.BoolVar(&cfg.opts.PerPair, "perpair", false, "drop the barriers between the corner turn's steps (by default steps are separated by barriers, as in the redistribution paper)")
	flag.StringVar(&cfg.ref, "ref", "auto", "reference for the check: dft (naive transform), fft (serial FFT), auto (dft when rows*cols*(rows+cols) <= 2^26) or none")
	flag.Float64Var(&cfg.tol, "tol", 1e-9, "largest accepted error, relative to the largest output magnitude")
	flag.IntVar(&cfg.corrupt, "corrupt", -1, "testing: this rank of group B alters one output value of the first frame, to show that the check fails")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n P fft2d [flags]\n\nPipelined 2-D FFT: row FFTs on group A, corner turn with Redistribute, column FFTs on group B.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	cfg.opts.Algorithm = collective.Algorithm(*algo)
	if cfg.ref == "auto" {
		cfg.ref = "fft"
		if float64(cfg.rows)*float64(cfg.cols)*float64(cfg.rows+cfg.cols) <= 1<<26 {
			cfg.ref = "dft"
		}
	}
	switch {
	case cfg.frames < 1:
		log.Fatal("fft2d: -frames must be at least 1")
	case cfg.ref != "dft" && cfg.ref != "fft" && cfg.ref != "none":
		log.Fatalf("fft2d: -ref %q: want dft, fft, auto or none", cfg.ref)
	}
	rowPlan, err := newFFTPlan(cfg.cols) // a row has cols elements
	if err != nil {
		log.Fatalf("fft2d: -cols: %v", err)
	}
	colPlan, err := newFFTPlan(cfg.rows)
	if err != nil {
		log.Fatalf("fft2d: -rows: %v", err)
	}

	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("fft2d: %v", err)
	}
	defer c.Close()
	me, p := c.Rank(), c.Size()
	a, b, how, err := chooseGroups(c, *groups)
	if err != nil {
		log.Fatalf("fft2d: %v", err)
	}
	if cfg.rows < len(a) || cfg.cols < len(b) {
		log.Fatalf("fft2d: %dx%d frames cannot be split over %d row ranks and %d column ranks", cfg.rows, cfg.cols, len(a), len(b))
	}

	// The corner turn's concurrency k: measured once here (untimed) when
	// the world has a probed model, as Redistribute would do on its first
	// call, so that the summary can name it.
	kHow := "given"
	if p == 1 {
		kHow = "unused"
	} else if cfg.opts.K == 0 {
		kHow = "min of the group sizes, no probe"
		cfg.opts.K = min(len(a), len(b))
		if c.ProbeResult() != nil {
			k, rate, err := c.ProbeBackbone(ctx, a, b)
			if err != nil {
				log.Fatalf("fft2d: rank %d: probing the backbone: %v", me, err)
			}
			cfg.opts.K = k
			kHow = fmt.Sprintf("measured, lone transfer %.0f MB/s", rate/1e6)
		}
	}

	r := newRun(cfg, a, b, me, rowPlan, colPlan)
	start := time.Now()
	if err := r.pipeline(ctx, c); err != nil {
		log.Fatalf("fft2d: rank %d: %v", me, err)
	}
	elapsed := time.Since(start).Seconds()
	r.check()

	// Every rank learns the worst error, the slowest rank's time, and the
	// largest time spent in each stage.
	worst, err := comm.Allreduce(ctx, c, []float64{r.maxErr, elapsed, r.tRows, r.tTurn, r.tCols, r.tCheck}, comm.Max)
	if err != nil {
		log.Fatalf("fft2d: rank %d: %v", me, err)
	}
	ok := worst[0] <= cfg.tol && !math.IsNaN(worst[0])
	if me == 0 {
		status := "OK"
		if !ok {
			status = "FAILED"
		}
		perFrame := worst[1] / float64(cfg.frames)
		fmt.Printf("fft2d: %s: %d ranks, rows on %v, columns on %v (%s), %dx%d, %d frames, corner turn %s k=%d (%s) perpair=%v, max relative error %.2e (ref %s, tol %.0e)\n",
			status, p, a, b, how, cfg.rows, cfg.cols, cfg.frames, cfg.opts.Algorithm, cfg.opts.K, kHow, cfg.opts.PerPair, worst[0], cfg.ref, cfg.tol)
		fmt.Printf("fft2d: %.2f ms per frame (%.1f frames/s); busiest rank per stage: row FFTs %.1f ms, corner turns %.1f ms, column FFTs %.1f ms in total (check, untimed: %.1f ms)\n",
			perFrame*1e3, 1/perFrame, worst[2]*1e3, worst[3]*1e3, worst[4]*1e3, worst[5]*1e3)
	}
	if !ok {
		c.Close()
		os.Exit(1)
	}
}

// chooseGroups returns group A (row FFTs) and group B (column FFTs) and
// how they were chosen. With one rank both groups are that rank.
func chooseGroups(c *comm.Comm, how string) ([]int, []int, string, error) {
	p := c.Size()
	if p == 1 {
		return []int{0}, []int{0}, "one rank: no corner turn", nil
	}
	half := func() ([]int, []int) {
		var a, b []int
		for r := 0; r < p; r++ {
			if r < p/2 {
				a = append(a, r)
			} else {
				b = append(b, r)
			}
		}
		return a, b
	}
	m := c.Model()
	switch how {
	case "half":
		a, b := half()
		return a, b, "halves", nil
	case "clusters", "auto":
		if m == nil || m.Size() != p {
			if how == "clusters" {
				return nil, nil, "", fmt.Errorf("-groups clusters: no probed model (run under hetrun with probing on, or give HETCOMM_MODEL)")
			}
			a, b := half()
			return a, b, "halves: no model", nil
		}
		g := collective.Clusters(m)
		if len(g) != 2 {
			return nil, nil, "", fmt.Errorf("collective.Clusters returned %d groups, want 2", len(g))
		}
		ratio := clusterRatio(m, g)
		if how == "auto" && ratio < 2 {
			a, b := half()
			return a, b, fmt.Sprintf("halves: the model's clusters are only %.1fx faster inside", ratio), nil
		}
		return g[0], g[1], fmt.Sprintf("model clusters, %.1fx faster inside", ratio), nil
	}
	return nil, nil, "", fmt.Errorf("-groups %q: want half, clusters or auto", how)
}

// clusterRatio is the median cost of moving 1 MiB between the groups over
// the median cost inside them.
func clusterRatio(m *collective.Model, g [][]int) float64 {
	in := map[int]int{}
	for gi, grp := range g {
		for _, r := range grp {
			in[r] = gi
		}
	}
	var inside, across []float64
	for i := 0; i < m.Size(); i++ {
		for j := 0; j < m.Size(); j++ {
			if i == j {
				continue
			}
			cost := m.Cost(i, j, 1<<20)
			if in[i] == in[j] {
				inside = append(inside, cost)
			} else {
				across = append(across, cost)
			}
		}
	}
	if len(inside) == 0 || len(across) == 0 {
		return 1
	}
	return collective.Median(across) / collective.Median(inside)
}

// run is one rank's part of the pipeline.
type run struct {
	cfg              config
	a, b             []int
	me               int
	ia, ib           int // index in a and b, -1 if not a member
	rowLo, rowHi     []int
	colLo, colHi     []int
	rowPlan, colPlan *fftPlan

	rows []complex128   // group A: my rows of the current frame, row major
	cols []complex128   // group B: my columns of the frame in flight, column major
	out  [][]complex128 // group B: my transformed columns of every frame, checked at the end

	maxErr                      float64
	tRows, tTurn, tCols, tCheck float64
}

func newRun(cfg config, a, b []int, me int, rowPlan, colPlan *fftPlan) *run {
	r := &run{cfg: cfg, a: a, b: b, me: me, ia: slices.Index(a, me), ib: slices.Index(b, me), rowPlan: rowPlan, colPlan: colPlan}
	r.rowLo, r.rowHi = blocks(cfg.rows, len(a))
	r.colLo, r.colHi = blocks(cfg.cols, len(b))
	return r
}

// blocks splits n into p contiguous blocks whose sizes differ by at most
// one.
func blocks(n, p int) (lo, hi []int) {
	lo, hi = make([]int, p), make([]int, p)
	for i := 0; i < p; i++ {
		lo[i], hi[i] = i*n/p, (i+1)*n/p
	}
	return lo, hi
}

// input is element (i, j) of frame f: pseudo-random, in [-1, 1) for both
// parts, a function of its arguments only.
func input(seed uint64, f, i, j int) complex128 {
	x := seed*0x9E3779B97F4A7C15 ^ uint64(f+1)*0xBF58476D1CE4E5B9 ^ uint64(i+1)*0x94D049BB133111EB ^ uint64(j+1)*0x2545F4914F6CDD1D
	mix := func() float64 {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		return float64(z>>11)/float64(1<<53)*2 - 1
	}
	re := mix()
	return complex(re, mix())
}

// pipeline streams the frames: at step s group A transforms the rows of
// frame s while group B transforms the columns of frame s-1, then the
// corner turn hands frame s from A to B.
func (r *run) pipeline(ctx context.Context, c *comm.Comm) error {
	nc := r.cfg.cols
	for s := 0; s <= r.cfg.frames; s++ {
		if r.ia >= 0 && s < r.cfg.frames {
			t0 := time.Now()
			lo, hi := r.rowLo[r.ia], r.rowHi[r.ia]
			r.rows = slices.Grow(r.rows[:0], (hi-lo)*nc)[:(hi-lo)*nc]
			for i := lo; i < hi; i++ {
				row := r.rows[(i-lo)*nc : (i-lo+1)*nc]
				for j := range row {
					row[j] = input(r.cfg.seed, s, i, j)
				}
				r.rowPlan.forward(row)
			}
			r.tRows += time.Since(t0).Seconds()
		}
		if r.ib >= 0 && s >= 1 {
			if err := r.columns(s - 1); err != nil {
				return err
			}
		}
		if s < r.cfg.frames {
			t0 := time.Now()
			if err := r.cornerTurn(ctx, c); err != nil {
				return fmt.Errorf("corner turn of frame %d: %w", s, err)
			}
			r.tTurn += time.Since(t0).Seconds()
		}
	}
	return nil
}

// cornerTurn moves the current frame from A's rows to B's columns.
func (r *run) cornerTurn(ctx context.Context, c *comm.Comm) error {
	nr, nc := r.cfg.rows, r.cfg.cols
	if len(r.a) == 1 && len(r.b) == 1 && r.a[0] == r.b[0] {
		// One rank: transpose locally into column-major order.
		r.cols = slices.Grow(r.cols[:0], nr*nc)[:nr*nc]
		for i := 0; i < nr; i++ {
			for j := 0; j < nc; j++ {
				r.cols[j*nr+i] = r.rows[i*nc+j]
			}
		}
		return nil
	}
	var send [][]byte
	if r.ia >= 0 {
		lo, hi := r.rowLo[r.ia], r.rowHi[r.ia]
		send = make([][]byte, len(r.b))
		for jb := range r.b {
			// My rows of B rank jb's columns, column by column, as
			// interleaved (re, im) float64s.
			clo, chi := r.colLo[jb], r.colHi[jb]
			buf := make([]float64, 0, 2*(hi-lo)*(chi-clo))
			for j := clo; j < chi; j++ {
				for i := 0; i < hi-lo; i++ {
					v := r.rows[i*nc+j]
					buf = append(buf, real(v), imag(v))
				}
			}
			send[jb] = comm.AsBytes(buf)
		}
	}
	got, err := c.Redistribute(ctx, r.a, r.b, send, r.cfg.opts)
	if err != nil {
		return err
	}
	if r.ib < 0 {
		return nil
	}
	clo, chi := r.colLo[r.ib], r.colHi[r.ib]
	r.cols = slices.Grow(r.cols[:0], nr*(chi-clo))[:nr*(chi-clo)]
	for sa := range r.a {
		vals, err := comm.FromBytes[float64](got[sa])
		if err != nil {
			return fmt.Errorf("from rank %d: %w", r.a[sa], err)
		}
		lo, hi := r.rowLo[sa], r.rowHi[sa]
		if want := 2 * (hi - lo) * (chi - clo); len(vals) != want {
			return fmt.Errorf("rank %d sent %d values, want %d", r.a[sa], len(vals), want)
		}
		k := 0
		for j := 0; j < chi-clo; j++ {
			col := r.cols[j*nr:]
			for i := lo; i < hi; i++ {
				col[i] = complex(vals[k], vals[k+1])
				k += 2
			}
		}
	}
	return nil
}

// columns transforms B's columns of frame f and keeps them for the check.
func (r *run) columns(f int) error {
	nr := r.cfg.rows
	clo, chi := r.colLo[r.ib], r.colHi[r.ib]
	t0 := time.Now()
	for j := 0; j < chi-clo; j++ {
		r.colPlan.forward(r.cols[j*nr : (j+1)*nr])
	}
	r.tCols += time.Since(t0).Seconds()
	if f == 0 && r.me == r.cfg.corrupt && len(r.cols) > 0 {
		r.cols[len(r.cols)/2] += 1e-3
	}
	if r.cfg.ref != "none" {
		r.out = append(r.out, slices.Clone(r.cols))
	}
	return nil
}

// check compares B's transformed columns of every frame with the
// reference, after the timed pipeline.
func (r *run) check() {
	if r.ib < 0 || r.cfg.ref == "none" {
		return
	}
	t0 := time.Now()
	clo, chi := r.colLo[r.ib], r.colHi[r.ib]
	for f, got := range r.out {
		ref := r.reference(f, clo, chi)
		var maxAbs, maxDiff float64
		for k, want := range ref {
			maxAbs = math.Max(maxAbs, cmplxAbs(want))
			maxDiff = math.Max(maxDiff, cmplxAbs(got[k]-want))
		}
		e := maxDiff / math.Max(maxAbs, math.SmallestNonzeroFloat64)
		if math.IsNaN(e) || e > r.cfg.tol {
			fmt.Fprintf(os.Stderr, "fft2d: rank %d: frame %d, columns %d..%d: relative error %.3g exceeds %.0e\n", r.me, f, clo, chi-1, e, r.cfg.tol)
		}
		if math.IsNaN(e) || e > r.maxErr {
			r.maxErr = e
		}
	}
	r.tCheck = time.Since(t0).Seconds()
}

func cmplxAbs(z complex128) float64 { return math.Hypot(real(z), imag(z)) }

// reference computes serially, from the frame's definition, the columns
// clo..chi-1 of its 2-D transform, column major: every row transformed,
// then each of these columns.
func (r *run) reference(f, clo, chi int) []complex128 {
	nr, nc := r.cfg.rows, r.cfg.cols
	full := make([]complex128, nr*nc)
	row := make([]complex128, nc)
	for i := 0; i < nr; i++ {
		for j := range row {
			row[j] = input(r.cfg.seed, f, i, j)
		}
		if r.cfg.ref == "dft" {
			copy(full[i*nc:], dft(row))
		} else {
			copy(full[i*nc:], row)
			r.rowPlan.forward(full[i*nc : (i+1)*nc])
		}
	}
	out := make([]complex128, 0, nr*(chi-clo))
	col := make([]complex128, nr)
	for j := clo; j < chi; j++ {
		for i := range col {
			col[i] = full[i*nc+j]
		}
		if r.cfg.ref == "dft" {
			out = append(out, dft(col)...)
		} else {
			r.colPlan.forward(col)
			out = append(out, col...)
		}
	}
	return out
}
