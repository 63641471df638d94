package transport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/internal/netlab"
	"github.com/hetcomm/hetcomm/internal/roottest"
)

// The rails on real NICs: the dualnic4 netlab topology (4 hosts, eth0 on
// a 50 Mbit/s network, eth1 on a 200 Mbit/s one, shaped with tbf), two of
// its hosts, TCP links bound to each NIC's address. The test re-executes
// this test binary inside the hosts' namespaces (netlab exec), as a
// server on n2 and a client on n1, which moves messages of 8 B to 4 MiB
// over plain links and over RailSets under every policy; the client fails
// on any lost or corrupt message. The test then reports (it does not
// assert: timings are the benchmark's business) the performance
// targets:
//
//   - agg moves 4 MiB at >= 90% of the sum of the two configured rates
//     (TCP through tbf gets about 95.5% of a rate);
//   - mux is never more than 5% slower than the better single rail, at
//     8 B to 4 MiB (the single rails measured through the same rail
//     layer, a RailSet of one link; plain links are reported too).
//
// It runs only with HETCOMM_ROOT_TESTS=1 (as root, with netlab's tools:
// ip, tc, nft, unshare; and the go tool, to build netlab), and is skipped
// with -short and under the race detector. The numbers are logged (go
// test -v).

const (
	railRootJob    = 0x7a11
	railRootPort   = 47310
	railRootServer = "n2"
	railRootClient = "n1"
)

var railRootSecret = []byte("rail-root-test-secret-0123456789")

// railRootSession is what the client announces on each link it opens.
type railRootSession struct {
	ID     int        `json:"id"`     // also the client's rank, so each session has its own router entry
	Mode   string     `json:"mode"`   // "raw" (one plain link) or "rails" (a RailSet)
	Rail   int        `json:"rail"`   // the index of this link among the session's
	Rails  []int      `json:"rails"`  // the NICs used, in order
	Policy RailPolicy `json:"policy"` // for "rails"
	Costs  []RailCost `json:"costs"`  // for "rails"
}

// railRootResult is what the client reports.
type railRootResult struct {
	Costs   []RailCost                    `json:"costs"` // probed, per NIC
	Sizes   []int                         `json:"sizes"`
	Medians map[string]map[int]float64    `json:"medians"` // config -> size -> seconds (message + 4-byte reply)
	P10     map[string]map[int]float64    `json:"p10"`     // 10th percentiles
	Samples map[string]map[int][]float64  `json:"-"`
	Extra   map[string]map[string]float64 `json:"extra,omitempty"`
}

func railRootSkip(t *testing.T) {
	if testing.Short() {
		t.Skip("root netlab test: skipped with -short")
	}
	if railRace {
		t.Skip("root netlab test: it measures the rails, which is meaningless under the race detector (internal/e2e runs the rails on netlab under -race); run it without -race")
	}
	// netlab's tools (ip, tc, nft, unshare), and go to build the netlab
	// command.
	roottest.Require(t, "netlab: builds the dualnic4 lab to measure the rails", append(slices.Clone(netlab.Tools), "go")...)
}

func TestRailRootDualNIC4(t *testing.T) {
	railRootSkip(t)
	dir := t.TempDir()
	netlabCmd := filepath.Join(dir, "netlab")
	out, err := exec.Command("go", "build", "-o", netlabCmd, "../internal/netlab/cmd/netlab").CombinedOutput()
	require.NoError(t, err, "building netlab: %s", out)
	lab := fmt.Sprintf("rr%d", os.Getpid()%100000)
	out, err = exec.Command(netlabCmd, "up", "--name", lab, "../bench/topologies/dualnic4.json").CombinedOutput()
	require.NoError(t, err, "netlab up: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command(netlabCmd, "down", lab).CombinedOutput(); err != nil {
			t.Errorf("netlab down %s: %v: %s", lab, err, out)
		}
	})
	self, err := os.Executable()
	require.NoError(t, err)
	helper := func(ctx context.Context, host, role string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, netlabCmd, "exec", "--lab", lab, host, self, "-test.run=^TestRailRootHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "RAIL_ROOT_ROLE="+role)
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	server := helper(ctx, railRootServer, "server")
	stdin, err := server.StdinPipe() // the server exits when this closes
	require.NoError(t, err)
	var serverOut strings.Builder
	server.Stdout, server.Stderr = &serverOut, &serverOut
	require.NoError(t, server.Start())
	defer func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = server.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = server.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server output:\n%s", serverOut.String())
		}
	}()

	client := helper(ctx, railRootClient, "client")
	out, err = client.CombinedOutput()
	require.NoError(t, err, "client: %s", out)
	var res railRootResult
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RAILROOT "); ok {
			require.NoError(t, json.Unmarshal([]byte(rest), &res))
			found = true
		}
	}
	require.True(t, found, "no result from the client: %s", out)
	report, problems := railRootCheck(&res)
	t.Logf("measured:\n%s", report)
	if len(problems) > 0 {
		t.Logf("performance targets missed in this run (reported, not asserted):\n%s", strings.Join(problems, "\n"))
	}
}

