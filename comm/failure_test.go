package comm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/hetcomm/hetcomm/transport"
)

// kill makes a rank vanish without a goodbye, as a crashed process would.
func kill(c *Comm) { c.w.shutdown() }

func TestRankDeathFailsEveryRank(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			comms := startWorld(t, 4, tr, nil)
			ctx := context.Background()
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for r := 0; r < 3; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					// Everyone waits in a collective that rank 3 never joins.
					_, errs[r] = comms[r].Allgatherv(ctx, []byte{byte(r)})
				}(r)
			}
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			kill(comms[3])
			wg.Wait()
			require.Less(t, time.Since(start), 5*time.Second)
			for r := 0; r < 3; r++ {
				var re *RankError
				require.True(t, errors.As(errs[r], &re), "rank %d: %v", r, errs[r])
				require.Equal(t, 3, re.Rank, "rank %d: %v", r, errs[r])
				require.ErrorIs(t, errs[r], ErrRankFailed)
				require.Equal(t, "Allgather", re.Op)
			}
			// Later operations that need rank 3 fail at once; others work.
			err := comms[0].Send(ctx, 3, 0, []byte("x"))
			require.ErrorIs(t, err, ErrRankFailed)
			require.ErrorIs(t, comms[1].Barrier(ctx), ErrRankFailed)
			commtest.OnAll(t, comms[:3], func(c *Comm) error {
				if c.Rank() == 0 {
					return c.Send(ctx, 1, 7, []byte("still alive"))
				}
				if c.Rank() == 1 {
					b, _, err := c.Recv(ctx, 0, 7)
					if err == nil && string(b) != "still alive" {
						err = fmt.Errorf("got %q", b)
					}
					return err
				}
				return nil
			})
		})
	}
}

func TestSilentPeerDetected(t *testing.T) {
	comms := startWorld(t, 2, "mem", func(c *Config) {
		c.Heartbeat = 20 * time.Millisecond
		c.FailAfter = 200 * time.Millisecond
	})
	// Rank 1 stops sending heartbeats but keeps its links open: a hung
	// host, once the world runs (rank 0 heard from it: a peer never heard
	// from may still be starting, and gets the start-up timeout).
	w1 := comms[1].w
	require.Eventually(t, comms[0].w.started[1].Load, 30*time.Second, time.Millisecond)
	close(w1.quit)
	start := time.Now()
	_, _, err := comms[0].Recv(context.Background(), 1, 0)
	require.ErrorIs(t, err, ErrRankFailed)
	require.ErrorContains(t, err, "silent")
	require.Less(t, time.Since(start), 3*time.Second)
}

// progressLink is a link that counts payload bytes (transport.Progress);
// plainLink one that does not (mem). Only their Progress is used.
type progressLink struct {
	transport.Link
	n uint64
}

func (l *progressLink) Progress() uint64 { return l.n }

type plainLink struct{ transport.Link }

