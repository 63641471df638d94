package transport

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The UDP link delivers every message intact and in order when 5% or 20%
// of the datagrams are dropped (seeded, on both sockets).
func TestUDPLinkUnderLoss(t *testing.T) {
	for _, loss := range []float64{0.05, 0.20} {
		t.Run(fmt.Sprintf("loss=%.0f%%", loss*100), func(t *testing.T) {
			lpc, err := net.ListenPacket("udp", "127.0.0.1:0")
			require.NoError(t, err)
			dpc, err := net.ListenPacket("udp", "127.0.0.1:0")
			require.NoError(t, err)
			ln, err := listenUDPPacket(LossyPacketConn(lpc, loss, 1), testConfig(0))
			require.NoError(t, err)
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			type accepted struct {
				l   Link
				err error
			}
			acc := make(chan accepted, 1)
			go func() {
				l, err := ln.Accept(ctx)
				acc <- accepted{l, err}
			}()
			d, err := dialUDPPacket(ctx, LossyPacketConn(dpc, loss, 2), lpc.LocalAddr(), 0, testConfig(1))
			require.NoError(t, err)
			defer d.Close()
			a := <-acc
			require.NoError(t, a.err)
			defer a.l.Close()

			sizes := []int{0, 1, 1400, 1401, 65536, 1 << 20, 4 << 20}
			if testing.Short() {
				sizes = sizes[:6]
			}
			rng := rand.New(rand.NewPCG(3, uint64(loss*100)))
			msgs := make([][]byte, len(sizes))
			for i, n := range sizes {
				msgs[i] = make([]byte, n)
				for j := range msgs[i] {
					msgs[i][j] = byte(rng.Uint32())
				}
			}
			// Both directions at once.
			errc := make(chan error, 2)
			for _, pair := range [][2]Link{{d, a.l}, {a.l, d}} {
				go func(from, to Link) {
					go func() {
						for i, m := range msgs {
							if err := from.Send(ctx, Header{Type: MsgEager, Seq: uint64(i)}, m); err != nil {
								errc <- err
								return
							}
						}
					}()
					for i, m := range msgs {
						got, err := to.Recv(ctx)
						if err != nil {
							errc <- err
							return
						}
						if got.Header.Seq != uint64(i) || !bytes.Equal(got.Payload, m) {
							errc <- fmt.Errorf("message %d: seq %d, %d bytes: out of order or corrupted", i, got.Header.Seq, len(got.Payload))
							return
						}
					}
					errc <- nil
				}(pair[0], pair[1])
			}
			require.NoError(t, <-errc)
			require.NoError(t, <-errc)
		})
	}
}
