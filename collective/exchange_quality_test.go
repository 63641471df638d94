package collective

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The quality limits on the papers' scenarios (issue 15): the open shop
// and Auto against t_lb.
const (
	qualityOpenShop = 1.12
	qualityAuto     = 1.08
)

// exPaperCase draws an instance of the total-exchange paper's
// experiments (section 5): n ranks, every pair's link GUSTO-like (latency
// 4.5 to 89.5 ms, bandwidth 246 to 4,976 kbit/s, the ranges of its
// Tables 1 and 2), symmetric or not, and messages of 1 KiB, 1 MiB, a
// random mix of the two, or 20% servers that send 1 MiB to every client
// while every other message is 1 KiB (its Figure 12).
func exPaperCase(rng *rand.Rand, n int) exCase {
	sizes := []string{"kb", "mb", "mixed", "servers"}[rng.IntN(4)]
	sym := rng.IntN(2) == 0
	servers := n / 5
	m := &Model{Latency: Matrix(n, 0), Bandwidth: Matrix(n, 1)}
	x := &Exchange{Bytes: make([][]int64, n)}
	for i := range x.Bytes {
		x.Bytes[i] = make([]int64, n)
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			if sym && j < i {
				m.Latency[i][j], m.Bandwidth[i][j] = m.Latency[j][i], m.Bandwidth[j][i]
			} else {
				m.Latency[i][j] = 0.0045 + rng.Float64()*0.085
				m.Bandwidth[i][j] = (246 + rng.Float64()*(4976-246)) * 125
			}
			b := int64(1 << 10)
			switch sizes {
			case "mb":
				b = 1 << 20
			case "mixed":
				b = []int64{1 << 10, 1 << 20}[rng.IntN(2)]
			case "servers":
				if i < servers && j >= servers {
					b = 1 << 20
				}
			}
			x.Bytes[i][j] = b
		}
	}
	return exCase{name: fmt.Sprintf("n=%d/%s/symmetric=%v", n, sizes, sym), m: m, x: x}
}

// exchangeQuality plans trials instances of exPaperCase (13 to 50 ranks,
// as in the paper) with the open shop and Auto, checks every plan, and
// returns the worst ratios to t_lb and the instances they come from.
func exchangeQuality(t testing.TB, trials int) (os, auto float64, osName, autoName string) {
	rng := rand.New(rand.NewPCG(2026, 15))
	for trial := 0; trial < trials; trial++ {
		c := exPaperCase(rng, 13+rng.IntN(38))
		p, err := PlanExchange(c.m, c.x, OpenShop, Options{})
		require.NoError(t, err, c.name)
		require.NoError(t, ValidateExchange(c.x, p), c.name)
		if r := p.Predicted / p.LowerBound; r > os {
			os, osName = r, fmt.Sprintf("#%d %s", trial, c.name)
		}
		q, err := PlanExchange(c.m, c.x, Auto, Options{})
		require.NoError(t, err, c.name)
		require.NoError(t, ValidateExchange(c.x, q), c.name)
		require.LessOrEqual(t, q.Predicted, p.Predicted, c.name)
		if r := q.Predicted / q.LowerBound; r > auto {
			auto, autoName = r, fmt.Sprintf("#%d %s (%s)", trial, c.name, q.Algorithm)
		}
	}
	return os, auto, osName, autoName
}

// TestExchangeQuality holds the open shop within 1.12 of t_lb and Auto
// within 1.08 on 200 random instances of the paper's scenarios (40 under
// -short or the race detector); BenchmarkExchangeQuality runs 1,000.
func TestExchangeQuality(t *testing.T) {
	trials := 200
	if testing.Short() || mcRace {
		trials = 40
	}
	os, auto, osName, autoName := exchangeQuality(t, trials)
	t.Logf("%d instances: open shop worst %.4f (%s), auto worst %.4f (%s)", trials, os, osName, auto, autoName)
	require.LessOrEqual(t, os, qualityOpenShop, osName)
	require.LessOrEqual(t, auto, qualityAuto, autoName)
}

// BenchmarkExchangeQuality runs the quality check on 1,000 instances and
// reports the worst ratios to t_lb (go test -run X -bench ExchangeQuality
// -benchtime 1x).
func BenchmarkExchangeQuality(b *testing.B) {
	for b.Loop() {
		os, auto, osName, autoName := exchangeQuality(b, 1000)
		b.ReportMetric(os, "openshop-worst/t_lb")
		b.ReportMetric(auto, "auto-worst/t_lb")
		if os > qualityOpenShop || auto > qualityAuto {
			b.Fatalf("open shop worst %.4f (%s), auto worst %.4f (%s)", os, osName, auto, autoName)
		}
	}
}