// TestSilentRule: the rule of silence, with time as an argument. A peer
// is silent after FailAfter without a message, heartbeat, pulse or byte;
// in the middle of a message from a peer no pulse ever came from, after
// stallFactor times that; never while a message under way on a link
// that cannot count its bytes.
func TestSilentRule(t *testing.T) {
	const fa = 5 * time.Second
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name          string
		busy, pulses  bool
		unheard       bool
		counts, moved bool
		quiet         time.Duration
		want          time.Duration
	}{
		{name: "idle, heard recently", counts: true, quiet: fa - time.Second},
		{name: "idle, silent", counts: true, quiet: fa + time.Second, want: fa},
		{name: "idle mem, silent", quiet: fa + time.Second, want: fa},
		{name: "mid-message, bytes arrive", busy: true, pulses: true, counts: true, moved: true, quiet: time.Hour},
		{name: "mid-message, stalled, pulses heard before", busy: true, pulses: true, counts: true, quiet: fa + time.Second, want: fa},
		{name: "mid-message, stalled, pulses heard recently", busy: true, pulses: true, counts: true, quiet: fa - time.Second},
		{name: "mid-message, stalled, no pulses ever", busy: true, counts: true, quiet: fa + time.Second},
		{name: "mid-message, stalled long, no pulses ever", busy: true, counts: true, quiet: stallFactor*fa + time.Second, want: stallFactor * fa},
		{name: "mid-message on mem", busy: true, pulses: true, quiet: time.Hour},
		{name: "not heard from since the start", counts: true, unheard: true, quiet: fa + time.Second},
		{name: "not heard from since the start-up timeout", counts: true, unheard: true, quiet: time.Minute + time.Second, want: time.Minute},
		{name: "not heard from since the start, mid-message, no pulses ever", busy: true, counts: true, unheard: true, quiet: stallFactor*fa + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(&bootstrap.Bootstrap{Rank: 0, Size: 2, Timeout: time.Minute}, Config{FailAfter: fa, Heartbeat: time.Second})
			w.started[1].Store(!tc.unheard)
			var l transport.Link = plainLink{}
			if tc.counts {
				pl := &progressLink{n: 100}
				if tc.moved {
					pl.n = 200
				}
				w.lastProgress[1] = 100
				l = pl
			}
			w.lastRecv[1].Store(t0.UnixNano())
			if tc.busy {
				w.busySince[1].Store(t0.UnixNano())
			}
			w.pulseSeen[1].Store(tc.pulses)
			now := t0.Add(tc.quiet)
			require.Equal(t, tc.want, w.silent(1, l, now))
			if tc.moved {
				require.Equal(t, now.UnixNano(), w.lastRecv[1].Load(), "bytes count as life")
			}
		})
	}
}

// TestStalledPeerFailsAfterFailAfter: rank 0 is in the middle of a
// message from rank 1 (over tcp, whose bytes are counted) that stopped
// coming, and rank 1 went silent (its heartbeats and pulses stopped, as
// a stopped process's do; its kernel still holds the link open). As
// pulses from rank 1 reached rank 0 before, FailAfter of silence fails
// it, not stallFactor times that.
func TestStalledPeerFailsAfterFailAfter(t *testing.T) {
	comms := startWorld(t, 2, "tcp", func(c *Config) {
		c.Heartbeat = 50 * time.Millisecond
		c.FailAfter = 500 * time.Millisecond
	})
	w0, w1 := comms[0].w, comms[1].w
	require.NotNil(t, w0.pulses, "tcp links have pulses")
	require.Eventually(t, w0.pulseSeen[1].Load, 30*time.Second, 5*time.Millisecond, "a pulse from rank 1")
	close(w1.quit) // rank 1 hangs: no heartbeat, no pulse
	// A payload from rank 1 began and no more of it comes.
	w0.busySince[1].Store(time.Now().UnixNano())
	_, _, err := comms[0].Recv(context.Background(), 1, 0)
	require.ErrorIs(t, err, ErrRankFailed)
	var re *RankError
	require.ErrorAs(t, err, &re)
	require.Equal(t, 1, re.Rank)
	require.ErrorContains(t, err, "silent for more than 500ms", "the FailAfter rule, not the stalled-message one")
	require.Positive(t, w0.pulses.Accepted())
}

