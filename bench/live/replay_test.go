package live

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
)

// replayEagerLimit is comm's default EagerLimit (comm.DefaultEagerLimit,
// 64 KiB), with which the recorded runs ran: a message up to it rides
// inline in the head round, the others are planned.
const replayEagerLimit = 64 << 10

// replayHeadBytes is about what one rank's head to another carries
// besides the inline messages (the size row, the inline flags, the
// grants, the algorithm and the model digest), per rank of the exchange.
const replayHeadBytes = 24

// replayAlltoallv predicts a recorded Alltoallv run with the flow
// simulator, as comm executes it: first the head round, in which every
// rank sends every other its head and the messages up to the eager limit
// all at once (simulated as unpaced flows on the fabric), then, once the
// heads are in, the plan comm makes for the remaining messages
// (collective.PlanExchangeOn with the recorded model and algorithm),
// replayed on the fabric the model implies.
func replayAlltoallv(r LiveRecord) (float64, error) {
	if r.Model == nil {
		return 0, fmt.Errorf("no model recorded")
	}
	seed := r.Seed
	if seed == 0 {
		seed = 1
	}
	sz, err := PatternSizes(r.Pattern, r.Ranks, r.Bytes, seed)
	if err != nil {
		return 0, err
	}
	n := r.Ranks
	f := collective.FabricFromModel(r.Model)
	large := make([][]int64, n)
	var head []collective.Flow
	for i := range n {
		large[i] = make([]int64, n)
		for j := range n {
			if i == j {
				continue
			}
			b := int64(replayHeadBytes * n)
			if sz[i][j] <= replayEagerLimit {
				b += sz[i][j]
			} else {
				large[i][j] = sz[i][j]
			}
			head = append(head, collective.Flow{Src: i, Dst: j, Bytes: b})
		}
	}
	times, err := f.SimulateFlows(head)
	if err != nil {
		return 0, err
	}
	heads := 0.0
	for _, t := range times {
		heads = max(heads, t.End)
	}
	p, err := collective.PlanExchangeOn(r.Model, nil, &collective.Exchange{Bytes: large}, collective.Algorithm(r.Algorithm),
		collective.Options{Seed: 1}, collective.FlowOptions{})
	if err != nil {
		return 0, err
	}
	return heads + p.Predicted, nil
}

// knownMisses are the recorded cases (file without .json, algorithm) the
// flow simulator predicts worse than replayTolerance, with why. The test
// logs them and does not fail on them; it fails on any other case that
// misses.
var knownMisses = map[string]string{
	// Every flow of the exchange at once, unpaced, into the 20 and
	// 40 Mbit/s ports of h7 and h8: the iterations took either about
	// 3.1-3.3 s or 4.6-6.1 s (up to 2x the bound), from drops and
	// retransmission timeouts that a fluid model of fair sharing does
	// not have, and the median of 7 falls on either side: 4.637 s in
	// this run, 3.279 s in run2 (which the simulator predicts within
	// 9%).
	"switch8-uniform naive": "iterations of 3.1-3.3 s or 4.6-6.1 s (losses and timeouts of unpaced TCP into the slowest ports); the median of 7 is 3.28 s in one run, 4.64 s in this one",
	// Reproducible (the README's earlier run: 1.30x the bound, these
	// 1.37x and 1.47x), while random and servers sizes on the same rails
	// run within 4% of it and paced within 6%. A message ends with its
	// part on the slow rail, and those parts (about 215,000 B of each
	// 1 MiB, all at once) take 1.33x their bound as unpaced TCP on the
	// 50 Mbit/s subnet alone (paced 1.00x); halving every rate keeps the
	// ratio. The fluid model shares the NICs max-min, which reaches the
	// bound; short unpaced TCP flows converging on both ends of every
	// NIC do not (README, "Paced Alltoallv on the fabric model").
	"dualnic4-uniform naive":      "each message ends with its slow-rail part, about 215,000 B of unpaced TCP into the 50 Mbit/s NICs, which takes 1.33x its bound on that subnet alone: 1.24-1.47x the bound",
	"dualnic4-uniform-run2 naive": "as dualnic4-uniform",
}

// replayTolerance is issue 18's target: the simulator predicts the
// measured median within 10%.
const replayTolerance = 0.10

// TestSimulatorMatchesRecordedRuns replays every recorded `hetbench live
// -algo naive,paced` run under testdata/recorded (made on the netlab
// testbeds, see README "Paced Alltoallv on the fabric model") with the
// flow simulator, on the fabric the run's probed model implies, and
// compares the prediction with the measured median.
func TestSimulatorMatchesRecordedRuns(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "recorded", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded runs in testdata/recorded")
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-22s %-6s %10s %10s %10s %7s\n", "case", "algo", "measured", "predicted", "bound", "error")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var recs []LiveRecord
		if err := json.Unmarshal(b, &recs); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		var model *collective.Model
		for _, r := range recs {
			if r.Model != nil {
				model = r.Model
			}
		}
		replayed := 0
		for _, r := range recs {
			if r.System != "hetcomm" || r.Collective != "alltoallv" || !collective.IsFlowPlan(collective.Algorithm(r.Algorithm)) {
				continue
			}
			if r.Model == nil {
				r.Model = model // the file keeps one copy of the model
			}
			pred, err := replayAlltoallv(r)
			if err != nil {
				t.Errorf("%s %s: %v", name, r.Algorithm, err)
				continue
			}
			replayed++
			e := pred/r.MedianS - 1
			fmt.Fprintf(&table, "%-22s %-6s %9.4fs %9.4fs %9.4fs %+6.1f%%\n", name, r.Algorithm, r.MedianS, pred, r.FabricBound, 100*e)
			if math.Abs(e) <= replayTolerance {
				continue
			}
			key := name + " " + r.Algorithm
			if why, ok := knownMisses[key]; ok {
				t.Logf("%s: predicted %.4f s, measured %.4f s (%+.1f%%): a known miss: %s", key, pred, r.MedianS, 100*e, why)
				continue
			}
			t.Errorf("%s: predicted %.4f s, measured median %.4f s: off by %+.1f%%, more than %.0f%%", key, pred, r.MedianS, 100*e, 100*replayTolerance)
		}
		if replayed == 0 {
			t.Errorf("%s: no naive or paced Alltoallv record", name)
		}
	}
	t.Logf("flow simulator against the recorded medians:\n%s", table.String())
}
