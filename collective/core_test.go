package collective

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelCosts(t *testing.T) {
	m := &Model{
		Latency:      [][]float64{{0, 0.01}, {0.02, 0}},
		Bandwidth:    [][]float64{{0, 1e6}, {2e6, 0}},
		SendOverhead: []Overhead{{Const: 1e-4, PerByte: 1e-9}, {Const: 2e-4, PerByte: 0}},
		RecvOverhead: []Overhead{{Const: 3e-4, PerByte: 0}, {Const: 4e-4, PerByte: 2e-9}},
	}
	require.NoError(t, m.Validate())
	require.Equal(t, 2, m.Size())
	require.InDelta(t, 0.01+1000/1e6, m.Cost(0, 1, 1000), 1e-15)
	require.InDelta(t, 0.02+1000/2e6, m.Cost(1, 0, 1000), 1e-15)
	require.Zero(t, m.Cost(1, 1, 1<<20), "the diagonal is a local copy")
	require.InDelta(t, 1e-4+1e-6, m.SendCost(0, 1000), 1e-15)
	require.InDelta(t, 4e-4+2e-6, m.RecvCost(1, 1000), 1e-15)
	require.InDelta(t, 0.01+1000/1e6, m.Transmit(0, 1, 1000), 1e-15)

	x := &Model{PerByte: [][]float64{{0, 2}, {3, 0}}}
	require.NoError(t, x.Validate())
	require.Equal(t, 20.0, x.Transmit(0, 1, 10))
	require.Zero(t, x.SendCost(0, 10))
	require.Zero(t, x.RecvCost(1, 10))

	u := NewUniformModel(3, 1e-3, 1e8)
	require.NoError(t, u.Validate())
	require.Zero(t, u.Latency[2][2])
	require.InDelta(t, 1e-3+1e-2, u.Cost(0, 2, 1e6), 1e-15)
}

func TestModelValidateRejects(t *testing.T) {
	cases := map[string]*Model{
		"nil bandwidth and per_byte": {Latency: [][]float64{{0}}},
		"ragged":                     {Bandwidth: [][]float64{{0, 1}, {1}}},
		"zero bandwidth":             {Bandwidth: [][]float64{{0, 0}, {1, 0}}},
		"negative latency":           {Latency: [][]float64{{0, -1}, {0, 0}}, Bandwidth: [][]float64{{0, 1}, {1, 0}}},
		"short overheads":            {Bandwidth: [][]float64{{0, 1}, {1, 0}}, SendOverhead: []Overhead{{}}},
		"rail without bandwidth":     {Bandwidth: [][]float64{{0, 1}, {1, 0}}, Rails: []Rail{{Name: "eth1"}}},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) { require.Error(t, m.Validate()) })
	}
	var nilModel *Model
	require.Error(t, nilModel.Validate())
}

// KindOfProblemName is the kind of a good problem named after its kind
// (or, for "probed model", an alltoall).
func KindOfProblemName(name string) Kind {
	if name == "probed model" {
		return KindAlltoall
	}
	return Kind(name)
}

