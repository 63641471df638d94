package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// FuzzRailFrame feeds arbitrary bytes to the rail header decoder. It must
// never panic, accept only what re-encodes to the same bytes, and never
// accept a part that does not fit its message.
func FuzzRailFrame(f *testing.F) {
	seeds := []railHead{
		{Kind: railKindPart, Seq: 3, Off: 0, Len: 1 << 20, Total: 3 << 20, Type: MsgRndvData, Parts: 2, CRC: 7},
		{Kind: railKindAck, Ack: 12},
		{Kind: railKindBye, Rail: 1},
		{Kind: railKindSkip, Seq: 9},
	}
	for _, h := range seeds {
		b := make([]byte, railHeadSize)
		putRailHead(b, &h)
		f.Add(b)
	}
	inl := []byte("inline part")
	h := railHead{Kind: railKindPart, Flags: railFlagInline, Len: uint64(len(inl)), Total: uint64(len(inl)), Type: MsgEager, Parts: 1, CRC: crc32c(inl)}
	b := make([]byte, railHeadSize+len(inl))
	putRailHead(b, &h)
	copy(b[railHeadSize:], inl)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		h, inline, err := decodeRailFrame(data, fuzzMax)
		if err != nil {
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		var b [railHeadSize]byte
		putRailHead(b[:], &h)
		if !bytes.Equal(b[:], data[:railHeadSize]) {
			t.Fatalf("rail header does not round-trip")
		}
		if h.Kind == railKindPart {
			if h.Off+h.Len > h.Total || h.Total > fuzzMax || h.Parts == 0 || h.Parts > MaxRails || h.Type == 0 {
				t.Fatalf("accepted an impossible part: %+v", h)
			}
			if h.Flags&railFlagInline != 0 && (uint64(len(inline)) != h.Len || crc32c(inline) != h.CRC) {
				t.Fatalf("inline bytes do not match the header")
			}
		}
	})
}

// scriptLink is a Link whose Recv plays a list of messages, then reports
// that the peer closed. What is sent to it is dropped. If alloc is set,
// MsgRailData payloads go through it, as a socket link's reads do.
type scriptLink struct {
	msgs  []Message
	alloc func(Header) []byte
	once  sync.Once
	quit  chan struct{}
}

func (l *scriptLink) Send(context.Context, Header, []byte) error {
	select {
	case <-l.quit:
		return ErrClosed
	default:
		return nil
	}
}

func (l *scriptLink) Recv(ctx context.Context) (Message, error) {
	select {
	case <-l.quit:
		return Message{}, ErrClosed
	default:
	}
	if len(l.msgs) == 0 {
		return Message{}, ErrPeerClosed
	}
	m := l.msgs[0]
	l.msgs = l.msgs[1:]
	if l.alloc != nil {
		if b := l.alloc(m.Header); cap(b) >= len(m.Payload) {
			b = b[:len(m.Payload)]
			copy(b, m.Payload)
			m.Payload = b
		}
	}
	return m, nil
}
func (l *scriptLink) Peer() int            { return 0 }
func (l *scriptLink) Kind() Kind           { return KindMem }
func (l *scriptLink) LocalAddr() net.Addr  { return memAddr("script") }
func (l *scriptLink) RemoteAddr() net.Addr { return memAddr("script-peer") }
func (l *scriptLink) Close() error {
	l.once.Do(func() { close(l.quit) })
	return nil
}

// fuzzByte is message seq's byte at offset off: every part of every
// message in the fuzz scripts carries these bytes.
func fuzzByte(seq, off uint64) byte { return byte(seq*31 + off*7 + off>>8) }

