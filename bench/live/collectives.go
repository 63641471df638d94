package live

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
)

// liveCase is one collective of one size with one algorithm, ready to run.
type liveCase struct {
	// run calls the collective once.
	run func(context.Context) error
	// check calls it once more and compares its result with what it
	// must be: bad describes the first difference ("" when there is
	// none); err is the collective's own failure. nil when the result is
	// not checked.
	check func(context.Context) (bad string, err error)
	// lb is the one-port lower bound, fabric the bound on the fabric the
	// model implies, boundBy the resource that sets fabric, pred the
	// planner's prediction (seconds, 0 when unknown).
	lb, fabric, pred float64
	boundBy          string
	// total is the bytes the collective moves when the caller's matrix
	// does not say.
	total int64
	// chosen is what Auto resolves to when the plan says so before the
	// run, chunks the pieces of a broadcast, note what the table's last
	// column says of the plan.
	chosen string
	chunks int
	note   string
}

// The algorithms of the collectives that have no planner of patterns:
// the first of each is its default, all of them are "all".
var fixedAlgorithms = map[string][]collective.Algorithm{
	"bcast":         {collective.Auto, collective.BcastBinomial, collective.BcastPipeline},
	"allgather":     {collective.Auto, collective.AllgatherRing, collective.AllgatherMesh},
	"allreduce":     {collective.Auto, collective.AllreduceTree, collective.AllreduceRSAG},
	"reducescatter": {collective.Auto},
}

// bcastRoot is the root of `hetbench live -collective bcast` (and of the
// MPI peer's MPI_Bcast).
const bcastRoot = 0