// railRootCheck renders the measurements and lists the criteria missed.
func railRootCheck(res *railRootResult) (string, []string) {
	var b strings.Builder
	var problems []string
	fmt.Fprintf(&b, "probed: slow rail T = %.1f us, B = %.2f MB/s; fast rail T = %.1f us, B = %.2f MB/s\n",
		1e6*res.Costs[0].Latency, res.Costs[0].Bandwidth/1e6, 1e6*res.Costs[1].Latency, res.Costs[1].Bandwidth/1e6)
	configs := []string{"raw-slow", "raw-fast", "single-slow", "single-fast", "mux", "agg", "auto"}
	fmt.Fprintf(&b, "%10s", "bytes")
	for _, c := range configs {
		fmt.Fprintf(&b, " %12s", c)
	}
	fmt.Fprintf(&b, " %9s %9s\n", "mux/best", "mux/raw")
	for _, size := range res.Sizes {
		fmt.Fprintf(&b, "%10d", size)
		for _, c := range configs {
			fmt.Fprintf(&b, " %10.1fus", 1e6*res.Medians[c][size])
		}
		best := math.Min(res.Medians["single-slow"][size], res.Medians["single-fast"][size])
		raw := math.Min(res.Medians["raw-slow"][size], res.Medians["raw-fast"][size])
		mux := res.Medians["mux"][size]
		fmt.Fprintf(&b, " %9.3f %9.3f\n", mux/best, mux/raw)
		if p10 := res.P10; p10 != nil && size <= 4<<10 {
			fmt.Fprintf(&b, "%10s", "p10")
			for _, c := range configs {
				fmt.Fprintf(&b, " %10.1fus", 1e6*p10[c][size])
			}
			fmt.Fprintf(&b, "\n")
		}
		if mux > 1.05*best {
			problems = append(problems, fmt.Sprintf("mux at %d B: %.1f us, better single rail %.1f us (+%.1f%%)",
				size, 1e6*mux, 1e6*best, 100*(mux/best-1)))
		}
	}
	const big = 4 << 20
	sum := (50e6 + 200e6) / 8
	for _, c := range []string{"raw-slow", "raw-fast", "agg", "auto"} {
		rate := big / res.Medians[c][big]
		fmt.Fprintf(&b, "4 MiB %-8s %.2f MB/s = %.1f%% of the sum of the configured rates (%.2f MB/s)\n", c, rate/1e6, 100*rate/sum, sum/1e6)
	}
	measuredSum := big/res.Medians["raw-slow"][big] + big/res.Medians["raw-fast"][big]
	aggRate := big / res.Medians["agg"][big]
	fmt.Fprintf(&b, "agg = %.1f%% of the sum of the two rails measured alone (%.2f MB/s)\n", 100*aggRate/measuredSum, measuredSum/1e6)
	if aggRate < 0.9*sum {
		problems = append(problems, fmt.Sprintf("agg moved 4 MiB at %.2f MB/s, below 90%% of %.2f MB/s", aggRate/1e6, sum/1e6))
	}
	return b.String(), problems
}

// TestRailRootHelper is the server or client process of
// TestRailRootDualNIC4, run inside a netlab host.
func TestRailRootHelper(t *testing.T) {
	role := os.Getenv("RAIL_ROOT_ROLE")
	if role == "" {
		t.Skip("helper process of TestRailRootDualNIC4")
	}
	addrs := strings.Split(os.Getenv("NETLAB_ADDRS"), ",")
	require.Len(t, addrs, 2, "NETLAB_ADDRS")
	switch role {
	case "server":
		railRootServe(t, addrs)
	case "client":
		railRootClientRun(t, addrs)
	}
}

