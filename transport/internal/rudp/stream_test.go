package rudp

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// transferCase describes one stream-integrity run over a MemNetwork.
type transferCase struct {
	name     string
	link     MemLink
	mtu      int
	total    int  // bytes each way
	duplex   bool // both directions at once
	maxWrite int
	heavy    bool // skipped with -short
}

func runTransfer(t *testing.T, tc transferCase, seed uint64) {
	t.Helper()
	cfg := testConfig()
	c, s, _ := memPair(t, MemConfig{Seed: seed, MTU: tc.mtu, Link: tc.link}, cfg)

	type result struct {
		sum [32]byte
		err error
	}
	send := func(conn *Conn, data []byte, seed uint64) chan error {
		ch := make(chan error, 1)
		go func() { ch <- writeChunks(conn, data, seed, tc.maxWrite) }()
		return ch
	}
	recv := func(conn *Conn, n int, seed uint64) chan result {
		ch := make(chan result, 1)
		go func() {
			sum, err := readAllHash(conn, n, seed)
			ch <- result{sum, err}
		}()
		return ch
	}
	up := pattern(seed, tc.total)
	upW := send(c, up, seed+1)
	upR := recv(s, len(up), seed+2)
	var downW chan error
	var downR chan result
	var down []byte
	if tc.duplex {
		down = pattern(seed+100, tc.total)
		downW = send(s, down, seed+3)
		downR = recv(c, len(down), seed+4)
	}
	timeout := time.After(90 * time.Second)
	wait := func(name string, ch chan result, want []byte) {
		select {
		case r := <-ch:
			require.NoError(t, r.err, name)
			require.Equal(t, sha256.Sum256(want), r.sum, "%s: stream corrupted", name)
		case <-timeout:
			t.Fatalf("%s: timed out; client %+v server %+v", name, c.Stats(), s.Stats())
		}
	}
	wait("client->server", upR, up)
	require.NoError(t, <-upW)
	if tc.duplex {
		wait("server->client", downR, down)
		require.NoError(t, <-downW)
	}
	cs, ss := c.Stats(), s.Stats()
	t.Logf("client: sent %d data pkts, %d rtx (%d fast, %d timeouts), %d loss events, srtt %v cwnd %d",
		cs.DataPacketsSent, cs.Retransmissions, cs.FastRetransmits, cs.Timeouts, cs.LossEvents, cs.SRTT, cs.CongestionWindow)
	t.Logf("server: rcvd %d data pkts, %d dups, %d ooo", ss.DataPacketsReceived, ss.DuplicatesDropped, ss.OutOfOrder)
	// Graceful close both ways: EOF on both sides.
	require.NoError(t, c.CloseWrite())
	require.NoError(t, s.CloseWrite())
	buf := make([]byte, 1)
	_, err := s.Read(buf)
	require.ErrorIs(t, err, errEOF)
	_, err = c.Read(buf)
	require.ErrorIs(t, err, errEOF)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
}

func TestStreamIntegrity(t *testing.T) {
	reorder := MemLink{Reorder: 0.05, ReorderDelay: 500 * time.Microsecond, Duplicate: 0.02}
	with := func(loss float64) MemLink { l := reorder; l.Loss = loss; return l }
	cases := []transferCase{
		{name: "empty", total: 0, maxWrite: 1},
		{name: "tiny", total: 1, maxWrite: 1},
		{name: "loss=0/mtu=1400", total: 4 << 20, mtu: 1400, maxWrite: 64 << 10},
		{name: "loss=0/mtu=65507", total: 16 << 20, maxWrite: 4 << 20},
		{name: "loss=5%/reorder/dup/mtu=1400", link: with(0.05), total: 4 << 20, mtu: 1400, maxWrite: 100 << 10},
		{name: "loss=20%/reorder/dup/mtu=1400", link: with(0.20), total: 2 << 20, mtu: 1400, maxWrite: 100 << 10},
		{name: "loss=5%/reorder/dup/mtu=65507", link: with(0.05), total: 16 << 20, maxWrite: 4 << 20},
		{name: "loss=20%/reorder/dup/mtu=65507", link: with(0.20), total: 8 << 20, maxWrite: 1 << 20},
		{name: "duplex/loss=5%/mtu=1400", link: with(0.05), total: 2 << 20, mtu: 1400, maxWrite: 50 << 10, duplex: true},
		{name: "duplex/loss=20%/mtu=9000", link: with(0.20), total: 4 << 20, mtu: 9000, maxWrite: 50 << 10, duplex: true},
		{name: "delay/jitter/rate", link: MemLink{Delay: 2 * time.Millisecond, Jitter: time.Millisecond, Rate: 50e6, QueueBytes: 256 << 10}, total: 4 << 20, mtu: 1400, maxWrite: 1 << 20},
		{name: "loss=0/64MiB", total: 64 << 20, maxWrite: 4 << 20, heavy: true},
		{name: "duplex/loss=5%/32MiB", link: with(0.05), total: 32 << 20, maxWrite: 4 << 20, duplex: true, heavy: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.heavy && testing.Short() {
				t.Skip("heavy: skipped with -short")
			}
			t.Parallel()
			runTransfer(t, tc, uint64(i+1))
		})
	}
}

func TestManyConnectionsOneListener(t *testing.T) {
	nw := NewMemNetwork(MemConfig{Seed: 5, MTU: 1400, Link: MemLink{Loss: 0.05, Reorder: 0.05}})
	spc, err := nw.Listen("127.0.0.1:7000")
	require.NoError(t, err)
	cfg := testConfig()
	ln, err := ListenPacketConn(spc, cfg)
	require.NoError(t, err)
	defer ln.Close()

	const conns = 16
	const size = 256 << 10
	errs := make(chan error, 2*conns)
	// Server: echo a SHA-256 of what each connection sent.
	go func() {
		for range conns {
			c, err := ln.Accept(t.Context())
			if err != nil {
				errs <- err
				return
			}
			go func() {
				defer c.Close()
				sum, err := readAllHash(c, size, 1)
				if err != nil {
					errs <- fmt.Errorf("server read: %w", err)
					return
				}
				_, err = c.Write(sum[:])
				errs <- err
			}()
		}
	}()
	for i := range conns {
		go func() {
			pc, err := nw.Listen("127.0.0.3:0")
			if err != nil {
				errs <- err
				return
			}
			c, err := DialPacketConn(t.Context(), pc, ln.Addr(), cfg)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			data := pattern(uint64(i), size)
			if err := writeChunks(c, data, uint64(i), 10000); err != nil {
				errs <- err
				return
			}
			var got [32]byte
			if _, err := ioReadFull(c, got[:]); err != nil {
				errs <- fmt.Errorf("client read: %w", err)
				return
			}
			if got != sha256.Sum256(data) {
				errs <- fmt.Errorf("conn %d: digest mismatch", i)
				return
			}
			errs <- nil
		}()
	}
	for range 2 * conns {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Fatal("timeout")
		}
	}
	require.EqualValues(t, conns, ln.Stats().Created)
}
