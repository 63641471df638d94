package rudp

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHeaderRoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		h       header
		payload []byte
	}{
		{"syn", header{typ: typeSYN, tsval: 7, wnd: 100}, nil},
		{"authenticated syn", header{typ: typeSYN, flags: flagAUTH, tsval: 7, wnd: 100}, nil},
		{"authenticated synack", header{typ: typeSYNACK, flags: flagAUTH, dst: 3}, nil},
		{"authenticated rst", header{typ: typeRST, flags: flagAUTH, dst: 5}, make([]byte, rstAuthPayload)},
		{"data", header{typ: typeDATA, dst: 0xdeadbeefcafe, seq: 1, ack: 2, wnd: 3, tsval: 4, tsecr: 5}, []byte("hello")},
		{"data fin", header{typ: typeDATA, flags: flagFIN, dst: 1, seq: 1<<32 - 1}, nil},
		{"ack sack", header{typ: typeACK, dst: 9, ack: 10, nsack: 3, sack: [maxSACKBlocks]sackBlock{{12, 14}, {20, 21}, {1<<32 - 2, 3}}}, nil},
		{"ping", header{typ: typeACK, flags: flagPING, dst: 9}, nil},
		{"rst", header{typ: typeRST, dst: 5}, nil},
		{"max sack", header{typ: typeACK, dst: 1, nsack: maxSACKBlocks, sack: func() (s [maxSACKBlocks]sackBlock) {
			for i := range s {
				s[i] = sackBlock{uint32(10 * i), uint32(10*i + 5)}
			}
			return
		}()}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			payload := tc.payload
			if h.typ == typeSYN || h.typ == typeSYNACK {
				payload = make([]byte, synPayload)
				if h.flags&flagAUTH != 0 {
					payload = make([]byte, synPayload+tagLen) // the MAC is not checked here
				}
				encodeSYN(payload, synInfo{srcID: 42, maxPacket: 1400})
			}
			h.plen = uint16(len(payload))
			b := make([]byte, encodedLen(int(h.nsack))+len(payload))
			n := h.encode(b)
			copy(b[n:], payload)
			var got header
			p, err := decodePacket(b, &got)
			require.NoError(t, err)
			require.Equal(t, h, got)
			require.True(t, bytes.Equal(payload, p))
			if h.typ == typeSYN {
				info, err := decodeSYN(p)
				require.NoError(t, err)
				require.Equal(t, synInfo{srcID: 42, maxPacket: 1400}, info)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good := func() []byte {
		h := header{typ: typeDATA, dst: 1, plen: 3, nsack: 1, sack: [maxSACKBlocks]sackBlock{{5, 6}}}
		b := make([]byte, encodedLen(1)+3)
		h.encode(b)
		return b
	}
	var h header
	_, err := decodePacket(good(), &h)
	require.NoError(t, err)
	cases := []struct {
		name string
		mod  func([]byte) []byte
		want error
	}{
		{"empty", func(b []byte) []byte { return nil }, errShort},
		{"short", func(b []byte) []byte { return b[:20] }, errShort},
		{"version", func(b []byte) []byte { b[0] = 2; return b }, errVersion},
		{"type 0", func(b []byte) []byte { b[1] = 0; return b }, errType},
		{"type 99", func(b []byte) []byte { b[1] = 99; return b }, errType},
		{"flags", func(b []byte) []byte { b[2] = 0x80; return b }, errFlags},
		{"ping on data", func(b []byte) []byte { b[2] = flagPING; return b }, errFlags},
		{"nsack 17", func(b []byte) []byte { b[3] = 17; return b }, errSACKCount},
		{"nsack beyond end", func(b []byte) []byte { b[3] = 5; return b }, errShort},
		{"reserved", func(b []byte) []byte { b[35] = 1; return b }, errReserved},
		{"truncated payload", func(b []byte) []byte { return b[:len(b)-1] }, errLength},
		{"extra bytes", func(b []byte) []byte { return append(b, 0) }, errLength},
		{"empty sack block", func(b []byte) []byte { b[headerLen+7] = 5; return b }, errSACKRange},
		{"zero dst", func(b []byte) []byte { clear(b[4:12]); return b }, errSYN},
		{"auth on data", func(b []byte) []byte { b[2] = flagAUTH; return b }, errFlags},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodePacket(tc.mod(good()), &h)
			require.ErrorIs(t, err, tc.want)
		})
	}
	// Handshake payloads.
	syn := make([]byte, synPayload)
	_, err = decodeSYN(syn)
	require.ErrorIs(t, err, errSYN, "zero source id")
	encodeSYN(syn, synInfo{srcID: 1, maxPacket: 100})
	_, err = decodeSYN(syn)
	require.ErrorIs(t, err, errSYN, "packet size below the minimum")
	_, err = decodeSYN(syn[:5])
	require.ErrorIs(t, err, errSYN)

	// Authenticated control packets: the payload must have the length the
	// AUTH flag announces.
	ctrl := []struct {
		name string
		pkt  []byte
		mod  func([]byte) []byte
		want error
	}{
		{"SYN with AUTH but no MAC", forge(typeSYN, 0, 1, nil), func(b []byte) []byte { b[2] = flagAUTH; return b }, errSYN},
		{"SYN with a MAC but no AUTH", forge(typeSYN, 0, 1, testKey), func(b []byte) []byte { b[2] = 0; return b }, errSYN},
		{"SYN with a short MAC", forge(typeSYN, 0, 1, testKey), func(b []byte) []byte {
			b = b[:len(b)-1]
			b[33]--
			return b
		}, errSYN},
		{"RST with AUTH but no payload", forge(typeRST, 1, 2, nil), func(b []byte) []byte { b[2] = flagAUTH; return b }, errLength},
		{"RST with a payload but no AUTH", forge(typeRST, 1, 2, testKey), func(b []byte) []byte { b[2] = 0; return b }, errLength},
		{"RST with another flag", forge(typeRST, 1, 2, testKey), func(b []byte) []byte { b[2] |= flagFIN; return b }, errFlags},
	}
	for _, tc := range ctrl {
		t.Run(tc.name, func(t *testing.T) {
			var h header
			_, err := decodePacket(tc.pkt, &h)
			require.NoError(t, err)
			_, err = decodePacket(tc.mod(tc.pkt), &h)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestUnwrap(t *testing.T) {
	cases := []struct {
		v   uint32
		ref uint64
		out uint64
		ok  bool
	}{
		{5, 0, 5, true},
		{0, 5, 0, true},
		{1<<32 - 1, 0, 0, false}, // before the stream start
		{3, 1<<32 - 2, 1<<32 + 3, true},
		{1<<32 - 2, 1<<32 + 3, 1<<32 - 2, true},
		{10, 5 << 32, 5<<32 + 10, true},
	}
	for _, tc := range cases {
		got, ok := unwrap(tc.v, tc.ref)
		require.Equal(t, tc.ok, ok, "%+v", tc)
		if ok {
			require.Equal(t, tc.out, got, "%+v", tc)
		}
	}
}

// FuzzDecodePacket checks that the decoder never panics, that whatever it
// accepts re-encodes to the same bytes, and that handing any datagram to a
// connection's receive path is safe.
func FuzzDecodePacket(f *testing.F) {
	seed := func(h header, payload []byte) {
		h.plen = uint16(len(payload))
		b := make([]byte, encodedLen(int(h.nsack))+len(payload))
		copy(b[h.encode(b):], payload)
		f.Add(b)
	}
	syn := make([]byte, synPayload)
	encodeSYN(syn, synInfo{srcID: 7, maxPacket: 1400})
	seed(header{typ: typeSYN}, syn)
	seed(header{typ: typeSYNACK, dst: 7}, syn)
	seed(header{typ: typeDATA, dst: 7, seq: 1, ack: 1, wnd: 10}, []byte("data"))
	seed(header{typ: typeDATA, flags: flagFIN, dst: 7, seq: 2}, nil)
	seed(header{typ: typeACK, dst: 7, ack: 3, nsack: 2, sack: [maxSACKBlocks]sackBlock{{5, 7}, {9, 10}}}, nil)
	seed(header{typ: typeACK, flags: flagPING, dst: 7}, nil)
	seed(header{typ: typeRST, dst: 7}, nil)
	f.Add(forge(typeSYN, 0, 7, testKey))
	f.Add(forge(typeSYNACK, 7, 8, testKey))
	f.Add(forge(typeRST, 7, 8, testKey))
	f.Add([]byte{})
	f.Add([]byte{1, 3, 0, 0})

	f.Fuzz(func(t *testing.T, b []byte) {
		var h header
		p, err := decodePacket(b, &h)
		if err != nil {
			return
		}
		out := make([]byte, len(b))
		n := h.encode(out)
		copy(out[n:], p)
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, out)
		}
		if h.typ == typeSYN || h.typ == typeSYNACK {
			_, _ = decodeSYN(p)
		}
		// Feed it to an established connection (no socket: a discarding
		// endpoint) with its id patched in, so the state machine sees it.
		c := fuzzConn()
		h.dst = c.localID
		pb := getBuf(len(b))
		copy(pb.b, p)
		c.handlePacket(&h, pb.b[:len(p)], pb)
		c.teardown(ErrClosed, false)
	})
}

// nullEP discards everything.
type nullEP struct{}

func (nullEP) write([]byte, netipAddrPort) error { return nil }
func (nullEP) detach(*Conn)                      {}
func (nullEP) wait()                             {}

func fuzzConn() *Conn {
	cfg := DefaultConfig().resolved()
	cfg.RecvBuffer = 1 << 20
	c := newConn(cfg, nullEP{}, nil, nil, netipAddrPort{}, false)
	c.localID, c.peerID = 1, 2
	c.setPacketSize(1400)
	c.state = stateEstablished
	c.snd.peerEdge = 100
	// Something to acknowledge.
	for range 5 {
		s := newSegment(dataOff + 10)
		s.n = 10
		c.enqueueLocked(s)
	}
	c.flush()
	return c
}

// FuzzConnPackets feeds a sequence of datagrams (each prefixed by a one-byte
// length, header fields patched to this connection) to one connection and
// reads whatever it delivers: the state machine must never panic, never
// deliver more than was sent in order, and keep its invariants.
func FuzzConnPackets(f *testing.F) {
	mk := func(hs ...header) []byte {
		var out []byte
		for _, h := range hs {
			b := make([]byte, encodedLen(int(h.nsack))+int(h.plen))
			h.encode(b)
			out = append(out, byte(len(b)))
			out = append(out, b...)
		}
		return out
	}
	f.Add(mk(header{typ: typeDATA, dst: 1, seq: 0, plen: 3}, header{typ: typeDATA, dst: 1, seq: 2, plen: 1}, header{typ: typeDATA, dst: 1, seq: 1, plen: 2}))
	f.Add(mk(header{typ: typeACK, dst: 1, ack: 3, nsack: 1, sack: [maxSACKBlocks]sackBlock{{4, 5}}}, header{typ: typeACK, dst: 1, ack: 5}))
	f.Add(mk(header{typ: typeDATA, flags: flagFIN, dst: 1, seq: 0}, header{typ: typeDATA, dst: 1, seq: 1, plen: 4}))
	f.Add(mk(header{typ: typeACK, flags: flagPING, dst: 1}, header{typ: typeRST, dst: 1}))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := fuzzConn()
		defer c.teardown(ErrClosed, false)
		buf := make([]byte, 4096)
		for len(in) > 0 {
			n := min(int(in[0]), len(in)-1)
			dgram := in[1 : 1+n]
			in = in[1+n:]
			if len(dgram) >= headerLen {
				// Patch the destination id so the packet reaches the state
				// machine, keeping everything else as fuzzed.
				dgram[0] = protoVersion
				dgram[4], dgram[5], dgram[6], dgram[7], dgram[8], dgram[9], dgram[10], dgram[11] = 0, 0, 0, 0, 0, 0, 0, 1
			}
			var h header
			p, err := decodePacket(dgram, &h)
			if err != nil {
				continue
			}
			pb := getBuf(len(p))
			copy(pb.b, p)
			c.handlePacket(&h, pb.b[:len(p)], pb)
			c.mu.Lock()
			if c.rcv.readable > c.cfg.RecvBuffer+smallBufSize || c.snd.una > c.snd.nxt || c.snd.nxt > c.snd.end || c.snd.inflight < 0 {
				c.mu.Unlock()
				t.Fatalf("invariant broken: readable %d una %d nxt %d end %d inflight %d", c.rcv.readable, c.snd.una, c.snd.nxt, c.snd.end, c.snd.inflight)
			}
			readable := c.rcv.readable
			c.mu.Unlock()
			if readable > 0 {
				_, _ = c.Read(buf)
			}
		}
	})
}
