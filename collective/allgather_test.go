package collective

import (
	"math"
	"strings"
	"testing"
)

func TestPlanAllgather(t *testing.T) {
	// Three ranks at 1e6 B/s, 1 ms apart: the ring takes 2 steps of
	// 1 ms + 1000/1e6 s + the message overhead.
	m := NewUniformModel(3, 1e-3, 1e6)
	p, err := PlanAllgather(m, []int64{1000, 1000, 1000}, AllgatherRing, FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * (2e-3 + allgatherMessageOverhead); math.Abs(p.Ring-want) > 1e-12 || p.Algorithm != AllgatherRing {
		t.Fatalf("ring %+v, want %v", p, want)
	}
	// The mesh: each rank sends and receives 2000 bytes at once, 2 ms
	// at its NIC, plus one start-up and two message overheads.
	if want := 3e-3 + 2*allgatherMessageOverhead; math.Abs(p.Mesh-want) > 1e-12 {
		t.Fatalf("mesh %v, want %v", p.Mesh, want)
	}
	// Auto: alike NICs, the mesh saves a step's start-up.
	if p, _ := PlanAllgather(m, []int64{1000, 1000, 1000}, Auto, FlowOptions{}); p.Algorithm != AllgatherMesh {
		t.Fatalf("auto chose %s (%+v)", p.Algorithm, p)
	}
	// Two clusters behind a slow backbone: the mesh sends each block
	// across once per rank on the far side, the ring once.
	mb := 12.5e6
	two := switchModel(1e-4, mb, mb, mb, mb, mb, mb, mb, mb)
	two.Segments = []Segment{{Name: "bb", A: []int{0, 1, 2, 3}, B: []int{4, 5, 6, 7}, AB: mb / 2, BA: mb / 2}}
	sizes := []int64{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20}
	p, err = PlanAllgather(two, sizes, Auto, FlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Algorithm != AllgatherRing || p.Mesh < 2*p.Ring {
		t.Fatalf("behind a backbone: %+v, want the ring by 2x", p)
	}
	// The ring carries 7 blocks each way across the backbone, where 4
	// must cross.
	bd := AllgatherBound(FabricFromModel(two), 1<<20)
	if r := p.Ring / bd.Seconds; math.Abs(r-7.0/4) > 0.01 {
		t.Fatalf("ring predicted %.3f of the bound (%s), want 7/4", r, bd.Resource)
	}
	for _, tc := range []struct {
		sizes []int64
		algo  Algorithm
		want  string
	}{
		{[]int64{1, 2}, Auto, "sizes for 2 ranks on a model of 3"},
		{[]int64{1, -2, 3}, Auto, "rank 1 contributes -2 bytes"},
		{[]int64{1, 2, 3}, "tree", `unknown Allgather algorithm "tree"`},
	} {
		if _, err := PlanAllgather(m, tc.sizes, tc.algo, FlowOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlanAllgather(%v, %q): %v, want %q", tc.sizes, tc.algo, err, tc.want)
		}
	}
}
