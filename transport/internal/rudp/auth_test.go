package rudp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	testKey  = []byte("rudp test key, 0123456789abcdef")
	wrongKey = []byte("another key of the same length!")
)

// keyedConfig is testConfig with a key: control packets are authenticated.
func keyedConfig() Config {
	c := testConfig()
	c.Key = testKey
	return c
}

// recorder is a MemPacketConn that keeps a copy of every control packet
// (SYN, SYNACK, RST) written through it, for replays.
type recorder struct {
	*MemPacketConn
	mu   sync.Mutex
	sent [][]byte
}

func (r *recorder) WriteToUDPAddrPort(b []byte, to netip.AddrPort) (int, error) {
	if len(b) > 1 {
		switch pktType(b[1]) {
		case typeSYN, typeSYNACK, typeRST:
			r.mu.Lock()
			r.sent = append(r.sent, bytes.Clone(b))
			r.mu.Unlock()
		}
	}
	return r.MemPacketConn.WriteToUDPAddrPort(b, to)
}

// last returns the latest recorded packet of type typ.
func (r *recorder) last(t *testing.T, typ pktType) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.sent) - 1; i >= 0; i-- {
		if pktType(r.sent[i][1]) == typ {
			return bytes.Clone(r.sent[i])
		}
	}
	t.Fatalf("no %v recorded", typ)
	return nil
}

// count returns how many control packets were recorded.
func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

func sumOf(b []byte) [32]byte { return sha256.Sum256(b) }

// addrPort is the address of a MemPacketConn.
func addrPort(pc *MemPacketConn) netip.AddrPort { return pc.addr }

// authEnv is a listener on a MemNetwork whose sockets record the control
// packets they send, so that a test can replay genuine packets and forge
// others from any address.
type authEnv struct {
	cfg Config
	nw  *MemNetwork
	srv *recorder // the listener's socket
	ln  *Listener
}

func newAuthEnv(t *testing.T, cfg Config) *authEnv {
	t.Helper()
	nw := NewMemNetwork(MemConfig{Seed: 21, MTU: 1400})
	spc, err := nw.Listen("127.0.0.1:9000")
	require.NoError(t, err)
	e := &authEnv{cfg: cfg, nw: nw, srv: &recorder{MemPacketConn: spc}}
	e.ln, err = ListenPacketConn(e.srv, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.ln.Close() })
	return e
}

// dial opens a connection from addr and returns both ends and the
// client's socket.
func (e *authEnv) dial(t *testing.T, addr string) (c, s *Conn, cli *recorder) {
	t.Helper()
	pc, err := e.nw.Listen(addr)
	require.NoError(t, err)
	cli = &recorder{MemPacketConn: pc}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acc := make(chan *Conn, 1)
	go func() {
		s, _ := e.ln.Accept(ctx)
		acc <- s
	}()
	c, err = DialPacketConn(ctx, cli, e.ln.Addr(), e.cfg)
	require.NoError(t, err)
	s = <-acc
	require.NotNil(t, s, "Accept failed")
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c, s, cli
}

// toListener sends b to the listener from cli's address (spoofed: the
// datagram does not go through the client's Conn).
func (e *authEnv) toListener(t *testing.T, cli *recorder, b []byte) {
	t.Helper()
	_, err := cli.MemPacketConn.WriteToUDPAddrPort(b, addrPort(e.srv.MemPacketConn))
	require.NoError(t, err)
}

// toClient sends b to cli from the listener's address (spoofed likewise).
func (e *authEnv) toClient(t *testing.T, cli *recorder, b []byte) {
	t.Helper()
	_, err := e.srv.MemPacketConn.WriteToUDPAddrPort(b, addrPort(cli.MemPacketConn))
	require.NoError(t, err)
}

