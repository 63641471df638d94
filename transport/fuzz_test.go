package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Fuzz targets for every decoder: the frame header, a stream of frames, and
// both sides of the handshake. Seed corpora live in testdata/fuzz/<name>/;
// regenerate them with HETCOMM_WRITE_CORPUS=1 go test -run TestWriteFuzzCorpus.

const fuzzMax = 1 << 20

// FuzzFrameDecoder feeds arbitrary bytes to the frame reader of a link
// whose peer is rank 0 of job testJob. It must never panic, never return a
// message that breaks the header rules, and never allocate for bytes that
// did not arrive.
func FuzzFrameDecoder(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add(s)
	}
	cfg, _ := testConfig(1).withDefaults()
	cfg.MaxMessage = fuzzMax
	f.Fuzz(func(t *testing.T, data []byte) {
		if h, err := ParseHeader(data, fuzzMax); err == nil {
			var b [HeaderSize]byte
			PutHeader(b[:], &h)
			if !bytes.Equal(b[:], data[:HeaderSize]) {
				t.Fatalf("header does not round-trip: %x vs %x", b, data[:HeaderSize])
			}
		}
		fr := newFrameReader(bytes.NewReader(data), func(time.Time) error { return nil }, &cfg, 0)
		ctx := context.Background()
		consumed := 0
		for {
			m, _, err := fr.read(ctx)
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if m.Header.Version != Version || m.Header.Type == 0 || m.Header.Job != testJob || m.Header.Src != 0 {
				t.Fatalf("invalid header delivered: %+v", m.Header)
			}
			if uint64(len(m.Payload)) != m.Header.Len || m.Header.Len > fuzzMax {
				t.Fatalf("payload of %d bytes for length %d", len(m.Payload), m.Header.Len)
			}
			if cap(m.Payload) > max(allocStep, allocGrow*len(m.Payload)) {
				t.Fatalf("payload capacity %d for %d bytes", cap(m.Payload), len(m.Payload))
			}
			consumed += HeaderSize + len(m.Payload)
			if !bytes.Equal(m.Payload, data[consumed-len(m.Payload):consumed]) {
				t.Fatal("payload differs from the bytes sent")
			}
		}
	})
}

// fuzzConn is a scripted peer: reads come from the fuzz input, writes are
// discarded.
type fuzzConn struct {
	r io.Reader
}

func (c *fuzzConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *fuzzConn) Write(b []byte) (int, error) { return len(b), nil }

// FuzzHandshake plays arbitrary bytes as the peer of both handshake roles.
// A forged MAC is out of reach, so no input may ever authenticate.
func FuzzHandshake(f *testing.F) {
	for _, s := range handshakeSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := hsParams{job: testJob, rank: 1, secret: testSecret, binding: []byte("binding")}
		if peer, err := listenHandshake(&fuzzConn{bytes.NewReader(data)}, p); err == nil {
			t.Fatalf("listener authenticated rank %d from fuzz input", peer)
		} else {
			var ae *AuthError
			if !errors.As(err, &ae) {
				t.Fatalf("untyped error %v", err)
			}
		}
		p.rank = 0
		if peer, err := dialHandshake(&fuzzConn{bytes.NewReader(data)}, p, AnyRank); err == nil {
			t.Fatalf("dialer authenticated rank %d from fuzz input", peer)
		} else {
			var ae *AuthError
			if !errors.As(err, &ae) {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}

func frameSeeds() [][]byte {
	h := Header{Version: Version, Type: MsgEager, Job: testJob, Src: 0, Comm: 1, Tag: 2, Seq: 3}
	one := func(h Header, p []byte) []byte { h.Len = uint64(len(p)); return frameBytes(h, p) }
	big := h
	big.Len = fuzzMax
	huge := h
	huge.Len = 1 << 62
	ctrl := h
	ctrl.Type = MsgControl
	return [][]byte{
		one(h, nil),
		one(h, []byte("hello")),
		append(one(h, []byte("first")), one(ctrl, []byte{0x81, 0xa1, 'k', 0x01})...),
		frameBytes(Header{Version: Version, Type: MsgRndvData, Job: testJob, Len: allocStep + 10}, bytes.Repeat([]byte{7}, 100)),
		frameBytes(big, []byte("short")),
		frameBytes(huge, nil),
		one(Header{Version: 2, Type: MsgEager, Job: testJob}, nil),
		one(Header{Version: Version, Type: MsgEager, Job: testJob + 1}, nil),
		one(Header{Version: Version, Type: MsgEager, Job: testJob, Src: 9}, nil),
		[]byte("hc"),
		{},
	}
}

func handshakeSeeds() [][]byte {
	reply := make([]byte, hsReplyLen)
	putHSPrefix(reply, hsReply)
	copy(reply[8:], []byte{0, 0, 0, 0, 0, 0, 0x5e, 0xed, 0, 0, 0, 1, 0, 0, 0, 0})
	fin := make([]byte, hsFinishLen)
	putHSPrefix(fin, hsFinish)
	acc := make([]byte, hsAcceptLen)
	putHSPrefix(acc, hsAccept)
	return [][]byte{
		append(rawHello(Version, testJob, 0, 1), fin...),
		append(rawHello(Version, testJob, 0, wireAnyRank), fin...),
		rawHello(Version+1, testJob, 0, 1),
		rawHello(Version, testJob+1, 0, 1),
		append(reply, acc...),
		[]byte("HCHS"),
		{},
	}
}

// TestWriteFuzzCorpus writes the seeds above to testdata/fuzz so that they
// are committed as files too.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("HETCOMM_WRITE_CORPUS") == "" {
		t.Skip("set HETCOMM_WRITE_CORPUS=1 to rewrite testdata/fuzz")
	}
	write := func(name string, seeds [][]byte) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("FuzzFrameDecoder", frameSeeds())
	write("FuzzHandshake", handshakeSeeds())
	write("FuzzDecodeControl", controlSeeds())
}