func railRootConfig(rank int, alloc func(Header) []byte) Config {
	c := DefaultConfig()
	c.JobID, c.Rank, c.Secret, c.MaxMessage = railRootJob, rank, railRootSecret, 64<<20
	c.Alloc = alloc
	return c
}

func railRootServe(t *testing.T, addrs []string) {
	// One receive buffer per session (client rank): sessions are
	// ping-pongs, so a message is consumed before the next arrives.
	var bufMu sync.Mutex
	bufs := map[uint32][]byte{}
	rt := NewRailRouter(func(h Header) []byte {
		if h.Type != MsgEager || h.Len < 4096 {
			return nil
		}
		bufMu.Lock()
		defer bufMu.Unlock()
		b := bufs[h.Src]
		if uint64(cap(b)) < h.Len {
			b = make([]byte, 4<<20)
			bufs[h.Src] = b
		}
		return b
	})
	cfg := railRootConfig(1, rt.Alloc)
	var mu sync.Mutex
	pending := map[int][]Link{}
	var wg sync.WaitGroup
	var lns []Listener
	for i, a := range addrs {
		ln, err := Listen(KindTCP, net.JoinHostPort(a, fmt.Sprint(railRootPort+i)), cfg)
		require.NoError(t, err)
		lns = append(lns, ln)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := ln.Accept(context.Background())
				if err != nil {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					m, err := l.Recv(context.Background())
					if err != nil {
						_ = l.Close()
						return
					}
					var s railRootSession
					if err := json.Unmarshal(m.Payload, &s); err != nil {
						_ = l.Close()
						return
					}
					if s.Mode == "raw" {
						railRootEcho(l)
						return
					}
					mu.Lock()
					ls := pending[s.ID]
					if ls == nil {
						ls = make([]Link, len(s.Rails))
						pending[s.ID] = ls
					}
					ls[s.Rail] = l
					full := !slices.Contains(ls, nil)
					if full {
						delete(pending, s.ID)
					}
					mu.Unlock()
					if !full {
						return
					}
					rs, err := NewRailSet(ls, RailConfig{RailModel: RailModel{Costs: s.Costs, Policy: s.Policy}, Router: rt, MaxMessage: 64 << 20})
					if err != nil {
						fmt.Println("server:", err)
						for _, x := range ls {
							_ = x.Close()
						}
						return
					}
					railRootEcho(rs)
				}()
			}
		}()
	}
	fmt.Println("server: listening on", addrs)
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes it
	for _, ln := range lns {
		_ = ln.Close()
	}
	os.Exit(0) // sessions still open end with the process
}

// railRootEcho answers every message with 4 bytes until the link ends.
func railRootEcho(l Link) {
	defer l.Close()
	ack := []byte("ack!")
	for {
		_, err := l.Recv(context.Background())
		if err != nil {
			return
		}
		if err := l.Send(context.Background(), Header{Type: MsgEager}, ack); err != nil {
			return
		}
	}
}

