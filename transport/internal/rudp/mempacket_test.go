package rudp

import (
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemNetwork(t *testing.T) {
	t.Run("deliver and address", func(t *testing.T) {
		a, b := MemPipe(MemConfig{})
		_, err := a.WriteTo([]byte("hello"), b.LocalAddr())
		require.NoError(t, err)
		buf := make([]byte, 10)
		n, from, err := b.ReadFrom(buf)
		require.NoError(t, err)
		require.Equal(t, "hello", string(buf[:n]))
		require.Equal(t, a.LocalAddr().String(), from.String())
	})
	t.Run("seeded loss is deterministic", func(t *testing.T) {
		pattern := func() []int {
			const sent = 1000
			a, b := MemPipe(MemConfig{Seed: 42, Link: MemLink{Loss: 0.3}})
			dst := b.LocalAddr().(*net.UDPAddr).AddrPort()
			for i := range sent {
				_, err := a.WriteToUDPAddrPort([]byte{byte(i), byte(i >> 8)}, dst)
				require.NoError(t, err)
			}
			// A write decides at once whether the datagram is lost, so
			// the survivors are known: read exactly those (no clock
			// decides when the draining ends; the deadline only turns a
			// hang into a failure), then check that nothing is left.
			dropped, _ := b.Dropped()
			var got []int
			buf := make([]byte, 2)
			require.NoError(t, b.SetReadDeadline(time.Now().Add(time.Minute)))
			for range sent - int(dropped) {
				_, _, err := b.ReadFromUDPAddrPort(buf)
				require.NoError(t, err)
				got = append(got, int(buf[0])|int(buf[1])<<8)
			}
			dropped, delivered := b.Dropped()
			require.EqualValues(t, sent, dropped+delivered, "every datagram is either lost or read")
			b.mu.Lock()
			left := len(b.q)
			b.mu.Unlock()
			require.Zero(t, left, "datagrams beyond the survivors")
			return got
		}
		p1, p2 := pattern(), pattern()
		require.Equal(t, p1, p2)
		require.InDelta(t, 700, len(p1), 60)
	})
	t.Run("duplicate, reorder, delay", func(t *testing.T) {
		a, b := MemPipe(MemConfig{Seed: 1, Link: MemLink{Duplicate: 1, Delay: 20 * time.Millisecond}})
		start := time.Now()
		_, err := a.WriteTo([]byte("x"), b.LocalAddr())
		require.NoError(t, err)
		buf := make([]byte, 1)
		for range 2 {
			_, _, err := b.ReadFrom(buf)
			require.NoError(t, err)
		}
		require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
		c, d := MemPipe(MemConfig{Seed: 1, Link: MemLink{Reorder: 0.5, ReorderDelay: 5 * time.Millisecond}})
		for i := range 100 {
			_, err := c.WriteTo([]byte{byte(i)}, d.LocalAddr())
			require.NoError(t, err)
		}
		inversions := 0
		last := -1
		for range 100 {
			_, _, err := d.ReadFrom(buf)
			require.NoError(t, err)
			if int(buf[0]) < last {
				inversions++
			}
			last = int(buf[0])
		}
		require.Greater(t, inversions, 0)
	})
	t.Run("rate", func(t *testing.T) {
		a, b := MemPipe(MemConfig{Link: MemLink{Rate: 1e6}})
		start := time.Now()
		for range 20 {
			_, err := a.WriteTo(make([]byte, 1000), b.LocalAddr()) // 20 ms at 1 MB/s
			require.NoError(t, err)
		}
		buf := make([]byte, 1000)
		for range 20 {
			_, _, err := b.ReadFrom(buf)
			require.NoError(t, err)
		}
		require.GreaterOrEqual(t, time.Since(start), 19*time.Millisecond)
	})
	t.Run("queue limit, mtu, close", func(t *testing.T) {
		a, b := MemPipe(MemConfig{MTU: 1500, Link: MemLink{QueueBytes: 3000}})
		for range 5 {
			_, err := a.WriteTo(make([]byte, 1000), b.LocalAddr())
			require.NoError(t, err)
		}
		dropped, _ := b.Dropped()
		require.EqualValues(t, 2, dropped)
		_, err := a.WriteTo(make([]byte, 1501), b.LocalAddr())
		require.ErrorIs(t, err, syscall.EMSGSIZE)
		// Nobody listening: silently lost, like UDP.
		_, err = a.WriteToUDPAddrPort([]byte("x"), netip.MustParseAddrPort("127.9.9.9:9"))
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() {
			for {
				if _, _, err := b.ReadFrom(make([]byte, 2000)); err != nil {
					errc <- err
					return
				}
			}
		}()
		time.Sleep(10 * time.Millisecond)
		require.NoError(t, b.Close())
		require.ErrorIs(t, <-errc, net.ErrClosed)
		require.NoError(t, b.Close())
		_, err = b.WriteTo([]byte("x"), a.LocalAddr())
		require.ErrorIs(t, err, net.ErrClosed)
	})
}