// forge builds a control packet: a SYN or SYNACK carrying the id src, or
// an RST naming dst and src, signed with a key derived from key (none for
// nil).
func forge(typ pktType, dst, src uint64, key []byte) []byte {
	b := make([]byte, maxCtrlLen)
	a := newAuthKey(key)
	if typ == typeRST {
		return buildRST(b, dst, src, 1, a)
	}
	return buildSYN(b, header{typ: typ, dst: dst, wnd: 100, tsval: 1}, synInfo{srcID: src, maxPacket: 1400}, a)
}

// corrupt flips one bit of the packet's MAC.
func corrupt(p []byte) []byte {
	q := bytes.Clone(p)
	q[len(q)-1] ^= 0x10
	return q
}

// requireFlows sends n bytes each way at once and checks that they
// arrive intact: the connection was neither reset nor disturbed.
func requireFlows(t *testing.T, c, s *Conn, n int, seed uint64) {
	t.Helper()
	up, down := pattern(seed, n), pattern(seed+1, n)
	errc := make(chan error, 2)
	go func() { errc <- writeChunks(c, up, seed+2, 64<<10) }()
	go func() { errc <- writeChunks(s, down, seed+3, 64<<10) }()
	got, err := readAllHash(s, n, seed+4)
	require.NoError(t, err, "client->server")
	require.Equal(t, sumOf(up), got, "client->server corrupted")
	got, err = readAllHash(c, n, seed+5)
	require.NoError(t, err, "server->client")
	require.Equal(t, sumOf(down), got, "server->client corrupted")
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
}

// waitFor polls cond until it holds (an event, not a clock: the limit only
// turns a hang into a failure).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 2*time.Millisecond, what)
}

func TestAuthPackets(t *testing.T) {
	key := newAuthKey(testKey)
	require.Nil(t, newAuthKey(nil), "no key, no authentication")
	cases := []struct {
		name string
		pkt  []byte
	}{
		{"SYN", forge(typeSYN, 0, 42, testKey)},
		{"SYNACK", forge(typeSYNACK, 42, 43, testKey)},
		{"RST", forge(typeRST, 42, 43, testKey)},
		{"reflected RST", forge(typeRST, 42, 0, testKey)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var h header
			p, err := decodePacket(tc.pkt, &h)
			require.NoError(t, err)
			require.NotZero(t, h.flags&flagAUTH)
			require.True(t, key.check(&h, tc.pkt))
			require.True(t, (*authKey)(nil).check(&h, tc.pkt), "without a key nothing is checked")
			if h.typ == typeRST {
				src, ok := rstSource(&h, p)
				require.True(t, ok)
				require.Equal(t, binaryID(tc.pkt[headerLen:]), src)
			} else {
				info, err := decodeSYN(p)
				require.NoError(t, err)
				require.NotZero(t, info.srcID)
			}
			// Any change to any byte: it no longer decodes or no longer
			// verifies.
			for i := range tc.pkt {
				for _, bit := range []byte{0x01, 0x80} {
					q := bytes.Clone(tc.pkt)
					q[i] ^= bit
					var h2 header
					if _, err := decodePacket(q, &h2); err != nil {
						continue
					}
					require.False(t, key.check(&h2, q), "byte %d bit %#x changed and still verifies", i, bit)
				}
			}
			// Another key, or none: rejected by a keyed receiver.
			other := forge(h.typ, h.dst, 42, wrongKey)
			var h3 header
			_, err = decodePacket(other, &h3)
			require.NoError(t, err)
			require.False(t, key.check(&h3, other))
			plain := forge(h.typ, h.dst, 42, nil)
			_, err = decodePacket(plain, &h3)
			require.NoError(t, err)
			require.Zero(t, h3.flags&flagAUTH)
			require.False(t, key.check(&h3, plain))
		})
	}
	// Data and acknowledgements are not authenticated.
	for _, typ := range []pktType{typeDATA, typeACK} {
		b := make([]byte, headerLen)
		h := header{typ: typ, dst: 7}
		h.encode(b)
		require.True(t, key.check(&h, b))
	}
}

func binaryID(b []byte) uint64 {
	var v uint64
	for _, x := range b[:8] {
		v = v<<8 | uint64(x)
	}
	return v
}