// TestStalledLivePeerStaysAlive: rank 0 waits in the middle of a message
// from rank 1 that makes no progress (a congested flow in
// retransmission back-off), for longer than FailAfter; rank 1 lives, so
// its pulses keep it alive.
func TestStalledLivePeerStaysAlive(t *testing.T) {
	comms := startWorld(t, 2, "tcp", func(c *Config) {
		c.Heartbeat = 200 * time.Millisecond
		c.FailAfter = 2 * time.Second
	})
	w0, w1 := comms[0].w, comms[1].w
	require.Eventually(t, w0.pulseSeen[1].Load, 30*time.Second, 5*time.Millisecond, "a pulse from rank 1")
	// Rank 1's heartbeats on the link wait behind its message: it sends
	// none (it sent last in the far future), only pulses.
	w1.lastSend[0].Store(time.Now().Add(time.Hour).UnixNano())
	time.Sleep(w0.cfg.Heartbeat) // a heartbeat already on its way lands
	w0.busySince[1].Store(time.Now().UnixNano())
	before := w0.pulses.Accepted()
	time.Sleep(2 * w0.cfg.FailAfter)
	w0.mu.Lock()
	why := w0.failed[1]
	w0.mu.Unlock()
	require.NoError(t, why, "rank 1 lives")
	require.NotZero(t, w0.busySince[1].Load(), "nothing came over the link")
	require.Greater(t, w0.pulses.Accepted(), before)
	w0.busySince[1].Store(0)
	ctx := context.Background()
	commtest.OnAll(t, comms, func(c *Comm) error { return c.Barrier(ctx) })
}

func TestWrongSecret(t *testing.T) {
	coord := freePort(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	comms := make([]*Comm, 2)
	for r := 0; r < 2; r++ {
		secret := commtest.Secret
		if r == 1 {
			secret = "not the job secret at all"
		}
		wg.Add(1)
		go func(r int, secret string) {
			defer wg.Done()
			comms[r], errs[r] = Init(ctx, &Config{Bootstrap: &bootstrap.Bootstrap{Rank: r, Size: 2, Coord: coord, Secret: []byte(secret), Job: "j", Transport: "tcp", Timeout: 2 * time.Second}})
		}(r, secret)
	}
	start := time.Now()
	wg.Wait()
	require.Less(t, time.Since(start), 5*time.Second)
	require.Nil(t, comms[0])
	require.Nil(t, comms[1])
	require.ErrorContains(t, errs[1], "authentication")
	var re *RankError
	require.True(t, errors.As(errs[0], &re), "%v", errs[0])
	require.Equal(t, 1, re.Rank)
	require.ErrorIs(t, errs[0], context.DeadlineExceeded)
	require.ErrorContains(t, errs[0], "missing ranks [1]")
}

func TestArgumentErrors(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	c := comms[0]
	ctx := context.Background()
	for name, err := range map[string]error{
		"send rank":       c.Send(ctx, 2, 0, nil),
		"send tag":        c.Send(ctx, 1, -3, nil),
		"bcast root":      func() error { _, err := c.Bcast(ctx, 5, nil); return err }(),
		"alltoallv count": func() error { _, err := c.Alltoallv(ctx, make([][]byte, 3)); return err }(),
		"alltoallv algo": func() error {
			_, err := c.AlltoallvWith(ctx, make([][]byte, 2), AlltoallvOptions{Algorithm: "fastest"})
			return err
		}(),
		"alltoall sizes": func() error { _, err := c.Alltoall(ctx, [][]byte{{1}, {1, 2}}); return err }(),
		"scatter parts":  func() error { _, err := c.Scatterv(ctx, 0, make([][]byte, 1)); return err }(),
		"scatter sizes":  func() error { _, err := c.Scatter(ctx, 0, [][]byte{{1}, {}}); return err }(),
		"reduce nil op":  func() error { _, err := Reduce[int](ctx, c, 0, []int{1}, nil); return err }(),
		"recv rank":      func() error { _, _, err := c.Recv(ctx, 9, 0); return err }(),
	} {
		var ae *ArgError
		require.True(t, errors.As(err, &ae), "%s: %v", name, err)
		require.ErrorIs(t, err, ErrArgument, name)
	}
	// Nothing moved: a collective still works afterwards.
	commtest.OnAll(t, comms, func(c *Comm) error { return c.Barrier(ctx) })
}

func TestMismatchedCollectives(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var e0, e1 error
	wg.Add(2)
	go func() { defer wg.Done(); e0 = comms[0].Barrier(ctx) }()
	go func() { defer wg.Done(); _, e1 = comms[1].Bcast(ctx, 0, nil) }()
	wg.Wait()
	require.ErrorIs(t, e0, ErrMismatch)
	require.ErrorContains(t, e0, "rank 0 called Barrier while rank 1 called Bcast")
	require.ErrorIs(t, e1, ErrMismatch)

	// Different Alltoallv algorithms.
	comms = startWorld(t, 2, "mem", nil)
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, e0 = comms[0].AlltoallvWith(ctx, make([][]byte, 2), AlltoallvOptions{Algorithm: Naive})
	}()
	go func() {
		defer wg.Done()
		_, e1 = comms[1].AlltoallvWith(ctx, make([][]byte, 2), AlltoallvOptions{Algorithm: collective.OpenShop})
	}()
	wg.Wait()
	require.ErrorIs(t, e0, ErrMismatch)
	require.ErrorIs(t, e1, ErrMismatch)

	// Gather of different sizes is reported at root.
	comms = startWorld(t, 2, "mem", nil)
	wg.Add(2)
	go func() { defer wg.Done(); _, e0 = comms[0].Gather(ctx, 0, []byte{1, 2}) }()
	go func() { defer wg.Done(); _, e1 = comms[1].Gather(ctx, 0, []byte{1}) }()
	wg.Wait()
	require.ErrorIs(t, e0, ErrMismatch)
	require.NoError(t, e1)
}