// fixedAlgorithmsOf parses -algo for a collective of fixedAlgorithms.
func fixedAlgorithmsOf(coll, algos string) ([]collective.Algorithm, error) {
	valid := fixedAlgorithms[coll]
	if algos == "all" {
		return slices.Clone(valid), nil
	}
	var out []collective.Algorithm
	for _, a := range strings.Split(algos, ",") {
		a := collective.Algorithm(strings.TrimSpace(a))
		if !slices.Contains(valid, a) {
			names := make([]string, len(valid))
			for i, v := range valid {
				names[i] = string(v)
			}
			return nil, fmt.Errorf("bench: unknown %s algorithm %q (want %s)", coll, a, strings.Join(names, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// bcastCase broadcasts size bytes from bcastRoot with algo (forced with
// comm.WithAlgorithm), bounded by collective.BcastBound and predicted by
// collective.PlanBcast on the comm's model.
func bcastCase(c *comm.Comm, size int64, algo collective.Algorithm, seed uint64) liveCase {
	n := c.Size()
	want := fillBytes(make([]byte, size), seed) // root's message, which every rank must get
	var data []byte
	if c.Rank() == bcastRoot {
		data = want
	}
	lc := liveCase{total: size * int64(n-1)}
	if m := c.Model(); m != nil {
		bd := collective.BcastBound(collective.FabricFromModel(m), bcastRoot, size)
		lc.fabric, lc.boundBy = bd.Seconds, bd.Resource
		// The plan comm runs.
		if p, err := c.BcastPlan(comm.WithAlgorithm(context.Background(), algo), bcastRoot, size); err == nil {
			lc.pred, lc.chunks = p.Predicted, p.Chunks
			if algo == collective.Auto {
				lc.chosen = string(p.Algorithm)
			}
			trees := "tree"
			if p.Trees() > 1 {
				trees = fmt.Sprintf("%d packed trees", p.Trees())
			}
			lc.note = fmt.Sprintf("%s %s, %s", p.Algorithm, trees, pieces(p.Chunks, p.Chunk))
		}
	}
	lc.note = joinNote(lc.note, lc.boundBy)
	lc.run = func(ctx context.Context) error {
		_, err := c.Bcast(comm.WithAlgorithm(ctx, algo), bcastRoot, data)
		return err
	}
	lc.check = func(ctx context.Context) (string, error) {
		got, err := c.Bcast(comm.WithAlgorithm(ctx, algo), bcastRoot, data)
		if err != nil {
			return "", err
		}
		return diffBytes(got, want, fmt.Sprintf("the message from rank %d", bcastRoot)), nil
	}
	return lc
}

// allgatherCase gathers size bytes from every rank on every rank
// (Allgather, as MPI_Allgather) with algo (forced with
// comm.WithAlgorithm), bounded by collective.AllgatherBound and predicted
// by collective.PlanAllgather on the comm's model.
func allgatherCase(c *comm.Comm, size int64, algo collective.Algorithm, seed uint64) liveCase {
	me, n := c.Rank(), c.Size()
	data := fillBytes(make([]byte, size), allgatherSeed(seed, me))
	lc := liveCase{total: size * int64(n) * int64(n-1)}
	if m := c.Model(); m != nil {
		bd := collective.AllgatherBound(collective.FabricFromModel(m), size)
		lc.fabric, lc.boundBy = bd.Seconds, bd.Resource
		sizes := make([]int64, n)
		for i := range sizes {
			sizes[i] = size
		}
		if p, err := c.AllgatherPlan(comm.WithAlgorithm(context.Background(), algo), sizes); err == nil {
			lc.pred = p.Ring
			if p.Algorithm == collective.AllgatherMesh {
				lc.pred = p.Mesh
			}
			if algo == collective.Auto {
				lc.chosen = string(p.Algorithm)
			}
			lc.note = fmt.Sprintf("predicted ring %.1f us, mesh %.1f us", p.Ring*1e6, p.Mesh*1e6)
		}
	}
	lc.note = joinNote(lc.note, lc.boundBy)
	lc.run = func(ctx context.Context) error {
		_, err := c.Allgather(comm.WithAlgorithm(ctx, algo), data)
		return err
	}
	lc.check = func(ctx context.Context) (string, error) {
		got, err := c.Allgather(comm.WithAlgorithm(ctx, algo), data)
		if err != nil {
			return "", err
		}
		if len(got) != n {
			return fmt.Sprintf("%d blocks, want %d", len(got), n), nil
		}
		want := make([]byte, size)
		for r := range got {
			if bad := diffBytes(got[r], fillBytes(want, allgatherSeed(seed, r)), fmt.Sprintf("rank %d's block", r)); bad != "" {
				return bad, nil
			}
		}
		return "", nil
	}
	return lc
}

// allgatherSeed is the seed of rank r's block.
func allgatherSeed(seed uint64, r int) uint64 {
	return seed*0x9E3779B97F4A7C15 + uint64(r) + 1
}

// allreduceCase sums a vector of size/8 float64s over the ranks with
// algo (forced with comm.WithAlgorithm), predicted by
// collective.PlanAllreduce on the comm's model and bounded by
// collective.AllreduceBound.
func allreduceCase(c *comm.Comm, size int64, algo collective.Algorithm) liveCase {
	me, n := c.Rank(), c.Size()
	elems := int(size / 8)
	data, out := make([]float64, elems), make([]float64, elems) // out is reused, as MPI's receive buffer
	for i := range data {
		data[i] = allreduceElem(me, i)
	}
	lc := liveCase{total: 2 * int64(n-1) * int64(elems) * 8} // both algorithms move 2(P-1) vectors in all
	if m := c.Model(); m != nil {
		bd := collective.AllreduceBound(collective.FabricFromModel(m), int64(elems)*8)
		lc.fabric, lc.boundBy = bd.Seconds, bd.Resource
		p := collective.PlanAllreduce(m, elems, 8, algo)
		lc.pred = allreducePrediction(p, algo)
		if algo == collective.Auto {
			lc.chosen = string(p.Algorithm)
		}
		lc.note = joinNote(fmt.Sprintf("predicted tree %.1f us, rsag %.1f us", p.Tree*1e6, p.RSAG*1e6), lc.boundBy)
	}
	lc.run = func(ctx context.Context) error {
		return comm.AllreduceInto(comm.WithAlgorithm(ctx, algo), c, data, out, comm.Sum[float64])
	}
	lc.check = func(ctx context.Context) (string, error) {
		got, err := comm.Allreduce(comm.WithAlgorithm(ctx, algo), c, data, comm.Sum[float64])
		if err != nil {
			return "", err
		}
		return diffSums(got, n), nil
	}
	return lc
}

// reducescatterCase sums a vector of size/8 float64s over the ranks and
// gives each its block of size/8/P (ReduceScatterBlock, as
// MPI_Reduce_scatter_block), bounded by collective.ReduceScatterBound.
// Its one algorithm, auto, sends every block at once, paced when that
// pays (what it chose and the prediction are comm's:
// Comm.ReduceScatterPlan).
func reducescatterCase(c *comm.Comm, size int64) liveCase {
	me, n := c.Rank(), c.Size()
	block := int(size / 8 / int64(n))
	data := make([]float64, block*n)
	for i := range data {
		data[i] = allreduceElem(me, i)
	}
	lc := liveCase{total: int64(n) * int64(n-1) * int64(block) * 8}
	if m := c.Model(); m != nil {
		bd := collective.ReduceScatterBound(collective.FabricFromModel(m), int64(block*n)*8)
		lc.fabric, lc.boundBy = bd.Seconds, bd.Resource
		counts := make([]int, n)
		for i := range counts {
			counts[i] = block
		}
		if p, err := c.ReduceScatterPlan(counts, 8); err == nil && p != nil {
			lc.pred, lc.chosen = p.Predicted, string(p.Algorithm)
		}
	}
	lc.note = joinNote("", lc.boundBy)
	lc.run = func(ctx context.Context) error {
		_, err := comm.ReduceScatterBlock(ctx, c, data, comm.Sum[float64])
		return err
	}
	lc.check = func(ctx context.Context) (string, error) {
		got, err := comm.ReduceScatterBlock(ctx, c, data, comm.Sum[float64])
		if err != nil {
			return "", err
		}
		if len(got) != block {
			return fmt.Sprintf("a block of %d elements, want %d", len(got), block), nil
		}
		for i, x := range got {
			if want := float64(n*(n+1)/2) * float64((me*block+i)%251+1); x != want {
				return fmt.Sprintf("element %d is %g, want %g", i, x, want), nil
			}
		}
		return "", nil
	}
	return lc
}

// allreducePrediction is the prediction of the algorithm that runs: the
// forced one's, or for Auto the one the plan chose (Auto keeps the tree
// unless reduce-scatter is predicted clearly faster, so this is not
// always the smaller of the two).
func allreducePrediction(p collective.AllreducePlan, algo collective.Algorithm) float64 {
	if algo == collective.Auto {
		algo = p.Algorithm
	}
	if algo == collective.AllreduceRSAG {
		return p.RSAG
	}
	return p.Tree
}

// allreduceElem is element i of rank r's vector: small integers, whose
// sums are exact in float64.
func allreduceElem(r, i int) float64 {
	return float64((r + 1) * (i%251 + 1))
}

// diffSums describes the first element of got that is not the sum over n
// ranks of allreduceElem ("" when all are).
func diffSums(got []float64, n int) string {
	for i, x := range got {
		if want := float64(n*(n+1)/2) * float64(i%251+1); x != want {
			return fmt.Sprintf("element %d is %g, want %g", i, x, want)
		}
	}
	return ""
}

// fillBytes fills b with bytes that depend on seed and on their
// position (8 at a time from splitmix64), so that a piece delivered to
// the wrong place, twice or not at all shows; it returns b.
func fillBytes(b []byte, seed uint64) []byte {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], splitmix64(seed*0xBF58476D1CE4E5B9+uint64(i)))
		copy(b[i:], w[:])
	}
	return b
}

// diffBytes describes how got differs from want, what names them ("" when
// they are equal).
func diffBytes(got, want []byte, what string) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%s has %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("%s differs at byte %d: %#02x, want %#02x", what, i, got[i], want[i])
		}
	}
	return ""
}

