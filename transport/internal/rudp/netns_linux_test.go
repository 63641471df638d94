//go:build linux

package rudp

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/internal/roottest"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestNetnsLoss runs rudp over real sockets on the loopback interface of a
// fresh network namespace whose nftables input hook drops a random 5% and
// then 20% of UDP datagrams, and checks 16 MiB each way, byte for byte. It
// needs root, ip and nft; it never touches the root namespace.
func TestNetnsLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("network-namespace test skipped with -short")
	}
	roottest.Require(t, "builds a network namespace and drops packets with nftables", "ip", "nft")
	size := 16 << 20
	for _, loss := range []int{5, 20} {
		t.Run(fmt.Sprintf("loss=%d%%", loss), func(t *testing.T) {
			ns := fmt.Sprintf("hetcomm-rudp-%d-%d", os.Getpid(), loss)
			run := func(args ...string) {
				t.Helper()
				out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
				require.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
			}
			run("ip", "netns", "add", ns)
			t.Cleanup(func() {
				if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
					t.Errorf("ip netns del %s: %v: %s", ns, err, out)
				}
			})
			run("ip", "-n", ns, "link", "set", "lo", "up")
			nft := []string{"ip", "netns", "exec", ns, "nft"}
			run(append(nft, "add", "table", "inet", "f")...)
			run(append(nft, "add", "chain", "inet", "f", "in", "{ type filter hook input priority 0; }")...)
			run(append(nft, "add", "rule", "inet", "f", "in", "meta", "l4proto", "udp", "numgen", "random", "mod", "100", "lt", fmt.Sprint(loss), "drop")...)

			srvSock, cliSock := socketsInNetns(t, ns)
			cfg := testConfig()
			cfg.IdleTimeout = 20 * time.Second
			ln, err := ListenPacketConn(srvSock, cfg)
			require.NoError(t, err)
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			accepted := make(chan *Conn, 1)
			go func() {
				s, err := ln.Accept(ctx)
				if err != nil {
					accepted <- nil
					return
				}
				accepted <- s
			}()
			c, err := DialPacketConn(ctx, cliSock, ln.Addr(), cfg)
			require.NoError(t, err)
			defer c.Close()
			s := <-accepted
			require.NotNil(t, s)
			defer s.Close()

			up, down := pattern(uint64(loss), size), pattern(uint64(loss)+1000, size)
			start := time.Now()
			type res struct {
				sum [32]byte
				err error
			}
			recv := func(conn *Conn, seed uint64) chan res {
				ch := make(chan res, 1)
				go func() {
					sum, err := readAllHash(conn, size, seed)
					ch <- res{sum, err}
				}()
				return ch
			}
			upR, downR := recv(s, 1), recv(c, 2)
			errs := make(chan error, 2)
			go func() { errs <- writeChunks(c, up, 3, 4<<20) }()
			go func() { errs <- writeChunks(s, down, 4, 4<<20) }()
			for range 2 {
				require.NoError(t, <-errs)
			}
			r := <-upR
			require.NoError(t, r.err)
			require.Equal(t, sha256.Sum256(up), r.sum, "client->server corrupted")
			r = <-downR
			require.NoError(t, r.err)
			require.Equal(t, sha256.Sum256(down), r.sum, "server->client corrupted")
			el := time.Since(start)
			cs := c.Stats()
			t.Logf("loss %d%%: 2 x %d MiB in %v (%.1f MB/s each way); client: %d data pkts, %d rtx, %d probes, %d timeouts, srtt %v, cwnd %d, packet %d B",
				loss, size>>20, el.Round(time.Millisecond), float64(size)/el.Seconds()/1e6,
				cs.DataPacketsSent, cs.Retransmissions, cs.Probes, cs.Timeouts, cs.SRTT, cs.CongestionWindow, cs.MaxPacketSize)
			require.Greater(t, cs.Retransmissions, uint64(0), "nftables dropped nothing?")
		})
	}
}

// socketsInNetns opens two UDP sockets on 127.0.0.1 inside the namespace ns.
// It switches a locked OS thread into the namespace and lets that thread
// exit afterwards (the goroutine never unlocks it), so no other goroutine
// ever runs in the namespace by accident.
func socketsInNetns(t *testing.T, ns string) (srv, cli *net.UDPConn) {
	t.Helper()
	type result struct {
		srv, cli *net.UDPConn
		err      error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		var r result
		defer func() { ch <- r }()
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			r.err = err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			r.err = fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
		if r.srv, r.err = net.ListenUDP("udp4", lo); r.err != nil {
			return
		}
		if r.cli, r.err = net.ListenUDP("udp4", lo); r.err != nil {
			r.srv.Close()
		}
	}()
	r := <-ch
	require.NoError(t, r.err)
	return r.srv, r.cli
}