func TestTimeouts(t *testing.T) {
	comms := startWorld(t, 2, "mem", func(c *Config) { c.OpTimeout = 100 * time.Millisecond })
	_, _, err := comms[0].Recv(context.Background(), 1, 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "rank 1")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, comms[1].Barrier(ctx), context.DeadlineExceeded)
	// A cancelled receive leaves no trace: the message goes to the next one.
	require.NoError(t, comms[1].Send(context.Background(), 0, 4, []byte("late")))
	b, _, err := comms[0].Recv(context.Background(), 1, 4)
	require.NoError(t, err)
	require.Equal(t, "late", string(b))
}

func TestSplit(t *testing.T) {
	comms := startWorld(t, 5, "mem", nil)
	ctx := context.Background()
	subs := make([]*Comm, 5)
	commtest.OnAll(t, comms, func(c *Comm) error {
		color := c.Rank() % 2
		if c.Rank() == 4 {
			color = Undefined
		}
		sub, err := c.Split(ctx, color, -c.Rank())
		subs[c.Rank()] = sub
		return err
	})
	require.Nil(t, subs[4])
	// Color 0: ranks 0, 2 ordered by key -rank: 2 first.
	require.Equal(t, 2, subs[0].Size())
	require.Equal(t, 1, subs[0].Rank())
	require.Equal(t, 0, subs[2].Rank())
	require.Equal(t, 2, subs[1].Size())
	commtest.OnAll(t, []*Comm{subs[0], subs[1], subs[2], subs[3]}, func(c *Comm) error {
		sum, err := Allreduce(ctx, c, []int{c.WorldRank(c.Rank())}, Sum)
		if err != nil {
			return err
		}
		want := map[int]int{0: 2, 1: 4}[c.WorldRank(0)%2]
		if sum[0] != want {
			return fmt.Errorf("sum %d, want %d", sum[0], want)
		}
		// Sub-communicator traffic does not mix with the world's.
		peer := 1 - c.Rank()
		got, _, err := c.Sendrecv(ctx, []byte{byte(c.Rank())}, peer, 1, peer, 1)
		if err != nil {
			return err
		}
		if got[0] != byte(peer) {
			return fmt.Errorf("sendrecv got %d", got[0])
		}
		return c.Close()
	})
}