// TestSpoofedControlPackets: control packets without a valid MAC, sent
// from the peer's own address with the connection's real ids, are dropped
// and counted, and the connection keeps working both ways.
func TestSpoofedControlPackets(t *testing.T) {
	cases := []struct {
		name     string
		pkt      func(c, s *Conn) []byte
		toClient bool // from the listener's address to the client; else from the client's to the listener
	}{
		{"SYN with a new id and no MAC (the datagram of issue 17)", func(c, s *Conn) []byte {
			return forge(typeSYN, 0, c.localID^0x5a5a, nil)
		}, false},
		{"SYN with a new id and a MAC under another key", func(c, s *Conn) []byte {
			return forge(typeSYN, 0, c.localID^0x5a5a, wrongKey)
		}, false},
		{"SYN with a new id and a corrupted MAC", func(c, s *Conn) []byte {
			return corrupt(forge(typeSYN, 0, c.localID^0x5a5a, testKey))
		}, false},
		{"SYN with the client's id and a corrupted MAC", func(c, s *Conn) []byte {
			return corrupt(forge(typeSYN, 0, c.localID, testKey))
		}, false},
		{"RST with the real ids and no MAC", func(c, s *Conn) []byte {
			return forge(typeRST, s.localID, c.localID, nil)
		}, false},
		{"RST with the real ids and a MAC under another key", func(c, s *Conn) []byte {
			return forge(typeRST, s.localID, c.localID, wrongKey)
		}, false},
		{"RST with the real ids and a corrupted MAC", func(c, s *Conn) []byte {
			return corrupt(forge(typeRST, s.localID, c.localID, testKey))
		}, false},
		{"reflected RST naming the client's id, no MAC", func(c, s *Conn) []byte {
			return forge(typeRST, c.localID, 0, nil)
		}, false},
		{"RST to the client with the real ids and no MAC", func(c, s *Conn) []byte {
			return forge(typeRST, c.localID, s.localID, nil)
		}, true},
		{"RST to the client with the real ids and a corrupted MAC", func(c, s *Conn) []byte {
			return corrupt(forge(typeRST, c.localID, s.localID, testKey))
		}, true},
		{"reflected RST naming the server's id, MAC under another key", func(c, s *Conn) []byte {
			return forge(typeRST, s.localID, 0, wrongKey)
		}, true},
		{"SYNACK to the client with the real ids and a corrupted MAC", func(c, s *Conn) []byte {
			return corrupt(forge(typeSYNACK, c.localID, s.localID, testKey))
		}, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAuthEnv(t, keyedConfig())
			c, s, cli := e.dial(t, "127.0.0.2:0")
			pkt := tc.pkt(c, s)
			const copies = 3
			for range copies {
				if tc.toClient {
					e.toClient(t, cli, pkt)
				} else {
					e.toListener(t, cli, pkt)
				}
			}
			if tc.toClient {
				waitFor(t, "client counts the drops", func() bool { return c.Stats().Unauthenticated == copies })
			} else {
				waitFor(t, "listener counts the drops", func() bool { return e.ln.Stats().Unauthenticated == copies })
			}
			requireFlows(t, c, s, 256<<10, uint64(i))
			st := e.ln.Stats()
			require.EqualValues(t, 1, st.Created)
			require.Zero(t, st.Contested, "no unauthenticated SYN reached the demultiplexer")
			require.Equal(t, 1, st.Conns)
		})
	}
}

