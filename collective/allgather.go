package collective

import "fmt"

// The ways to Allgather, and the choice between them.
const (
	// AllgatherRing passes the blocks around the ring of ranks in rank
	// order: P-1 steps, each rank sending one block to the next and
	// receiving one from the previous. Each block crosses every link of
	// the ring once, so a backbone between ranks placed in order carries
	// each block once; but every step waits for the ring's slowest link.
	AllgatherRing Algorithm = "ring"
	// AllgatherMesh sends every rank's block to every other rank at once:
	// one step, every NIC busy from the start, and no rank waits for
	// another's link; but a block crosses a backbone once per rank on the
	// far side.
	AllgatherMesh Algorithm = "mesh"
)

// AllgatherPlan is how to Allgather blocks of known sizes.
type AllgatherPlan struct {
	Algorithm Algorithm
	// Ring and Mesh are the two algorithms' predicted times in seconds.
	Ring, Mesh float64
	// Flows is the mesh as a flow-level plan (PlanFlowsAuto): Naive, or
	// Paced with each message's pacing rate in Transfer.Rate.
	Flows *Plan
}

// allgatherMessageOverhead is what each message of an Allgather costs
// its sender in software, in seconds (see bcastChunkOverhead): the mesh
// sends P-1 of them at once, the ring one per step.
const allgatherMessageOverhead = bcastChunkOverhead

// PlanAllgather chooses how to Allgather on the ranks of m when rank r
// contributes sizes[r] bytes, by the predictions of both algorithms on
// the fabric m implies. The ring takes P-1 steps, each as long as its
// slowest link's start-up plus a block over the link's rate (the pair's
// rate, or its share of a segment that several ring links cross), plus
// the message overhead. The mesh is an exchange of every block to every
// other rank at once, unpaced or paced as PlanFlowsAuto chooses (fo as
// there); it takes the flow simulator's prediction plus P-1 message
// overheads. algo forces one ("" or Auto: the faster).
func PlanAllgather(m *Model, sizes []int64, algo Algorithm, fo FlowOptions) (AllgatherPlan, error) {
	n := m.Size()
	p := AllgatherPlan{Algorithm: AllgatherRing}
	if len(sizes) != n {
		return p, fmt.Errorf("collective: Allgather sizes for %d ranks on a model of %d", len(sizes), n)
	}
	for r, s := range sizes {
		if s < 0 {
			return p, fmt.Errorf("collective: Allgather: rank %d contributes %d bytes", r, s)
		}
	}
	switch algo {
	case "", Auto, AllgatherRing, AllgatherMesh:
	default:
		return p, fmt.Errorf("collective: unknown Allgather algorithm %q (want %s, %s or auto)", algo, AllgatherRing, AllgatherMesh)
	}
	if n < 2 {
		return p, nil
	}
	f := FabricFromModel(m)
	p.Ring = ringAllgatherTime(m, f, sizes)
	flows, err := PlanFlowsAuto(f, MeshExchange(n, func(i, _ int) int64 { return sizes[i] }), fo)
	if err != nil {
		return p, err
	}
	p.Flows = flows
	p.Mesh = flows.Predicted + float64(n-1)*allgatherMessageOverhead
	if algo == AllgatherMesh || (algo == "" || algo == Auto) && p.Mesh < p.Ring {
		p.Algorithm = AllgatherMesh
	}
	return p, nil
}

// ringAllgatherTime predicts the ring: in step s rank r sends block
// (r-s) mod P to r+1; the step ends when its slowest link has.
func ringAllgatherTime(m *Model, f *Fabric, sizes []int64) float64 {
	n := f.Size()
	sides := f.segmentSides()
	// How many ring links cross each segment direction: they share it.
	crossing := make([]int, 2*len(f.Segments))
	dir := func(s, i, j int) int {
		switch {
		case sides[s][i] == 1 && sides[s][j] == 2:
			return 2 * s
		case sides[s][i] == 2 && sides[s][j] == 1:
			return 2*s + 1
		}
		return -1
	}
	for r := 0; r < n; r++ {
		for s := range f.Segments {
			if d := dir(s, r, (r+1)%n); d >= 0 {
				crossing[d]++
			}
		}
	}
	rate := make([]float64, n) // of the link r -> r+1
	for r := 0; r < n; r++ {
		next := (r + 1) % n
		rate[r] = min(m.Rate(r, next), f.Out(r), f.In(next))
		for s, seg := range f.Segments {
			switch d := dir(s, r, next); {
			case d == 2*s:
				rate[r] = min(rate[r], seg.AB/float64(crossing[d]))
			case d == 2*s+1:
				rate[r] = min(rate[r], seg.BA/float64(crossing[d]))
			}
		}
	}
	total := 0.0
	for step := 0; step < n-1; step++ {
		worst := 0.0
		for r := 0; r < n; r++ {
			b := float64(sizes[((r-step)%n+n)%n])
			worst = max(worst, f.StartUp(r, (r+1)%n)+b/rate[r])
		}
		total += worst + allgatherMessageOverhead
	}
	return total
}
