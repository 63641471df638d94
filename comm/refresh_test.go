package comm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
)

// startShaped starts the model's ranks on netw with the model (probing
// off).
func startShaped(t *testing.T, netw *transport.MemNetwork, model *collective.Model, tweak func(*Config)) []*Comm {
	t.Helper()
	return startWorldOn(t, model.Size(), "mem", netw, func(c *Config) {
		c.Model = model
		if tweak != nil {
			tweak(c)
		}
	})
}

// memAt returns a mem network whose links run at rate bytes/s.
func memAt(t *testing.T, rate float64) *transport.MemNetwork {
	t.Helper()
	netw := transport.NewMemNetwork(3)
	require.NoError(t, netw.SetDefaultShape(transport.ShapeConfig{Rate: rate}))
	return netw
}

// refreshing is a Config tweak that runs the refresher every period,
// spending at most share of a rank's time; more tweaks follow.
func refreshing(period time.Duration, share float64, more ...func(*Config)) func(*Config) {
	return func(c *Config) {
		c.Refresh, c.RefreshShare = period, share
		for _, f := range more {
			f(c)
		}
	}
}

// smallAlltoallv runs one world Alltoallv of a few bytes per pair: it
// spreads the drift proposals.
func smallAlltoallv(t *testing.T, comms []*Comm) {
	t.Helper()
	commtest.OnAll(t, comms, func(c *Comm) error {
		send := make([][]byte, c.Size())
		for j := range send {
			send[j] = []byte{byte(c.Rank()), byte(j)}
		}
		out, err := c.Alltoallv(context.Background(), send)
		if err != nil {
			return err
		}
		for i, b := range out {
			if len(b) != 2 || b[0] != byte(i) || b[1] != byte(c.Rank()) {
				t.Errorf("rank %d got %v from %d", c.Rank(), b, i)
			}
		}
		return nil
	})
}

// The model says every link runs at 20 MB/s; the link 1->0 really runs at
// 5 MB/s. The application only idles (and now and then runs a tiny
// Alltoallv, which moves no bulk data and so observes no rate): the
// refresher alone finds the slow link, and every rank's model learns it.
func TestRefreshLearnsASlowLink(t *testing.T) {
	const n = 3
	netw := memAt(t, 20e6)
	require.NoError(t, netw.SetShape(1, 0, transport.ShapeConfig{Rate: 5e6}))
	comms := startShaped(t, netw, collective.NewUniformModel(n, 1e-4, 20e6), refreshing(20*time.Millisecond, 0.5))
	deadline := time.Now().Add(30 * time.Second)
	for comms[0].Model().Bandwidth[1][0] > 10e6 {
		if !time.Now().Before(deadline) {
			for _, c := range comms {
				rf := c.w.refresh
				t.Logf("rank %d: measured %d, discarded %d, observed %d", c.Rank(), rf.measured.Load(), rf.discarded.Load(), rf.observed.Load())
			}
			t.Fatalf("the refresher never updated the slow link: model %v", comms[0].Model().Bandwidth)
		}
		time.Sleep(300 * time.Millisecond)
		smallAlltoallv(t, comms)
	}
	requireSlowLinkLearned(t, comms)
	require.Positive(t, comms[1].w.refresh.measured.Load())
	require.Positive(t, comms[0].w.refresh.observed.Load())
}

// While the application communicates without pause, the refresher measures
// nothing (its ticks find traffic), so it neither slows the application
// nor feeds the drift detector rates of shared links.
//
// "Without pause" is relative to the refresher's tick (10 ms here): a
// busy machine now and then deschedules the application's loop for
// longer than that, and a tick that then finds no traffic since the
// previous one rightly starts a measurement (which the traffic, when it
// resumes, usually makes it discard). So the busy second is compared with
// a reference measured in the same run: the same world idle for a
// second, when the refreshers measure as often as their share allows
// (dozens of times). During the traffic the refreshers must report and
// observe at most a tenth of what they do idle, and start (measured or
// discarded) at most half as many measurements: none at all on a machine
// that keeps up; with eight CPU hogs and a build loop, up to a tenth as
// many starts and no reports. A refresher that ignored the traffic starts
// more measurements busy than idle (measured: 1.2-1.4 times as many); were
// its measurements not discarded when traffic crosses them, it would
// report them too.
func TestRefreshStaysOutOfBusyTraffic(t *testing.T) {
	const n = 3
	comms := startShaped(t, memAt(t, 50e6), collective.NewUniformModel(n, 1e-4, 50e6), refreshing(10*time.Millisecond, 0.5))
	type counts struct{ started, measured, observed int64 }
	total := func() counts {
		var s counts
		for _, c := range comms {
			rf := c.w.refresh
			s.started += rf.measured.Load() + rf.discarded.Load()
			s.measured += rf.measured.Load()
			s.observed += rf.observed.Load()
		}
		return s
	}
	// One busy second and one idle second, up to three times: a
	// measurement that began just before the traffic, or one stall of it,
	// can count once in the busy second, which matters when the idle one
	// counts few.
	var busy, idle counts
	for attempt := 1; attempt <= 3; attempt++ {
		before := total()
		// Each rank loops on its own (no join between iterations); rank 0
		// says in its messages when the second is over, so that every rank
		// stops after the same exchange.
		stop := time.Now().Add(time.Second)
		commtest.OnAll(t, comms, func(c *Comm) error {
			send := make([][]byte, n)
			for j := range send {
				send[j] = make([]byte, 64<<10)
			}
			for {
				if c.Rank() == 0 && !time.Now().Before(stop) {
					for j := range send {
						send[j][0] = 1
					}
				}
				recv, err := c.AlltoallvWith(context.Background(), send, AlltoallvOptions{Algorithm: Naive})
				if err != nil || recv[0][0] == 1 {
					return err
				}
			}
		})
		afterBusy := total()
		time.Sleep(time.Second)
		afterIdle := total()
		busy = counts{afterBusy.started - before.started, afterBusy.measured - before.measured, afterBusy.observed - before.observed}
		idle = counts{afterIdle.started - afterBusy.started, afterIdle.measured - afterBusy.measured, afterIdle.observed - afterBusy.observed}
		t.Logf("attempt %d: refreshes started, measured, observed: %+v during the traffic, %+v idle", attempt, busy, idle)
		if idle.observed >= 10 && 2*busy.started <= idle.started && 10*busy.measured <= idle.measured && 10*busy.observed <= idle.observed {
			break
		}
	}
	require.GreaterOrEqual(t, idle.observed, int64(10), "the idle refreshers report measurements (the reference)")
	require.LessOrEqual(t, 2*busy.started, idle.started, "refreshes started during the application's traffic")
	require.LessOrEqual(t, 10*busy.measured, idle.measured, "refreshes measured during the application's traffic")
	require.LessOrEqual(t, 10*busy.observed, idle.observed, "refreshes observed during the application's traffic")
}