func TestParseProblem(t *testing.T) {
	good := map[string]string{
		"alltoall":     `{"kind":"alltoall","ranks":2,"latency":[[0,0.01],[0.01,0]],"bandwidth":[[0,1e6],[1e6,0]],"bytes":[[0,5],[7,0]]}`,
		"probed model": `{"kind":"alltoall","ranks":2,"latency":[[0,0.01],[0.01,0]],"bandwidth":[[0,1e6],[1e6,0]],"rails":[{"name":"rail0","latency":[[0,0.01],[0.01,0]],"bandwidth":[[0,1e6],[1e6,0]]}],"bytes":[[0,5],[7,0]]}`,
		"multicast":    `{"kind":"multicast","ranks":3,"send_overhead":[{"const":1,"per_byte":0},{"const":1,"per_byte":0},{"const":2,"per_byte":0}],"recv_overhead":[{"const":3,"per_byte":0},{"const":3,"per_byte":0},{"const":6,"per_byte":0}],"per_byte":[[0,0,0],[0,0,0],[0,0,0]],"messages":[{"source":0,"bytes":1,"dests":[1,2]},{"source":2,"bytes":0,"dests":[]}]}`,
		"redistribute": `{"kind":"redistribute","senders":2,"receivers":3,"bytes":[[1,2,3],[4,5,6]],"rate":1e6,"k":2,"setup":0.01}`,
	}
	for name, s := range good {
		t.Run(name, func(t *testing.T) {
			p, err := ParseProblem([]byte(s))
			require.NoError(t, err)
			require.Equal(t, KindOfProblemName(name), p.Kind)
		})
	}
	bad := map[string]string{
		"not json":            `{`,
		"no kind":             `{"ranks":2}`,
		"unknown kind":        `{"kind":"scatter"}`,
		"trailing":            `{"kind":"redistribute","senders":1,"receivers":1,"bytes":[[1]],"rate":1,"k":1,"setup":0} {}`,
		"wrong shape":         `{"kind":"alltoall","ranks":2,"latency":[[0,0],[0,0]],"bandwidth":[[0,1],[1,0]],"bytes":[[0,5]]}`,
		"negative size":       `{"kind":"alltoall","ranks":2,"latency":[[0,0],[0,0]],"bandwidth":[[0,1],[1,0]],"bytes":[[0,-5],[1,0]]}`,
		"zero bandwidth":      `{"kind":"alltoall","ranks":2,"latency":[[0,0],[0,0]],"bandwidth":[[0,0],[1,0]],"bytes":[[0,5],[1,0]]}`,
		"no ranks":            `{"kind":"alltoall","latency":[],"bandwidth":[],"bytes":[]}`,
		"too many ranks":      `{"kind":"alltoall","ranks":100000}`,
		"dest equals source":  `{"kind":"multicast","ranks":2,"per_byte":[[0,0],[0,0]],"messages":[{"source":1,"bytes":1,"dests":[1]}]}`,
		"dest out of range":   `{"kind":"multicast","ranks":2,"per_byte":[[0,0],[0,0]],"messages":[{"source":0,"bytes":1,"dests":[2]}]}`,
		"dest twice":          `{"kind":"multicast","ranks":3,"per_byte":[[0,0,0],[0,0,0],[0,0,0]],"messages":[{"source":0,"bytes":1,"dests":[1,1]}]}`,
		"multicast no model":  `{"kind":"multicast","ranks":2,"messages":[]}`,
		"k zero":              `{"kind":"redistribute","senders":1,"receivers":1,"bytes":[[1]],"rate":1,"k":0,"setup":0}`,
		"rate zero":           `{"kind":"redistribute","senders":1,"receivers":1,"bytes":[[1]],"rate":0,"k":1,"setup":0}`,
		"redistribute shape":  `{"kind":"redistribute","senders":2,"receivers":1,"bytes":[[1]],"rate":1,"k":1,"setup":0}`,
		"negative setup":      `{"kind":"redistribute","senders":1,"receivers":1,"bytes":[[1]],"rate":1,"k":1,"setup":-1}`,
		"string for a number": `{"kind":"alltoall","ranks":"two"}`,
		"misspelt field":      `{"kind":"redistribute","senders":1,"receivers":1,"bytes":[[1]],"rate":1,"k":1,"setup":0,"setpu":5}`,
	}
	for name, s := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := ParseProblem([]byte(s))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrProblem), "error %v should match ErrProblem", err)
		})
	}
	_, err := DecodeProblem(strings.NewReader(bad["k zero"]))
	require.ErrorContains(t, err, "k = 0")
	_, err = DecodeProblem(strings.NewReader(bad["misspelt field"]))
	require.ErrorContains(t, err, `unknown field "setpu"`)
}

