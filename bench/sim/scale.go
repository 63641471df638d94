package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/collective"
)

// The scale study of issue 15: how planning time and plan quality grow
// from 16 to 1,024 ranks on a fabric like the racks32 testbed, scaled
// up: racks of eight ranks whose NICs run at one of five rates (20 to
// 400 Mbit/s), each rack's uplink into one core oversubscribed 2:1 (half
// the sum of its NICs, each way). Every rank sends every other one a
// random size of 1 byte to 512 KiB.
//
// For each planner it reports the median planning time (through
// collective.PlanExchangeOn, as comm plans an Alltoallv) and the
// predicted completion over the fabric lower bound, both on the fabric
// model (plans simulated with the flow simulator; Auto estimates naive
// and paced above collective.FlowSimLimit, and so does this study above
// scaleFlowSimMax). Planners run only up to the size where they stay
// affordable (scaleLimits); Auto leaves out the same ones.
//
// The probe's time is modelled, not measured: the pairwise tournament
// (HETCOMM_PROBE=pairwise) runs P-1 rounds of pair sweeps, each about
// pairwiseRound long (8.5 s for 8 hosts on switch8: 7 rounds of 1.2 s);
// the fabric probe (the default) is run on the model by ProbeEstimator
// (netprobe.SimulateProbe in hetbench), whose costs per round of pings,
// step of flows and segment tested come from racks32, up to
// scaleProbeSimMax ranks; its pings are a sample above 16 ranks, the other
// latencies inferred (netprobe's pings.go).

func init() {
	Register(Experiment{
		Name:        "scale",
		Description: "16 to 1,024 ranks on racks of mixed NICs: planning time, predicted completion / fabric bound per planner, probe time (issue 15)",
		Run:         runScale,
	})
}

// scaleLimits: the largest rank count each planner runs at in the study.
var scaleLimits = map[collective.Algorithm]int{
	collective.MaxMatch:    64,
	collective.MinMatch:    64,
	collective.Greedy:      256,
	collective.Caterpillar: 256,
}

// scaleFlowSimMax is the largest rank count at which naive and paced are
// simulated flow by flow; above it they are estimated, as Auto does.
const scaleFlowSimMax = 64

// ProbeEstimator, when set, estimates the fabric probe's time and steps on
// a model whose subnets are cuts. hetbench sets it to
// netprobe.SimulateProbe; this package stays pure (TestPureImports). Nil
// leaves the study's probe columns empty.
var ProbeEstimator func(m *collective.Model, cuts [][]int) (seconds float64, steps int, err error)

// scaleProbeSimMax is the largest rank count whose fabric probe is
// simulated (about 8 s an instance at 1,024 ranks, most of it the flow
// simulation of its steps).
const scaleProbeSimMax = 1024

// pairwiseRound is one round of the pairwise probe (switch8, 8 hosts).
const pairwiseRound = 1.2

var scalePlanners = []collective.Algorithm{collective.Auto, collective.OpenShop, collective.Greedy, collective.Caterpillar,
	collective.MaxMatch, collective.MinMatch, collective.Naive, collective.Paced}