func TestNonBlockingAndProbe(t *testing.T) {
	comms := startWorld(t, 2, "mem", func(c *Config) { c.EagerLimit = 16 })
	ctx := context.Background()
	commtest.OnAll(t, comms, func(c *Comm) error {
		if c.Rank() == 0 {
			// Same tag, eager and rendezvous mixed: must arrive in order.
			var reqs []*Request
			for i := 0; i < 10; i++ {
				reqs = append(reqs, c.Isend(ctx, 1, 9, make([]byte, i*10)))
			}
			for _, r := range reqs {
				if _, err := r.Wait(ctx); err != nil {
					return err
				}
			}
			return c.Send(ctx, 1, 10, []byte("probe me"))
		}
		var reqs []*Request
		for i := 0; i < 10; i++ {
			reqs = append(reqs, c.Irecv(ctx, 0, 9))
		}
		for i, r := range reqs {
			st, err := r.Wait(ctx)
			if err != nil {
				return err
			}
			if st.Len != i*10 || len(r.Data()) != i*10 {
				return fmt.Errorf("message %d has %d bytes: overtaken", i, st.Len)
			}
		}
		st, err := c.Probe(ctx, AnySource, 10)
		if err != nil {
			return err
		}
		if st.Len != 8 || st.Source != 0 {
			return fmt.Errorf("probe %+v", st)
		}
		ok, st2, err := c.Iprobe(0, AnyTag)
		if err != nil || !ok || st2 != st {
			return fmt.Errorf("iprobe %v %+v %v", ok, st2, err)
		}
		small := make([]byte, 4)
		got, _, err := c.RecvInto(ctx, small, 0, 10)
		if !errors.Is(err, ErrTruncated) || string(got) != "prob" {
			return fmt.Errorf("truncation: %q %v", got, err)
		}
		ok, _, _ = c.Iprobe(AnySource, AnyTag)
		if ok {
			return fmt.Errorf("truncated message still queued")
		}
		return nil
	})
}

// A communicator made after a peer left with a goodbye is not broken; one
// made after a peer failed is.
func TestNewCommAfterPeerLeft(t *testing.T) {
	comms := startWorld(t, 3, "mem", nil)
	w := comms[0].w
	w.markClosed(1)
	c := w.newComm(99, []int{0, 1, 2}, 0)
	require.NoError(t, c.brokenErr())
	w.markFailed(2, &failure{msg: "test"}, false)
	d := w.newComm(98, []int{0, 1, 2}, 0)
	require.ErrorIs(t, d.brokenErr(), ErrRankFailed)
	var re *RankError
	require.True(t, errors.As(d.brokenErr(), &re))
	require.Equal(t, 2, re.Rank)
}

// TestDupModelNowTimeout: a duplicate's messages are its own,
// WithoutTimeout lifts OpTimeout, a sub-communicator's model is its rows
// and columns, and Now runs on rank 0's clock. OpTimeout (300 ms) bounds
// the Dup and the Recv on the duplicate too, so it leaves a busy machine
// room (50 ms did not always); the late message comes well after it.
func TestDupModelNowTimeout(t *testing.T) {
	const opTimeout = 300 * time.Millisecond
	comms := startWorld(t, 3, "mem", func(c *Config) { c.OpTimeout = opTimeout })
	ctx := context.Background()
	dups := make([]*Comm, 3)
	commtest.OnAll(t, comms, func(c *Comm) error {
		d, err := c.Dup(ctx)
		dups[c.Rank()] = d
		return err
	})
	// A message on the duplicate is not seen by the original.
	require.NoError(t, dups[0].Send(ctx, 1, 1, []byte("dup")))
	ok, _, err := comms[1].Iprobe(0, AnyTag)
	require.NoError(t, err)
	require.False(t, ok)
	b, _, err := dups[1].Recv(ctx, 0, 1)
	require.NoError(t, err)
	require.Equal(t, "dup", string(b))

	// WithoutTimeout lifts OpTimeout.
	go func() {
		time.Sleep(3 * opTimeout)
		comms[2].Send(ctx, 0, 5, []byte("late"))
	}()
	b, _, err = comms[0].Recv(WithoutTimeout(ctx), 2, 5)
	require.NoError(t, err)
	require.Equal(t, "late", string(b))

	// Model of a sub-communicator is its rows and columns.
	m := collective.NewUniformModel(3, 0, 1)
	m.Bandwidth[2][0] = 7
	comms[0].w.setModel(m, []float64{0, 0.5, 0})
	sub := comms[0].w.newComm(77, []int{2, 0}, 0)
	require.Equal(t, 7.0, sub.Model().Bandwidth[0][1])
	require.Nil(t, (&Comm{w: newWorld(&bootstrap.Bootstrap{Size: 1}, Config{})}).Model())
	// Now is on rank 0's clock: with rank 1's offset at half a second, rank
	// 1's Now runs half a second ahead of its own clock.
	require.InDelta(t, 0.0, comms[1].Now().Sub(time.Now()).Seconds(), 0.05, "no offsets: the local clock")
	comms[1].w.setModel(m, []float64{0, 0.5, 0})
	require.InDelta(t, 0.5, comms[1].Now().Sub(time.Now()).Seconds(), 0.05)
}