// TestReplayedControlPackets: genuine (validly signed) control packets of
// this connection or of an earlier one from the same address, replayed
// later, neither reset nor disturb the connection.
func TestReplayedControlPackets(t *testing.T) {
	const addr = "127.0.0.2:5000"
	cases := []struct {
		name     string
		replay   func(t *testing.T, e *authEnv, old, cur *recorder, c, s *Conn)
		observed func(e *authEnv, c, s *Conn) bool
	}{
		{"this connection's SYN", func(t *testing.T, e *authEnv, old, cur *recorder, c, s *Conn) {
			e.toListener(t, cur, cur.last(t, typeSYN))
		}, func(e *authEnv, c, s *Conn) bool { return s.Stats().StaleHandshakes == 1 }},
		{"this connection's SYNACK", func(t *testing.T, e *authEnv, old, cur *recorder, c, s *Conn) {
			e.toClient(t, cur, e.srv.last(t, typeSYNACK))
		}, func(e *authEnv, c, s *Conn) bool { return c.Stats().StaleHandshakes == 1 }},
		{"an earlier connection's SYN from the same address", func(t *testing.T, e *authEnv, old, cur *recorder, c, s *Conn) {
			e.toListener(t, cur, old.last(t, typeSYN))
		}, func(e *authEnv, c, s *Conn) bool { return e.ln.Stats().Contested == 1 }},
		{"an earlier connection's RST", func(t *testing.T, e *authEnv, old, cur *recorder, c, s *Conn) {
			e.toListener(t, cur, old.last(t, typeRST))
		}, func(e *authEnv, c, s *Conn) bool { return s.Stats().Foreign >= 1 }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newAuthEnv(t, keyedConfig())
			// An earlier connection from the same address, closed while
			// the server had not finished: its client sent a signed RST.
			c1, s1, old := e.dial(t, addr)
			requireFlows(t, c1, s1, 64<<10, 1)
			require.NoError(t, c1.Close())
			_, err := s1.Read(make([]byte, 1))
			require.ErrorIs(t, err, errEOF)
			waitFor(t, "the server's end of the first connection is reset", func() bool {
				_, err := s1.Write([]byte("x"))
				return err != nil
			})
			require.NoError(t, s1.Close())
			waitFor(t, "the listener forgets it", func() bool { return e.ln.Stats().Conns == 0 })
			old.last(t, typeRST)

			c, s, cur := e.dial(t, addr)
			synacks := e.srv.count()
			tc.replay(t, e, old, cur, c, s)
			waitFor(t, "the replay is seen", func() bool { return tc.observed(e, c, s) })
			requireFlows(t, c, s, 256<<10, uint64(10+i))
			st := e.ln.Stats()
			require.EqualValues(t, 2, st.Created, "a replay opened a connection")
			require.Equal(t, 1, st.Conns)
			e.srv.mu.Lock()
			defer e.srv.mu.Unlock()
			for _, p := range e.srv.sent[synacks:] {
				require.NotEqual(t, typeSYNACK, pktType(p[1]), "a replayed SYN was answered")
			}
		})
	}
}