// The refresher's bulk messages take at most RefreshShare of a rank's
// time (plus the measurement in progress), and it really runs.
func TestRefreshShareIsBounded(t *testing.T) {
	const n, share = 2, 0.1
	comms := startShaped(t, memAt(t, 20e6), collective.NewUniformModel(n, 1e-4, 20e6), refreshing(time.Millisecond, share))
	start := time.Now()
	time.Sleep(1500 * time.Millisecond)
	for r, c := range comms {
		rf := c.w.refresh
		elapsed := time.Since(start)
		busy := time.Duration(rf.busy.Load() - rf.last.Load())
		require.LessOrEqual(t, busy, time.Duration(share*float64(elapsed)), "rank %d sent refresh bulk for %v of %v", r, time.Duration(rf.busy.Load()), elapsed)
		require.Positive(t, rf.measured.Load()+rf.discarded.Load(), "rank %d never measured", r)
	}
	// Closing while measurements run is clean and quick.
	t0 := time.Now()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *Comm) { defer wg.Done(); errs[r] = c.Close() }(r, c)
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Less(t, time.Since(t0), 5*time.Second)
}

func TestRefreshConfig(t *testing.T) {
	_, err := Config{RefreshShare: 0.9}.normalize()
	require.ErrorContains(t, err, "RefreshShare")
}

// Reprobe while the refresher runs (it stands aside while a probe runs,
// and its ticks find the probe's traffic): the probe measures the links
// as they are, the same on every rank. "As they are" is what a second
// probe of the same links measures in the same run once the refreshers
// have stopped. A refresher that took its share (half of the time here)
// of a link during the probe would make that link about half as fast as
// alone; a busy machine slows either probe by chance (its emulated links
// are in user space), so a link must be at least 70% as fast during the
// refreshes as alone, in one of up to three runs.
func TestRefreshDuringReprobe(t *testing.T) {
	const n = 3
	const margin = 0.7
	var slow string
	for attempt := 1; attempt <= 3; attempt++ {
		comms := startShaped(t, memAt(t, 20e6), collective.NewUniformModel(n, 1e-4, 5e6), refreshing(2*time.Millisecond, 0.5))
		time.Sleep(100 * time.Millisecond) // refreshes are under way
		reprobe := func() *collective.Model {
			commtest.OnAll(t, comms, func(c *Comm) error { return c.Reprobe(context.Background()) })
			m := comms[0].Model()
			for r, c := range comms {
				require.Equal(t, m, c.Model(), "rank %d has another model", r)
			}
			return m
		}
		during := reprobe()
		for _, c := range comms {
			c.w.stopRefresh()
		}
		alone := reprobe()
		slow = ""
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					t.Logf("attempt %d: link %d->%d: %.3g B/s during the refreshes, %.3g alone", attempt, i, j, during.Bandwidth[i][j], alone.Bandwidth[i][j])
					if during.Bandwidth[i][j] < margin*alone.Bandwidth[i][j] {
						slow += fmt.Sprintf(" link %d->%d: %.3g B/s during the refreshes, %.3g alone;", i, j, during.Bandwidth[i][j], alone.Bandwidth[i][j])
					}
				}
			}
		}
		if slow == "" {
			break
		}
	}
	require.Empty(t, slow, "links slower during the refreshes than %.0f%% of alone in every run", 100*margin)
}

// A rank that crashes breaks the world: the others' refreshers stop (their
// receives from any source would fail at once, again and again) and the
// survivors still close cleanly.
func TestRefreshStopsWhenARankFails(t *testing.T) {
	const n = 3
	comms := startShaped(t, memAt(t, 50e6), collective.NewUniformModel(n, 1e-4, 50e6), refreshing(2*time.Millisecond, 0.5, func(c *Config) {
		c.Heartbeat = 50 * time.Millisecond
		c.FailAfter = 500 * time.Millisecond
	}))
	time.Sleep(50 * time.Millisecond)
	kill(comms[2])
	for _, c := range comms[:2] {
		done := make(chan struct{})
		go func() { c.w.refresh.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("rank %d's refresher still runs after rank 2 failed", c.Rank())
		}
	}
}