func TestPlanJSONRoundTrip(t *testing.T) {
	plans := []*Plan{
		{Kind: KindAlltoall, Algorithm: OpenShop, Ranks: 2, Predicted: 1.5, LowerBound: 1.25,
			Transfers: []Transfer{{Src: 0, Dst: 1, Bytes: 10, Start: 0, End: 1, SendSeq: 0, RecvSeq: 0}, {Src: 1, Dst: 0, Bytes: 3, Start: 0.5, End: 1.5}}},
		{Kind: KindMulticast, Algorithm: ECFP, Ranks: 3, Predicted: 4,
			Tasks: []Task{{Message: 0, Src: 0, Dst: 1, Bytes: 1, SendStart: 0, SendEnd: 1, Arrival: 1, RecvEnd: 4, SendSeq: 0, RecvSeq: 0}}},
		{Kind: KindRedistribute, Algorithm: OGGP, Ranks: 4, Predicted: 3,
			Steps: []Step{{Duration: 3, Transfers: []StepTransfer{{Src: 0, Dst: 1, Bytes: 2}}}}},
	}
	for _, p := range plans {
		t.Run(string(p.Kind), func(t *testing.T) {
			b, err := json.Marshal(p)
			require.NoError(t, err)
			require.Contains(t, string(b), `"predicted_completion"`)
			var q Plan
			require.NoError(t, json.Unmarshal(b, &q))
			require.Equal(t, *p, q)
			b2, err := json.Marshal(&q)
			require.NoError(t, err)
			require.JSONEq(t, string(b), string(b2))
		})
	}
	var q Plan
	require.Error(t, json.Unmarshal([]byte(`{"kind":"bogus"}`), &q))
}

func TestPlanOrders(t *testing.T) {
	p := &Plan{Kind: KindAlltoall, Transfers: []Transfer{
		{Src: 0, Dst: 1, SendSeq: 1, RecvSeq: 0},
		{Src: 0, Dst: 2, SendSeq: 0, RecvSeq: 1},
		{Src: 2, Dst: 1, SendSeq: 0, RecvSeq: 1},
		{Src: 1, Dst: 2, SendSeq: 0, RecvSeq: 0},
	}}
	require.Equal(t, []int{1, 0}, p.SendOrder(0))
	require.Equal(t, []int{0, 2}, p.RecvOrder(1))
	require.Equal(t, []int{3, 1}, p.RecvOrder(2))
	m := &Plan{Kind: KindMulticast, Tasks: []Task{
		{Src: 0, Dst: 1, SendSeq: 1, RecvSeq: 0},
		{Src: 1, Dst: 0, SendSeq: 1, RecvSeq: 0},
	}}
	require.Equal(t, []int{1, 0}, m.NodeTasks(0))
	require.Equal(t, []int{0, 1}, m.NodeTasks(1))
}

func TestAlgorithmKinds(t *testing.T) {
	for _, k := range []Kind{KindAlltoall, KindMulticast, KindRedistribute} {
		for _, a := range Algorithms(k) {
			require.Equal(t, k, KindOf(a))
			require.NoError(t, checkAlgo(k, a))
		}
		require.NoError(t, checkAlgo(k, Auto))
	}
	require.Equal(t, Kind(""), KindOf("nope"))
	require.ErrorContains(t, checkAlgo(KindAlltoall, "nope"), "unknown algorithm")
	require.ErrorContains(t, checkAlgo(KindAlltoall, OGGP), "plans redistribute")
}

func FuzzParseProblem(f *testing.F) {
	f.Add([]byte(`{"kind":"alltoall","ranks":2,"latency":[[0,0.01],[0.01,0]],"bandwidth":[[0,1e6],[1e6,0]],"bytes":[[0,5],[7,0]]}`))
	f.Add([]byte(`{"kind":"multicast","ranks":2,"per_byte":[[0,1],[1,0]],"messages":[{"source":0,"bytes":1,"dests":[1]}]}`))
	f.Add([]byte(`{"kind":"redistribute","senders":2,"receivers":1,"bytes":[[1],[2]],"rate":1,"k":1,"setup":0}`))
	f.Add([]byte(`{"kind":"alltoall","ranks":1e9}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProblem(data)
		if err != nil {
			if !errors.Is(err, ErrProblem) {
				t.Fatalf("rejection %v does not match ErrProblem", err)
			}
			return
		}
		// A valid problem re-encodes to a problem that is still valid.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseProblem(b); err != nil {
			t.Fatalf("re-encoded valid problem rejected: %v\n%s", err, b)
		}
	})
}
