package rudp

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testConfig returns a config with short timers for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.IdleTimeout = 5 * time.Second
	c.KeepAlive = 500 * time.Millisecond
	c.Linger = 2 * time.Second
	return c
}

// memPair dials a connection across a new MemNetwork and returns both ends.
func memPair(t testing.TB, mc MemConfig, cfg Config) (client, server *Conn, nw *MemNetwork) {
	t.Helper()
	nw = NewMemNetwork(mc)
	spc, err := nw.Listen("127.0.0.1:9000")
	require.NoError(t, err)
	ln, err := ListenPacketConn(spc, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	cpc, err := nw.Listen("127.0.0.2:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept(ctx)
		ch <- res{c, err}
	}()
	client, err = DialPacketConn(ctx, cpc, ln.Addr(), cfg)
	require.NoError(t, err)
	r := <-ch
	require.NoError(t, r.err)
	server = r.c
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server, nw
}

// pattern fills a deterministic pseudo-random byte stream.
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := range 8 {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeChunks writes data in random-sized writes (up to maxWrite).
func writeChunks(w io.Writer, data []byte, seed uint64, maxWrite int) error {
	r := rand.New(rand.NewPCG(seed, 7))
	for len(data) > 0 {
		n := 1 + r.IntN(maxWrite)
		if r.IntN(8) == 0 {
			n = 1 + r.IntN(64) // some tiny writes
		}
		n = min(n, len(data))
		if _, err := w.Write(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// readAllHash reads exactly n bytes with random read sizes and returns
// their SHA-256.
func readAllHash(r io.Reader, n int, seed uint64) ([32]byte, error) {
	h := sha256.New()
	rr := rand.New(rand.NewPCG(seed, 11))
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(1+rr.IntN(len(buf)), n)
		m, err := r.Read(buf[:k])
		h.Write(buf[:m])
		n -= m
		if err != nil {
			if n == 0 && err == io.EOF {
				break
			}
			var sum [32]byte
			return sum, err
		}
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, nil
}

var _ net.Conn = (*Conn)(nil)

var errEOF = io.EOF

func ioReadFull(r io.Reader, b []byte) (int, error) { return io.ReadFull(r, b) }

type netipAddrPort = netip.AddrPort
