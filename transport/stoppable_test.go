package transport

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRecvStoppable: a stopRecv, called at any time by another goroutine,
// only ever ends recvStoppable's wait for a frame to begin. Frames that
// arrive a few bytes at a time, with pauses in the header and in the
// payload, are read whole and in order however the stops fall, and the
// link works normally afterwards. Only the links listed implement
// stoppableLink.
func TestRecvStoppable(t *testing.T) {
	stoppable := map[string]bool{"mem": true, "mem-shaped": true, "tcp": true, "tls": true, "udp": true}
	for _, f := range transports() {
		t.Run(f.name, func(t *testing.T) {
			a, b := pair(t, f, testConfig(0), testConfig(1))
			sl, ok := b.(stoppableLink)
			require.Equal(t, stoppable[f.name], ok, "implements stoppableLink")
			if !ok {
				return
			}
			sizes := []int{0, 1, HeaderSize, 1000, 20 << 10, 70 << 10}
			const n = 48
			ctx := testCtx(t)

			// The sender writes the frames itself on a stream link, cut
			// into pieces with pauses in between, so that the receiver
			// waits in the middle of frames; a mem link carries whole
			// messages.
			sent := make(chan error, 1)
			go func() {
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range n {
					p := pattern(sizes[i%len(sizes)])
					h := Header{Type: MsgEager, Tag: int32(i)}
					sk, isStream := a.(*streamLink)
					if !isStream {
						if err := a.Send(ctx, h, p); err != nil {
							sent <- err
							return
						}
						time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
						continue
					}
					h.Version, h.Job, h.Src, h.Len = Version, testJob, 0, uint64(len(p))
					frame := make([]byte, HeaderSize+len(p))
					PutHeader(frame, &h)
					copy(frame[HeaderSize:], p)
					cuts := []int{1, HeaderSize / 2, HeaderSize, HeaderSize + len(p)/2, len(frame)}
					at := 0
					for _, c := range cuts {
						if c <= at || c > len(frame) {
							continue
						}
						if _, err := sk.conn.Write(frame[at:c]); err != nil {
							sent <- err
							return
						}
						at = c
						time.Sleep(time.Duration(200+rng.IntN(800)) * time.Microsecond)
					}
				}
				sent <- nil
			}()

			done := make(chan struct{})
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				rng := rand.New(rand.NewPCG(3, 4))
				for {
					select {
					case <-done:
						return
					default:
					}
					sl.stopRecv()
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
			}()
			stops := 0
			for i := 0; i < n; {
				m, err := sl.recvStoppable()
				if errors.Is(err, errRecvStopped) {
					stops++
					continue
				}
				require.NoError(t, err, "frame %d", i)
				require.Equal(t, int32(i), m.Header.Tag)
				require.True(t, bytes.Equal(pattern(sizes[i%len(sizes)]), m.Payload), "frame %d", i)
				i++
			}
			close(done)
			<-stopped
			require.NoError(t, <-sent)
			require.Positive(t, stops)

			// The stops left nothing behind: no deadline, no lost byte.
			// (A stop that found nobody waiting may still stop the next
			// recvStoppable once.)
			require.NoError(t, a.Send(ctx, Header{Type: MsgEager, Tag: -1}, []byte("after")))
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			m, err := b.Recv(rctx)
			require.NoError(t, err)
			require.Equal(t, "after", string(m.Payload))
			require.NoError(t, a.Send(ctx, Header{Type: MsgEager, Tag: -2}, []byte("again")))
			for {
				m, err = sl.recvStoppable()
				if !errors.Is(err, errRecvStopped) {
					break
				}
			}
			require.NoError(t, err)
			require.Equal(t, "again", string(m.Payload))
		})
	}
}

// TestRecvStoppableClose: closing a link ends a recvStoppable that waits,
// with ErrClosed; the peer closing it, with ErrPeerClosed.
func TestRecvStoppableClose(t *testing.T) {
	for _, f := range transports() {
		t.Run(f.name, func(t *testing.T) {
			for _, peer := range []bool{false, true} {
				a, b := pair(t, f, testConfig(0), testConfig(1))
				sl, ok := b.(stoppableLink)
				if !ok {
					return
				}
				got := make(chan error, 1)
				go func() {
					_, err := sl.recvStoppable()
					got <- err
				}()
				time.Sleep(20 * time.Millisecond)
				if peer {
					require.NoError(t, a.Close())
				} else {
					require.NoError(t, b.Close())
				}
				requireEndedByClose(t, got, peer, "recvStoppable")
			}
		})
	}
}

// requireEndedByClose waits for the error of a receive (what) blocked when
// one end of its link closed: ErrPeerClosed when the peer closed its end
// (peerClosed), ErrClosed when the receiving end itself was closed.
func requireEndedByClose(t *testing.T, got <-chan error, peerClosed bool, what string) {
	t.Helper()
	select {
	case err := <-got:
		if peerClosed {
			require.ErrorIs(t, err, ErrPeerClosed)
		} else {
			require.ErrorIs(t, err, ErrClosed)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waits after Close (peer closed: %v)", what, peerClosed)
	}
}