// TestHalfOpen: Accept returns a connection only once its peer has shown
// that it received the SYNACK, by naming the server's fresh id; a SYN that
// nobody follows up (a replay) opens nothing and expires.
func TestHalfOpen(t *testing.T) {
	// fakeClient is a socket that speaks the handshake by hand.
	type fakeClient struct {
		pc  *MemPacketConn
		srv netip.AddrPort
	}
	newFake := func(t *testing.T, e *authEnv, addr string) *fakeClient {
		pc, err := e.nw.Listen(addr)
		require.NoError(t, err)
		t.Cleanup(func() { pc.Close() })
		return &fakeClient{pc, addrPort(e.srv.MemPacketConn)}
	}
	send := func(t *testing.T, f *fakeClient, b []byte) {
		_, err := f.pc.WriteToUDPAddrPort(b, f.srv)
		require.NoError(t, err)
	}
	readSYNACK := func(t *testing.T, f *fakeClient) synInfo {
		t.Helper()
		buf := make([]byte, 2048)
		require.NoError(t, f.pc.SetReadDeadline(time.Now().Add(30*time.Second)))
		for {
			n, _, err := f.pc.ReadFromUDPAddrPort(buf)
			require.NoError(t, err)
			var h header
			p, err := decodePacket(buf[:n], &h)
			require.NoError(t, err)
			if h.typ != typeSYNACK {
				continue
			}
			require.True(t, newAuthKey(testKey).check(&h, buf[:n]), "the SYNACK is signed")
			info, err := decodeSYN(p)
			require.NoError(t, err)
			return info
		}
	}
	requireNoAccept := func(t *testing.T, e *authEnv) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := e.ln.Accept(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "a half-open connection was accepted")
	}

	t.Run("Accept waits for the peer to name the server's id", func(t *testing.T) {
		cfg := keyedConfig()
		cfg.IdleTimeout = time.Minute // the half-open lifetime: not what is tested here
		cfg.Linger = -1               // the fake client never acknowledges a FIN
		e := newAuthEnv(t, cfg)
		f := newFake(t, e, "127.0.0.5:0")
		syn := forge(typeSYN, 0, 77, testKey)
		send(t, f, syn)
		first := readSYNACK(t, f)
		require.Equal(t, 1, e.ln.Stats().HalfOpen)
		requireNoAccept(t, e)

		// A retransmitted SYN is answered again, with the same id.
		send(t, f, syn)
		require.Equal(t, first.srcID, readSYNACK(t, f).srcID)

		// Naming the server's id completes the handshake.
		ack := make([]byte, headerLen)
		h := header{typ: typeACK, dst: first.srcID, wnd: 10}
		h.encode(ack)
		send(t, f, ack)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := e.ln.Accept(ctx)
		require.NoError(t, err)
		defer s.Close()
		st := e.ln.Stats()
		require.Equal(t, 0, st.HalfOpen)
		require.Equal(t, 1, st.Conns)
	})
	t.Run("a SYN nobody follows up opens nothing and expires", func(t *testing.T) {
		cfg := keyedConfig()
		cfg.KeepAlive = 100 * time.Millisecond
		cfg.IdleTimeout = 500 * time.Millisecond
		e := newAuthEnv(t, cfg)
		f := newFake(t, e, "127.0.0.6:0")
		send(t, f, forge(typeSYN, 0, 78, testKey))
		readSYNACK(t, f)
		requireNoAccept(t, e)
		waitFor(t, "the half-open connection expires", func() bool {
			st := e.ln.Stats()
			return st.HalfOpen == 0 && st.Conns == 0
		})
		requireNoAccept(t, e)
	})
}

// TestRestartFromSameAddress: a peer that restarts on the same address
// with a new connection id gets a new connection; the old one ends with
// ErrReset, through an RST that the restarted peer's socket sends (signed,
// with a key) when the listener probes the old connection.
func TestRestartFromSameAddress(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := "no key"
		cfg := testConfig()
		if keyed {
			name, cfg = "key", keyedConfig()
		}
		t.Run(name, func(t *testing.T) {
			const addr = "127.0.0.2:5000"
			e := newAuthEnv(t, cfg)
			c1, s1, cli1 := e.dial(t, addr)
			requireFlows(t, c1, s1, 64<<10, 1)
			// The client crashes: its socket closes, nothing is sent.
			require.NoError(t, cli1.Close())
			_, err := c1.Read(make([]byte, 1))
			require.ErrorIs(t, err, ErrClosed)

			c2, s2, _ := e.dial(t, addr)
			_, err = s1.Read(make([]byte, 1))
			require.ErrorIs(t, err, ErrReset, "the old connection ends")
			requireFlows(t, c2, s2, 256<<10, 2)
			st := e.ln.Stats()
			require.GreaterOrEqual(t, st.Contested, uint64(1))
			require.EqualValues(t, 2, st.Created)
			require.Equal(t, 1, st.Conns)
		})
	}
}

// TestContestedSYNWithoutKey: without a key a SYN is not authenticated, but
// one with a new id from a known address still does not reset the
// connection: the connection is probed, its live peer answers, and it
// keeps working.
func TestContestedSYNWithoutKey(t *testing.T) {
	e := newAuthEnv(t, testConfig())
	c, s, cli := e.dial(t, "127.0.0.2:0")
	for range 3 {
		e.toListener(t, cli, forge(typeSYN, 0, c.localID^1, nil))
	}
	waitFor(t, "contested", func() bool { return e.ln.Stats().Contested == 3 })
	requireFlows(t, c, s, 256<<10, 3)
	require.EqualValues(t, 1, e.ln.Stats().Created)
}