func runScale(cfg SimConfig) (*SimResult, error) {
	sizes := []int{16, 32, 64, 128, 256, 512, 1024}
	trials := 3
	if cfg.Quick {
		sizes, trials = []int{16, 32}, 1
	}
	if cfg.Trials > 0 {
		trials = cfg.Trials
	}
	cols := []string{"ranks"}
	for _, a := range scalePlanners {
		cols = append(cols, string(a)+"_ms", string(a)+"_ratio")
	}
	cols = append(cols, "auto_chose", "bound_s", "probe_pairwise_s", "probe_fabric_s", "probe_fabric_steps")
	t := &bench.Table{Name: "scale", Columns: cols}
	timePlot := &bench.LinePlot{Title: "Planning time (median)", XLabel: "ranks", YLabel: "milliseconds", LogY: true}
	ratioPlot := &bench.LinePlot{Title: "Predicted completion / fabric lower bound (median)", XLabel: "ranks", YLabel: "ratio"}
	for _, a := range scalePlanners {
		timePlot.Series = append(timePlot.Series, bench.Series{Name: string(a)})
		ratioPlot.Series = append(ratioPlot.Series, bench.Series{Name: string(a)})
	}
	prog := NewProgress(cfg.Progress, "scale", len(sizes)*trials)
	for _, n := range sizes {
		ms := make([][]float64, len(scalePlanners))
		ratio := make([][]float64, len(scalePlanners))
		var bounds, probeS, probeSteps []float64
		chose := map[collective.Algorithm]int{}
		for trial := range trials {
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(n)<<20|uint64(trial)))
			m, x := scaleInstance(rng, n)
			f := collective.FabricFromModel(m)
			lb, err := f.Bound(x)
			if err != nil {
				return nil, err
			}
			bounds = append(bounds, lb.Seconds)
			if n <= scaleProbeSimMax {
				if ProbeEstimator != nil {
					sec, steps, err := ProbeEstimator(m, scaleRacks(n))
					if err != nil {
						return nil, fmt.Errorf("probe at %d ranks: %w", n, err)
					}
					probeS, probeSteps = append(probeS, sec), append(probeSteps, float64(steps))
				}
			}
			for k, a := range scalePlanners {
				if lim, ok := scaleLimits[a]; ok && n > lim {
					continue
				}
				start := time.Now()
				p, err := scalePlan(m, f, x, a, n)
				if err != nil {
					return nil, fmt.Errorf("%s at %d ranks: %w", a, n, err)
				}
				ms[k] = append(ms[k], float64(time.Since(start).Microseconds())/1000)
				ratio[k] = append(ratio[k], p.Predicted/lb.Seconds)
				if a == collective.Auto {
					chose[p.Algorithm]++
				}
			}
			prog.Step(1)
		}
		row := []any{n}
		for k := range scalePlanners {
			if len(ms[k]) == 0 {
				row = append(row, "", "")
				continue
			}
			tm, r := bench.Summarize(ms[k]).Median, bench.Summarize(ratio[k]).Median
			row = append(row, tm, r)
			timePlot.Series[k].X = append(timePlot.Series[k].X, float64(n))
			timePlot.Series[k].Y = append(timePlot.Series[k].Y, tm)
			ratioPlot.Series[k].X = append(ratioPlot.Series[k].X, float64(n))
			ratioPlot.Series[k].Y = append(ratioPlot.Series[k].Y, r)
		}
		row = append(row, mostChosen(chose), bench.Summarize(bounds).Median, probeSeconds(n))
		if len(probeS) > 0 {
			row = append(row, bench.Summarize(probeS).Median, bench.Summarize(probeSteps).Median)
		} else {
			row = append(row, "", "")
		}
		t.Add(row...)
	}
	return &SimResult{
		Tables: []*bench.Table{t},
		Plots:  map[string]*bench.LinePlot{"scale_planning_time.png": timePlot, "scale_ratio.png": ratioPlot},
		Summary: fmt.Sprintf("Medians of %d random instances per size; ratios are predicted completion over the fabric lower bound; probe times are modelled.",
			trials),
	}, nil
}

// scalePlan plans x with a, as comm would, timing included. Naive and
// paced are simulated up to scaleFlowSimMax ranks and estimated above,
// through Auto's own rule (PlanExchangeOn estimates them only for Auto).
func scalePlan(m *collective.Model, f *collective.Fabric, x *collective.Exchange, a collective.Algorithm, n int) (*collective.Plan, error) {
	if collective.IsFlowPlan(a) && n > scaleFlowSimMax {
		return collective.EstimateFlows(f, x, a, collective.FlowOptions{})
	}
	return collective.PlanExchangeOn(m, f, x, a, collective.Options{Seed: 1}, collective.FlowOptions{})
}

// scaleInstance draws the study's model and exchange for n ranks.
func scaleInstance(rng *rand.Rand, n int) (*collective.Model, *collective.Exchange) {
	classes := []float64{20e6, 50e6, 100e6, 200e6, 400e6} // bit/s
	nic := make([]float64, n)
	for r := range nic {
		nic[r] = classes[rng.IntN(len(classes))] / 8
	}
	const rack = 8
	m := &collective.Model{Latency: collective.Matrix(n, 0), Bandwidth: collective.Matrix(n, 0)}
	for i := range n {
		for j := range n {
			if i == j {
				continue
			}
			m.Bandwidth[i][j] = min(nic[i], nic[j])
			m.Latency[i][j] = 100e-6
			if i/rack != j/rack {
				m.Latency[i][j] = 200e-6 // two more switches
			}
		}
	}
	for lo := 0; lo < n && n > rack; lo += rack {
		var in, out []int
		capacity := 0.0
		for r := range n {
			if r >= lo && r < lo+rack {
				in = append(in, r)
				capacity += nic[r]
			} else {
				out = append(out, r)
			}
		}
		m.Segments = append(m.Segments, collective.Segment{Name: fmt.Sprintf("rack%d", lo/rack), A: in, B: out, AB: capacity / 2, BA: capacity / 2})
	}
	x := &collective.Exchange{Bytes: make([][]int64, n)}
	for i := range n {
		x.Bytes[i] = make([]int64, n)
		for j := range n {
			if i != j {
				x.Bytes[i][j] = 1 + rng.Int64N(512<<10)
			}
		}
	}
	return m, x
}

// scaleRacks lists the racks of n ranks, the subnets comm gives the
// segment probe.
func scaleRacks(n int) [][]int {
	var racks [][]int
	for lo := 0; lo < n; lo += 8 {
		var r []int
		for i := lo; i < min(lo+8, n); i++ {
			r = append(r, i)
		}
		racks = append(racks, r)
	}
	return racks
}

// probeSeconds models the pairwise probe's time at n ranks.
func probeSeconds(n int) float64 {
	return float64(n-1) * pairwiseRound
}

func mostChosen(c map[collective.Algorithm]int) string {
	best, bn := "", 0
	for a, k := range c {
		if k > bn || k == bn && string(a) < best {
			best, bn = string(a), k
		}
	}
	return best
}
