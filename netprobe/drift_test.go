package netprobe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDrift(t *testing.T) {
	d := NewDrift()
	// A link at the model's rate never drifts.
	for i := 0; i < 10; i++ {
		d.Observe(1, 1<<20, float64(1<<20)/10e6*1.05, 10e6)
	}
	require.Empty(t, d.Proposals())
	// A link at half the model's rate: after MinSamples, the average.
	for i := 0; i < 2; i++ {
		d.Observe(2, 1<<20, float64(1<<20)/5e6, 10e6)
		require.Empty(t, d.Proposals(), "not yet: %d samples", i+1)
	}
	d.Observe(2, 1<<20, float64(1<<20)/5e6, 10e6)
	p := d.Proposals()
	require.Len(t, p, 1)
	require.InEpsilon(t, 5e6, p[2], 1e-9)
	require.Empty(t, d.Proposals(), "proposed once")
	// Noise that only sometimes exceeds the threshold does not drift.
	for i := 0; i < 10; i++ {
		rate := 10e6
		if i%2 == 0 {
			rate = 6e6
		}
		d.Observe(3, 1<<20, float64(1<<20)/rate, 10e6)
	}
	require.Empty(t, d.Proposals())
	// Too small or too short: ignored.
	for i := 0; i < 10; i++ {
		d.Observe(4, 1000, 1, 10e6)
		d.Observe(4, 1<<20, 1e-4, 10e6)
		d.Observe(4, 1<<20, 1, 0)
	}
	require.Empty(t, d.Proposals())
	// A faster link than modelled drifts too.
	for i := 0; i < 3; i++ {
		d.Observe(5, 4<<20, float64(4<<20)/40e6, 10e6)
	}
	require.InEpsilon(t, 40e6, d.Proposals()[5], 1e-9)
}

// A link that ran at the model's rate and then slows down is proposed at
// its new rate, not at a blend with the old one.
func TestDriftProposesTheNewRate(t *testing.T) {
	d := NewDrift()
	const model = 6e6
	for i := 0; i < 5; i++ {
		d.Observe(1, 6e6, 1.0, model) // 6 MB/s: agrees
	}
	d.Observe(1, 2.5e6, 1.0, model)
	d.Observe(1, 2.5e6, 1.0, model)
	require.Empty(t, d.Proposals(), "two drifted observations are not enough")
	d.Observe(1, 2.5e6, 1.0, model)
	require.Equal(t, map[int]float64{1: 2.5e6}, d.Proposals())
	// A run broken by an agreeing observation starts over.
	d.Observe(2, 1e6, 1.0, model)
	d.Observe(2, 1e6, 1.0, model)
	d.Observe(2, 6e6, 1.0, model)
	d.Observe(2, 3e6, 1.0, model)
	require.Empty(t, d.Proposals())
}

// One observation that straddled the change (part old rate, part new) does
// not pull the proposal away from the new rate.
func TestDriftIgnoresATransitionSample(t *testing.T) {
	d := NewDrift()
	const model = 6e6
	d.Observe(1, 4e6, 1.0, model) // straddled: 4 MB/s, already drifted
	d.Observe(1, 2.5e6, 1.0, model)
	d.Observe(1, 2.6e6, 1.0, model)
	require.Equal(t, map[int]float64{1: 2.6e6}, d.Proposals())
	// A long run proposes from its most recent MinSamples observations.
	for _, r := range []float64{1e6, 1e6, 3e6, 3e6, 3.1e6} {
		d.Observe(2, int64(r), 1.0, model)
	}
	require.Equal(t, map[int]float64{2: 3e6}, d.Proposals())
}