// TestSpoofFlood fires 10,000 random and spoofed datagrams at a listener
// and at a client's socket while a stream flows both ways: random bytes,
// well-formed headers with random ids, control packets with the real ids
// and missing or bad MACs, corrupted and exact replays of the genuine
// handshake, from a stranger's address and from each end's own address.
// Nothing panics, nothing is reset, every byte arrives intact.
func TestSpoofFlood(t *testing.T) {
	e := newAuthEnv(t, keyedConfig())
	c, s, cli := e.dial(t, "127.0.0.2:0")
	stranger, err := e.nw.Listen("127.0.0.66:0")
	require.NoError(t, err)
	defer stranger.Close()
	srvAddr, cliAddr := addrPort(e.srv.MemPacketConn), addrPort(cli.MemPacketConn)
	syn, synack := cli.last(t, typeSYN), e.srv.last(t, typeSYNACK)
	ids := []uint64{c.localID, s.localID}

	r := rand.New(rand.NewPCG(17, 71))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	wellFormed := func() []byte {
		typ := pktType(1 + r.IntN(int(typeMax)))
		switch typ {
		case typeSYN, typeSYNACK, typeRST:
			var key []byte
			if r.IntN(2) == 0 {
				key = wrongKey
			}
			dst := r.Uint64() | 1
			if typ == typeSYN {
				dst = 0
			}
			return forge(typ, dst, r.Uint64()|1, key)
		}
		payload := random(r.IntN(200))
		if typ == typeACK {
			payload = nil
		}
		h := header{typ: typ, dst: r.Uint64() | 1, seq: r.Uint32(), ack: r.Uint32(), wnd: r.Uint32(),
			tsval: r.Uint32(), tsecr: r.Uint32(), plen: uint16(len(payload))}
		b := make([]byte, headerLen+len(payload))
		copy(b[h.encode(b):], payload)
		return b
	}
	realIDs := func() []byte {
		switch r.IntN(4) {
		case 0:
			return corrupt(forge(typeSYN, 0, ids[0], testKey))
		case 1:
			return forge(typeRST, ids[r.IntN(2)], ids[r.IntN(2)], nil)
		case 2:
			return corrupt(forge(typeRST, ids[r.IntN(2)], ids[r.IntN(2)], testKey))
		default:
			return forge(typeSYNACK, ids[0], ids[1], wrongKey)
		}
	}
	genuine := func() []byte {
		p := syn
		if r.IntN(2) == 0 {
			p = synack
		}
		if r.IntN(2) == 0 {
			return p // an exact replay
		}
		q := bytes.Clone(p)
		q[r.IntN(len(q))] ^= byte(1 + r.IntN(255))
		return q
	}

	const total = 10000
	flood := make(chan error, 1)
	go func() {
		for i := range total {
			var b []byte
			switch r.IntN(4) {
			case 0:
				b = random(r.IntN(300))
			case 1:
				b = wellFormed()
			case 2:
				b = realIDs()
			default:
				b = genuine()
			}
			var err error
			switch r.IntN(4) {
			case 0:
				_, err = stranger.WriteToUDPAddrPort(b, srvAddr)
			case 1:
				_, err = cli.MemPacketConn.WriteToUDPAddrPort(b, srvAddr) // spoofed: the client's address
			case 2:
				_, err = stranger.WriteToUDPAddrPort(b, cliAddr)
			default:
				_, err = e.srv.MemPacketConn.WriteToUDPAddrPort(b, cliAddr) // spoofed: the listener's address
			}
			if err != nil {
				flood <- err
				return
			}
			if i%16 == 0 {
				time.Sleep(100 * time.Microsecond) // spread it over the transfer
			}
		}
		flood <- nil
	}()
	// Data flows both ways for as long as the flood lasts, and afterwards.
	var floodErr error
	for round, done := uint64(0), false; !done; round++ {
		requireFlows(t, c, s, 1<<20, 100+2*round)
		select {
		case floodErr = <-flood:
			done = true
		default:
		}
	}
	require.NoError(t, floodErr)
	requireFlows(t, c, s, 64<<10, 1)

	ls, cs, ss := e.ln.Stats(), c.Stats(), s.Stats()
	t.Logf("listener %+v", ls)
	t.Logf("client: malformed %d foreign %d unauthenticated %d stale %d", cs.Malformed, cs.Foreign, cs.Unauthenticated, cs.StaleHandshakes)
	t.Logf("server: malformed %d foreign %d stale %d", ss.Malformed, ss.Foreign, ss.StaleHandshakes)
	// The exact replays of the genuine SYN from the stranger's address
	// may leave one half-open connection, which is never accepted.
	require.Equal(t, 1, ls.Conns-ls.HalfOpen)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = e.ln.Accept(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a spoofed or replayed datagram opened a connection")
	require.NotZero(t, ls.Unauthenticated)
	require.NotZero(t, ls.Malformed)
	require.NotZero(t, cs.Unauthenticated)
	require.NotZero(t, cs.Malformed)
}

// FuzzAuthCheck: no datagram verifies as a control packet unless it was
// signed with the key (the fuzzer cannot forge a MAC), and checking any
// datagram is safe.
func FuzzAuthCheck(f *testing.F) {
	signed := [][]byte{
		forge(typeSYN, 0, 7, testKey),
		forge(typeSYNACK, 7, 8, testKey),
		forge(typeRST, 7, 8, testKey),
		forge(typeRST, 7, 0, testKey),
	}
	for _, p := range signed {
		f.Add(p)
	}
	f.Add(forge(typeSYN, 0, 7, nil))
	f.Add(forge(typeRST, 7, 8, wrongKey))
	key := newAuthKey(testKey)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h header
		if _, err := decodePacket(b, &h); err != nil {
			return
		}
		if !key.check(&h, b) || (h.typ != typeSYN && h.typ != typeSYNACK && h.typ != typeRST) {
			return
		}
		for _, p := range signed {
			if bytes.Equal(p, b) {
				return
			}
		}
		t.Fatalf("a control packet that was never signed verifies: %x", b)
	})
}

