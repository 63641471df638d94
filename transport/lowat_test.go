package transport

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lowatStream serves a byte stream in short and long reads and checks, at every
// read, that the receive low-water mark the frame reader set never asks
// for more bytes than what is left of the current frame: a mark above that
// would park the reader until bytes of a message not yet sent arrive.
type lowatStream struct {
	t     *testing.T
	data  []byte
	pos   int
	ends  []int // offset just after each frame
	lowat int   // the mark set; 1 by default
	high  int   // reads made under a mark above 1
	reads int
}

func (s *lowatStream) Read(p []byte) (int, error) {
	if s.pos == len(s.data) {
		return 0, nil
	}
	if s.lowat > 1 {
		s.high++
		end := 0
		for _, e := range s.ends {
			if e > s.pos {
				end = e
				break
			}
		}
		require.LessOrEqual(s.t, s.lowat, end-s.pos, "low-water mark %d at offset %d, %d bytes left in the frame", s.lowat, s.pos, end-s.pos)
	}
	// Short and long reads in turn: a long one may take the rest of a
	// payload at once, under a raised mark.
	short := 40 << 10
	if s.reads++; s.reads%2 == 0 {
		short = 300 << 10
	}
	k := copy(p[:min(len(p), short)], s.data[s.pos:])
	s.pos += k
	return k, nil
}

func TestFrameReaderLowWaterMark(t *testing.T) {
	cfg, err := testConfig(1).withDefaults()
	require.NoError(t, err)
	sizes := []int{1 << 20, 10, 100 << 10, 300 << 10, 0, 70 << 10, 5}
	s := &lowatStream{t: t, lowat: 1}
	var want [][]byte
	for i, n := range sizes {
		h := Header{Version: Version, Type: MsgEager, Job: testJob, Src: 0, Seq: uint64(i), Len: uint64(n)}
		var hb [HeaderSize]byte
		PutHeader(hb[:], &h)
		p := bytes.Repeat([]byte{byte(i + 1)}, n)
		s.data = append(append(s.data, hb[:]...), p...)
		s.ends = append(s.ends, len(s.data))
		want = append(want, p)
	}
	for _, alloc := range []bool{false, true} {
		s.pos, s.high = 0, 0
		c := cfg
		if alloc {
			c.Alloc = func(h Header) []byte { return make([]byte, h.Len) }
		}
		fr := newFrameReader(s, func(time.Time) error { return nil }, &c, 0)
		fr.payload.lowat = func(n int) { s.lowat = n }
		fr.payload.mark = func() int { return 256 << 10 }
		for i := range sizes {
			m, _, err := fr.read(context.Background())
			require.NoError(t, err)
			require.Equal(t, uint64(i), m.Header.Seq)
			require.True(t, bytes.Equal(want[i], m.Payload), "message %d", i)
			require.Equal(t, 1, s.lowat, "the mark is back to its default after message %d", i)
		}
		require.Positive(t, s.high, "large payloads are read under a raised mark (alloc %v)", alloc)
	}
}

// Over a real TCP link with a raised low-water mark, large and small
// messages all arrive intact and in time. Each message waits for the
// previous one's acknowledgement, so the stream never holds more than the
// message being read. (Whether a too-high mark stalls the kernel's reader
// depends on timing; TestFrameReaderLowWaterMark checks the marks
// themselves.)
func TestTCPLinkLowWater(t *testing.T) {
	mark := func() int { return 256 << 10 }
	ca, cb := testConfig(0), testConfig(1)
	ca.LowWater, cb.LowWater = mark, mark
	a, b := pair(t, socketFactory(KindTCP), ca, cb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sizes := []int{1 << 20, 3, 300 << 10, 0, 70 << 10, lowatMin + 1, 8 << 20, 1, 256<<10 + 17, 5}
	errc := make(chan error, 1)
	go func() {
		errc <- func() error {
			for i, n := range sizes {
				if err := a.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, pattern(n)); err != nil {
					return err
				}
				if _, err := a.Recv(ctx); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	for i, n := range sizes {
		m, err := b.Recv(ctx)
		require.NoError(t, err, "message %d (%d bytes)", i, n)
		require.Equal(t, uint64(i), m.Header.Seq)
		require.True(t, bytes.Equal(pattern(n), m.Payload), "%d bytes: payload differs", n)
		require.NoError(t, b.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, nil))
	}
	require.NoError(t, <-errc)
}
