package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProgress: socket links count a large payload's bytes as they
// arrive, before the message is complete, so an upper layer can tell a
// peer that is still sending from one that went silent in the middle.
func TestProgress(t *testing.T) {
	for _, k := range []Kind{KindTCP, KindTLS, KindUDP, KindQUIC} {
		t.Run(k.String(), func(t *testing.T) {
			a, b := pair(t, socketFactory(k), testConfig(0), testConfig(1))
			_, ok := Progress(b)
			require.True(t, ok, "%s links count progress", k)

			// A whole message: every byte past the read buffer counts.
			ctx := testCtx(t)
			const size = 4 << 20
			before, _ := Progress(b)
			go func() { a.Send(ctx, Header{Type: MsgRndvData}, make([]byte, size)) }()
			m, err := b.Recv(ctx)
			require.NoError(t, err)
			require.Len(t, m.Payload, size)
			after, _ := Progress(b)
			require.GreaterOrEqual(t, after-before, uint64(size-readBufferSize))
		})
	}
	// A slow sender: the count grows while the message arrives, byte
	// chunk by byte chunk, long before it is complete.
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	cfg, err := testConfig(1).withDefaults()
	require.NoError(t, err)
	l := newStreamLink(KindTCP, c1, &cfg, 0)
	const size = 1 << 20
	h := Header{Type: MsgRndvData, Version: Version, Job: cfg.JobID, Src: 0, Len: size}
	hdr := make([]byte, HeaderSize)
	PutHeader(hdr, &h)
	release := make(chan struct{})
	go func() {
		c2.Write(hdr)
		c2.Write(make([]byte, 256<<10)) // a first part, then nothing until released
		<-release
		c2.Write(make([]byte, size-256<<10))
	}()
	got := make(chan error, 1)
	go func() {
		_, err := l.Recv(context.Background())
		got <- err
	}()
	for {
		if n, _ := Progress(l); n > 0 {
			break
		}
		select {
		case err := <-got:
			t.Fatalf("the message completed (%v) before the rest was sent", err)
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	require.NoError(t, <-got)
	n, _ := Progress(l)
	require.GreaterOrEqual(t, n, uint64(size-readBufferSize))
	a, _ := pair(t, transports()[0], testConfig(0), testConfig(1))
	_, ok := Progress(a)
	require.False(t, ok, "mem links deliver whole messages and count nothing")
}