var _ net.PacketConn = (*recorder)(nil)

// TestKeyMismatch: a dial to a listener that holds another key, or none,
// fails at once with ErrKeyMismatch (the listener's answer names the SYN's
// fresh id but does not verify), and the listener opens nothing. A client
// without a key gets no answer it could act on.
func TestKeyMismatch(t *testing.T) {
	other := keyedConfig()
	other.Key = wrongKey
	cases := []struct {
		name          string
		client, srv   Config
		want          error
		unauthAtSrv   bool
		timeoutBudget time.Duration // the dial's context: the error must come from the peer's answer
	}{
		{"listener with another key", keyedConfig(), other, ErrKeyMismatch, true, time.Minute},
		{"listener without a key", keyedConfig(), testConfig(), ErrKeyMismatch, false, time.Minute},
		{"client without a key", testConfig(), keyedConfig(), context.DeadlineExceeded, true, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Long idle timeouts: a timeout cannot pass for a refusal.
			tc.client.IdleTimeout, tc.srv.IdleTimeout = time.Minute, time.Minute
			e := newAuthEnv(t, tc.srv)
			pc, err := e.nw.Listen("127.0.0.2:0")
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeoutBudget)
			defer cancel()
			_, err = DialPacketConn(ctx, pc, e.ln.Addr(), tc.client)
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), "rudp: ")
			ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel2()
			_, err = e.ln.Accept(ctx2)
			require.ErrorIs(t, err, context.DeadlineExceeded, "a connection was accepted")
			if tc.unauthAtSrv {
				st := e.ln.Stats()
				require.NotZero(t, st.Unauthenticated)
				require.Zero(t, st.Created)
			}
		})
	}
}