// FuzzRailReassembly plays frames built from the fuzz input to a receiving
// RailSet of two rails: part headers with arbitrary offsets, lengths,
// totals and part counts (right or wrong checksums), data frames, skips,
// acknowledgements and raw garbage. It must never panic or hang, and every
// message it delivers must be exactly the bytes its parts carried.
func FuzzRailReassembly(f *testing.F) {
	// two parts of a 40-byte message over both rails, then a skip
	f.Add([]byte{0, 0, 0, 0, 0, 0, 20, 0, 40, 2, 0, 0, 1, 1, 0, 0, 20, 0, 20, 0, 40, 2, 0, 0, 0, 2, 1})
	f.Add([]byte{1, 0, 5, 0, 0, 0, 9, 0, 9, 1, 1, 0, 1, 1, 5, 0, 0, 0, 9, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		scripts := [2][]Message{}
		outer := Header{Version: Version, Job: testJob}
		for len(data) >= 3 {
			rail, op := int(data[0]&1), data[1]%5
			data = data[2:]
			take := func(n int) uint64 {
				var v uint64
				for i := 0; i < n; i++ {
					v <<= 8
					if len(data) > 0 {
						v |= uint64(data[0])
						data = data[1:]
					}
				}
				return v
			}
			switch op {
			case 0, 1: // a part header (0: inline if small), or its data frame (1)
				seq, off, n, total := take(1)%8, take(2)%300, take(2)%300, take(2)%300
				parts, mode := uint32(take(1)%4), take(1)
				content := make([]byte, n)
				for i := range content {
					content[i] = fuzzByte(seq, off+uint64(i))
				}
				sum := crc32c(content)
				if mode&1 != 0 {
					sum ^= 1
				}
				if op == 1 {
					h := railDataHeader(rail, seq, off)
					h.Version, h.Job, h.Len = Version, testJob, n
					scripts[rail] = append(scripts[rail], Message{Header: h, Payload: content})
					continue
				}
				rh := railHead{Kind: railKindPart, Rail: uint16(rail), CRC: sum, Seq: seq, Off: off, Len: n,
					Total: total, Type: MsgEager, USeq: seq, Parts: parts}
				p := make([]byte, railHeadSize)
				if mode&2 == 0 && n <= railInlineMax {
					rh.Flags |= railFlagInline
					p = append(p, content...)
				}
				putRailHead(p, &rh)
				h := outer
				h.Type, h.Flags, h.Seq, h.Len = MsgRail, uint16(rail), seq, uint64(len(p))
				scripts[rail] = append(scripts[rail], Message{Header: h, Payload: p})
			case 2, 3: // skip, ack
				rh := railHead{Kind: railKindSkip, Rail: uint16(rail), Seq: take(1) % 8}
				if op == 3 {
					rh = railHead{Kind: railKindAck, Rail: uint16(rail), Ack: take(1) % 2}
				}
				p := make([]byte, railHeadSize)
				putRailHead(p, &rh)
				h := outer
				h.Type, h.Flags, h.Len = MsgRail, uint16(rail), railHeadSize
				scripts[rail] = append(scripts[rail], Message{Header: h, Payload: p})
			default: // garbage
				n := take(1) % 100
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(take(1))
				}
				h := outer
				h.Type, h.Flags, h.Len = MsgRail, uint16(rail), n
				scripts[rail] = append(scripts[rail], Message{Header: h, Payload: p})
			}
		}
		buf := make([]byte, 512)
		rt := NewRailRouter(func(h Header) []byte {
			if h.Seq%2 == 0 {
				return buf // even messages land in the upper layer's buffer
			}
			return nil
		})
		links := []Link{
			&scriptLink{msgs: scripts[0], alloc: rt.Alloc, quit: make(chan struct{})},
			&scriptLink{msgs: scripts[1], alloc: rt.Alloc, quit: make(chan struct{})},
		}
		rs, err := NewRailSet(links, RailConfig{RailModel: RailModel{Costs: issueCosts}, Router: rt, MaxMessage: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for {
			m, err := rs.Recv(ctx)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatal("the rail set hangs")
				}
				if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if uint64(len(m.Payload)) != m.Header.Len {
				t.Fatalf("payload of %d bytes for length %d", len(m.Payload), m.Header.Len)
			}
			for i, c := range m.Payload {
				if c != fuzzByte(m.Header.Seq, uint64(i)) {
					t.Fatalf("message %d byte %d: %d, want %d (%x)", m.Header.Seq, i, c, fuzzByte(m.Header.Seq, uint64(i)),
						binary.BigEndian.AppendUint64(nil, m.Header.Seq))
				}
			}
		}
	})
}
