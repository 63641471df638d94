package transport

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pacedRate sends size bytes over a (sender) to b and returns the rate at
// which they arrived, from the first message's arrival to the last's.
func pacedRate(t *testing.T, a, b Link, size, msgs int) float64 {
	t.Helper()
	ctx := testCtx(t)
	go func() {
		for range msgs {
			if err := a.Send(ctx, Header{Type: MsgEager}, make([]byte, size)); err != nil {
				return
			}
		}
	}()
	var first time.Time
	for i := range msgs {
		m, err := b.Recv(ctx)
		require.NoError(t, err)
		require.Len(t, m.Payload, size)
		if i == 0 {
			first = time.Now()
		}
	}
	return float64((msgs-1)*size) / time.Since(first).Seconds()
}

// TestPacing: a paced TCP or TLS link never delivers faster than its
// rate (the kernel paces it; a busy machine can only make it slower),
// and once cleared it is back at full speed. The 5% accuracy is
// BenchmarkPacing's to report.
func TestPacing(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("kernel TCP pacing is Linux's")
	}
	for _, k := range []Kind{KindTCP, KindTLS} {
		t.Run(k.String(), func(t *testing.T) {
			a, b := pair(t, socketFactory(k), testConfig(0), testConfig(1))
			require.True(t, CanPace(a))
			const rate = 20e6
			require.NoError(t, SetPacing(a, rate))
			got := pacedRate(t, a, b, 256<<10, 17)
			t.Logf("paced at %.3g B/s: %.3g B/s", rate, got)
			require.Less(t, got, rate*1.05, "faster than the pacing rate")
			require.Greater(t, got, rate*0.3, "far slower than the pacing rate")
			require.NoError(t, SetPacing(a, 0))
			fast := pacedRate(t, a, b, 256<<10, 65)
			t.Logf("cleared: %.3g B/s", fast)
			require.Greater(t, fast, 5*rate, "a cleared link is back at full speed")
		})
	}
	// Links that cannot pace say so.
	for _, f := range []netFactory{transports()[0], socketFactory(KindUDP), socketFactory(KindQUIC)} {
		a, _ := pair(t, f, testConfig(0), testConfig(1))
		require.False(t, CanPace(a), f.name)
		require.ErrorIs(t, SetPacing(a, 1e6), ErrNoPacing, f.name)
	}
	a, _ := pair(t, socketFactory(KindTCP), testConfig(0), testConfig(1))
	require.ErrorIs(t, SetPacing(a, -1), ErrBadConfig)
}

// BenchmarkPacing reports how close a paced TCP link comes to its rate:
// achieved/set, which should be within 5% of 1.
func BenchmarkPacing(b *testing.B) {
	for _, rate := range []float64{10e6, 50e6, 200e6} {
		b.Run(fmt.Sprintf("rate=%gMB/s", rate/1e6), func(b *testing.B) {
			l, r := pair(b, socketFactory(KindTCP), testConfig(0), testConfig(1))
			if err := SetPacing(l, rate); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			const size = 1 << 20
			msgs := max(4, int(rate/size/2)) // about half a second
			var ratio float64
			for b.Loop() {
				go func() {
					for range msgs {
						l.Send(ctx, Header{Type: MsgEager}, make([]byte, size))
					}
				}()
				var first time.Time
				for i := range msgs {
					if _, err := r.Recv(ctx); err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						first = time.Now()
					}
				}
				ratio = float64((msgs-1)*size) / time.Since(first).Seconds() / rate
			}
			b.ReportMetric(ratio, "achieved/set")
		})
	}
}