// pieces says how a message goes: "whole" or "16 pieces of 64 KiB".
func pieces(k int, chunk int64) string {
	if k <= 1 {
		return "whole"
	}
	return fmt.Sprintf("%d pieces of %s", k, sizeName(chunk))
}

// sizeName writes a size in bytes, KiB or MiB, whichever is exact.
func sizeName(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// joinNote adds the resource that sets the bound to a note.
func joinNote(note, boundBy string) string {
	if boundBy == "" {
		return note
	}
	if note == "" {
		return "bound: " + boundBy
	}
	return note + "; bound: " + boundBy
}

// checkLiveOp runs lc.check once, untimed, on every rank, and fails on
// every rank when any rank's result is wrong, so that a broken
// collective reports no time. Its errors read as the command's messages.
func checkLiveOp(ctx context.Context, c *comm.Comm, lf liveFlags, lc liveCase, size int64, algo collective.Algorithm) error {
	if lc.check == nil {
		return nil
	}
	if err := c.Barrier(ctx); err != nil {
		return fmt.Errorf("hetbench live: %w", err)
	}
	bad, err := lc.check(ctx)
	if err != nil {
		return fmt.Errorf("hetbench live: rank %d: %s %s %d: %w", c.Rank(), lf.collective, algo, size, err)
	}
	// Every rank learns the lowest rank whose result is wrong.
	flag := float64(c.Size())
	if bad != "" {
		flag = float64(c.Rank())
	}
	first, err := comm.Allreduce(ctx, c, []float64{flag}, comm.Min[float64])
	if err != nil {
		return fmt.Errorf("hetbench live: %w", err)
	}
	switch {
	case bad != "":
		return fmt.Errorf("hetbench live: rank %d: %s %s %d: wrong result: %s", c.Rank(), lf.collective, algo, size, bad)
	case int(first[0]) < c.Size():
		return fmt.Errorf("hetbench live: rank %d: %s %s %d: rank %d got a wrong result", c.Rank(), lf.collective, algo, size, int(first[0]))
	}
	return nil
}