// TestDetectorExitsBlameStaysRight: the one rank that noticed a failure
// (here rank 2 finds rank 3 silent) gets the error and its process dies
// at once, as a program that calls log.Fatal on an error does. Its
// "failed" notice must already be on its links by then, ahead of their
// end: the other ranks blame rank 3, not rank 2 whose links they saw
// close.
func TestDetectorExitsBlameStaysRight(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			for range 3 {
				comms := startWorld(t, 4, tr, nil)
				ctx := context.Background()
				// Rank 3 is hung (stopped): it tells nobody anything.
				w3 := comms[3].w
				w3.mu.Lock()
				w3.closing = true
				w3.mu.Unlock()
				errs := make([]error, 3)
				var wg sync.WaitGroup
				for r := range 3 {
					wg.Go(func() {
						// Rank 3 never joins.
						_, errs[r] = comms[r].Allgatherv(ctx, []byte{byte(r)})
						if r == 2 {
							kill(comms[2])
						}
					})
				}
				time.Sleep(20 * time.Millisecond)
				comms[2].w.markFailed(3, &failure{msg: "silent (test)"}, true)
				wg.Wait()
				for r := range 3 {
					var re *RankError
					require.True(t, errors.As(errs[r], &re), "rank %d: %v", r, errs[r])
					require.Equal(t, 3, re.Rank, "rank %d: %v (all: %v)", r, errs[r], errs)
				}
			}
		})
	}
}

// TestReportOfLeaverWaitsForItsReports: rank 1 is stopped, rank 3
// notices (say its link to rank 1 was lost), tells the others and exits;
// rank 2, which saw rank 3's link end, reports that too. Rank 0 is given
// both reports, in either order, and its link to rank 3 ends while its
// own link to rank 1 stays up. Rank 0 must blame rank 1: the report
// about rank 3 waits for what rank 3 reported before its end.
func TestReportOfLeaverWaitsForItsReports(t *testing.T) {
	for _, order := range []string{"leaver-first", "third-first"} {
		t.Run(order, func(t *testing.T) {
			comms := startWorld(t, 4, "mem", nil)
			w := comms[0].w
			// Rank 1 is stopped: it tells nobody anything.
			w1 := comms[1].w
			w1.mu.Lock()
			w1.closing = true
			w1.mu.Unlock()
			about1 := control{Kind: "failed", Rank: 1, Reason: linkLost + ": EOF (test)"}
			about3 := control{Kind: "failed", Rank: 3, Reason: linkLost + ": EOF (test)"}
			if order == "leaver-first" {
				w.onControl(3, about1)
				w.onControl(2, about3)
			} else {
				w.onControl(2, about3)
				w.onControl(3, about1)
			}
			kill(comms[3]) // rank 3 exits: rank 0's link to it ends
			require.Eventually(t, func() bool { return comms[0].brokenErr() != nil }, 5*time.Second, time.Millisecond)
			var re *RankError
			err := comms[0].brokenErr()
			require.True(t, errors.As(err, &re), "%v", err)
			require.Equal(t, 1, re.Rank, "%v", err)
		})
	}
}