func railRootClientRun(t *testing.T, addrs []string) {
	ctx := context.Background()
	serverAddrs := make([]string, 2)
	for i, a := range addrs {
		ip := net.ParseIP(a).To4()
		ip[3] = 2 // n2 on the same network
		serverAddrs[i] = net.JoinHostPort(ip.String(), fmt.Sprint(railRootPort+i))
	}
	nextID := 100
	dial := func(s railRootSession) Link {
		cfg := railRootConfig(s.ID, nil)
		cfg.LocalAddr = addrs[s.Rails[s.Rail]]
		var l Link
		var err error
		for try := 0; try < 50; try++ { // the server may still be starting
			if l, err = Dial(ctx, KindTCP, serverAddrs[s.Rails[s.Rail]], 1, cfg); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.NoError(t, err)
		b, _ := json.Marshal(s)
		require.NoError(t, l.Send(ctx, Header{Type: MsgControl}, b))
		return l
	}
	raw := func(nic int) Link {
		nextID++
		return dial(railRootSession{ID: nextID, Mode: "raw", Rails: []int{nic}})
	}
	rails := func(nics []int, p RailPolicy, costs []RailCost) Link {
		nextID++
		var links []Link
		var cs []RailCost
		for i, nic := range nics {
			links = append(links, dial(railRootSession{ID: nextID, Mode: "rails", Rail: i, Rails: nics, Policy: p, Costs: pick(costs, nics)}))
			cs = append(cs, costs[nic])
		}
		rs, err := NewRailSet(links, RailConfig{RailModel: RailModel{Costs: cs, Policy: p}, MaxMessage: 64 << 20})
		require.NoError(t, err)
		return rs
	}
	payload := make([]byte, 4<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	pingpong := func(l Link, size int) float64 {
		start := time.Now()
		require.NoError(t, l.Send(ctx, Header{Type: MsgEager}, payload[:size]))
		m, err := l.Recv(ctx)
		require.NoError(t, err)
		require.Len(t, m.Payload, 4)
		return time.Since(start).Seconds()
	}

	// Probe each NIC on a plain link: T from 8-byte round trips, B from
	// 4 MiB transfers.
	res := railRootResult{Medians: map[string]map[int]float64{}, Samples: map[string]map[int][]float64{}}
	probes := []Link{raw(0), raw(1)}
	for nic, l := range probes {
		var small, big []float64
		for range 100 {
			small = append(small, pingpong(l, 8))
		}
		for range 5 {
			big = append(big, pingpong(l, 4<<20))
		}
		rtt := slices.Min(small)
		tb := median(big)
		res.Costs = append(res.Costs, RailCost{Latency: rtt / 2, Bandwidth: float64(4<<20) / (tb - rtt)})
		t.Logf("nic %d: rtt %.1f us, 4 MiB in %.1f ms", nic, 1e6*rtt, 1e3*tb)
	}
	configs := map[string]Link{
		"raw-slow":    probes[0],
		"raw-fast":    probes[1],
		"single-slow": rails([]int{0}, RailSingle, res.Costs),
		"single-fast": rails([]int{1}, RailSingle, res.Costs),
		"mux":         rails([]int{0, 1}, RailMux, res.Costs),
		"agg":         rails([]int{0, 1}, RailAgg, res.Costs),
		"auto":        rails([]int{0, 1}, RailAuto, res.Costs),
	}
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	sort.Strings(names)
	res.Sizes = []int{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20}
	record := func(n string, size int, x float64) {
		if res.Samples[n] == nil {
			res.Samples[n] = map[int][]float64{}
		}
		res.Samples[n][size] = append(res.Samples[n][size], x)
	}
	for _, size := range res.Sizes {
		if size <= 4<<10 {
			// Small messages fit in tbf's bucket: alternate the
			// configurations message by message, so that machine load
			// weighs on all alike.
			for _, n := range names {
				pingpong(configs[n], size)
			}
			for r := range 1000 {
				for i := range names {
					n := names[(i+r)%len(names)]
					record(n, size, pingpong(configs[n], size))
				}
			}
			continue
		}
		// Larger messages: steady state. A message after an idle rail
		// leaves at line rate until tbf's bucket (2 ms of traffic, at
		// least 16 kB) is empty, so each configuration runs in blocks of
		// back-to-back messages and the first ones of a block are
		// dropped; blocks of the configurations alternate.
		blocks, warm, keep := 5, 2, 3
		switch {
		case size >= 4<<20:
			blocks, warm, keep = 7, 0, 1
		case size >= 1<<20:
			blocks, warm, keep = 5, 1, 2
		}
		for b := range blocks {
			for i := range names {
				n := names[(i+b)%len(names)]
				for k := range warm + keep {
					x := pingpong(configs[n], size)
					if k >= warm {
						record(n, size, x)
					}
				}
			}
		}
	}
	res.P10 = map[string]map[int]float64{}
	for n, bySize := range res.Samples {
		res.Medians[n] = map[int]float64{}
		res.P10[n] = map[int]float64{}
		for size, xs := range bySize {
			res.Medians[n][size] = median(xs)
			s := slices.Sorted(slices.Values(xs))
			res.P10[n][size] = s[len(s)/10]
		}
	}
	for _, n := range names {
		if rs, ok := configs[n].(*RailSet); ok {
			st := rs.Stats()
			if res.Extra == nil {
				res.Extra = map[string]map[string]float64{}
			}
			res.Extra[n] = map[string]float64{}
			for _, s := range st {
				res.Extra[n][fmt.Sprintf("rail%d_bytes", s.Rail)] = float64(s.Bytes)
			}
		}
		_ = configs[n].Close()
	}
	b, err := json.Marshal(res)
	require.NoError(t, err)
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "RAILROOT %s\n", b)
	require.NoError(t, w.Flush())
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func pick(costs []RailCost, nics []int) []RailCost {
	out := make([]RailCost, len(nics))
	for i, n := range nics {
		out[i] = costs[n]
	}
	return out
}
