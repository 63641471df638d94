// Command scalecheck runs Alltoallv, Bcast and Allreduce on a large world
// and verifies every result, for issue 15's scale runs. It runs either as
// one rank of a launched job (hetrun -n 64 scalecheck), or with -inproc N
// as a whole world of N ranks in this process (mem transport, over an
// emulated fabric of mixed NICs). Rank 0 prints one line of JSON: how long
// the start took, each operation's time, and memory, goroutines and file
// descriptors per rank. Errors go to stderr and exit with status 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/transport"
)

var started = time.Now()

// Report is what rank 0 prints.
type Report struct {
	Ranks     int                `json:"ranks"`
	InProcess bool               `json:"in_process"`
	StartS    float64            `json:"start_s"` // until every rank is through Init
	OpS       map[string]float64 `json:"op_s"`
	// Memory per rank: in-process, the process's peak resident set over
	// the ranks; otherwise the largest rank's peak resident set.
	MaxRSSMBPerRank    float64 `json:"max_rss_mb_per_rank"`
	GoroutinesPerRank  float64 `json:"goroutines_per_rank"`
	FDsPerRank         float64 `json:"fds_per_rank"`
	AlltoallvBytesEach int     `json:"alltoallv_max_bytes"`
}

func main() {
	inproc := flag.Int("inproc", 0, "run a world of this many ranks in this process (mem transport, emulated fabric) instead of one rank of a launched job")
	maxBytes := flag.Int("max", 1024, "largest Alltoallv message, in bytes")
	bcastBytes := flag.Int("bcast", 64<<10, "Bcast size, in bytes")
	elems := flag.Int("allreduce", 1024, "Allreduce length, in float64s")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here")
	logWarnings := flag.Bool("log", false, "with -inproc: log the ranks' warnings to stderr")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	w := work{maxBytes: *maxBytes, bcastBytes: *bcastBytes, elems: *elems, logWarnings: *logWarnings}
	var rep *Report
	var err error
	if *inproc > 0 {
		rep, err = w.inProcess(*inproc)
	} else {
		rep, err = w.launched()
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "scalecheck:", err)
		os.Exit(1)
	}
	if rep != nil {
		rep.AlltoallvBytesEach = *maxBytes
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
	}
}

type work struct {
	maxBytes, bcastBytes, elems int
	logWarnings                 bool
}

// launched runs one rank of a job started by a launcher.
func (w work) launched() (*Report, error) {
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	startS := time.Since(started).Seconds()
	ops, err := w.run(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", c.Rank(), err)
	}
	// The slowest start and the largest rank.
	mine := []float64{startS, maxRSSMB(), float64(runtime.NumGoroutine()), float64(openFDs())}
	worst, err := comm.Allreduce(ctx, c, mine, comm.Max[float64])
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", c.Rank(), err)
	}
	if c.Rank() != 0 {
		return nil, nil
	}
	return &Report{Ranks: c.Size(), StartS: worst[0], OpS: ops, MaxRSSMBPerRank: worst[1], GoroutinesPerRank: worst[2], FDsPerRank: worst[3]}, nil
}

// inProcess runs a world of n ranks in this process over an emulated
// fabric: every rank's NIC runs at one of five rates (20 to 400 Mbit/s,
// scaled up 40 times so that the run stays short), a pair at the slower
// of its two NICs.
func (w work) inProcess(n int) (*Report, error) {
	dir, err := os.MkdirTemp("", "scalecheck-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	model := filepath.Join(dir, "model.json")
	if err := writeModel(model, n); err != nil {
		return nil, err
	}
	netw := transport.NewMemNetwork(1)
	job := fmt.Sprintf("scalecheck-%d", time.Now().UnixNano())
	comms := make([]*comm.Comm, n)
	errs := make([]error, n)
	t0 := time.Now()
	each(n, func(r int) {
		b := &bootstrap.Bootstrap{Rank: r, Size: n, Coord: "coord", Secret: []byte("scalecheck secret of at least 32 bytes"), Job: job,
			Transport: "mem", Timeout: 60 * time.Second, Emulate: model, Model: model, Probe: "off"}
		// 256 ranks share this process's CPUs (two here, with other jobs
		// beside them): a rank's heartbeats can wait that long for a CPU,
		// which is no sign of a failure in one process.
		cfg := &comm.Config{Bootstrap: b, Network: netw, CacheDir: dir, FailAfter: 30 * time.Second}
		if w.logWarnings {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
		comms[r], errs[r] = comm.Init(context.Background(), cfg)
	})
	startS := time.Since(t0).Seconds()
	defer each(n, func(r int) {
		if comms[r] != nil {
			comms[r].Close()
		}
	})
	for r, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("rank %d: init: %w", r, err)
		}
	}
	ctx := context.Background()
	opsOf := make([]map[string]float64, n)
	each(n, func(r int) { opsOf[r], errs[r] = w.run(ctx, comms[r]) })
	for r, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	ops := map[string]float64{}
	for _, o := range opsOf {
		for k, v := range o {
			ops[k] = max(ops[k], v)
		}
	}
	return &Report{Ranks: n, InProcess: true, StartS: startS, OpS: ops, MaxRSSMBPerRank: maxRSSMB() / float64(n),
		GoroutinesPerRank: float64(runtime.NumGoroutine()) / float64(n), FDsPerRank: float64(openFDs()) / float64(n)}, nil
}

// run runs and verifies each operation once, and returns how long each
// took on this rank.
func (w work) run(ctx context.Context, c *comm.Comm) (map[string]float64, error) {
	ops := map[string]float64{}
	me, n := c.Rank(), c.Size()
	// Alltoallv: rank i sends rank j size(i, j) bytes of pattern(i, j).
	send := make([][]byte, n)
	for j := range send {
		send[j] = pattern(me, j, w.size(me, j))
	}
	t := time.Now()
	got, err := c.Alltoallv(ctx, send)
	if err != nil {
		return nil, err
	}
	ops["alltoallv"] = time.Since(t).Seconds()
	for j := range got {
		if want := pattern(j, me, w.size(j, me)); string(got[j]) != string(want) {
			return nil, fmt.Errorf("alltoallv: wrong message from rank %d (%d bytes, want %d)", j, len(got[j]), len(want))
		}
	}
	// Bcast from the last rank.
	data := make([]byte, w.bcastBytes)
	root := n - 1
	if me == root {
		data = pattern(root, root, w.bcastBytes)
	}
	t = time.Now()
	if data, err = c.Bcast(ctx, root, data); err != nil {
		return nil, err
	}
	ops["bcast"] = time.Since(t).Seconds()
	if string(data) != string(pattern(root, root, w.bcastBytes)) {
		return nil, fmt.Errorf("bcast: wrong data")
	}
	// Allreduce: element k of rank r is r + k; the sum is n(n-1)/2 + n k.
	v := make([]float64, w.elems)
	for k := range v {
		v[k] = float64(me + k)
	}
	t = time.Now()
	sum, err := comm.Allreduce(ctx, c, v, comm.Sum[float64])
	if err != nil {
		return nil, err
	}
	ops["allreduce"] = time.Since(t).Seconds()
	for k, x := range sum {
		if want := float64(n*(n-1)/2 + n*k); x != want {
			return nil, fmt.Errorf("allreduce: element %d is %v, want %v", k, x, want)
		}
	}
	return ops, nil
}

func (w work) size(i, j int) int { return (i*131+j*71)%w.maxBytes + 1 }

func pattern(i, j, n int) []byte {
	b := make([]byte, n)
	for k := range b {
		b[k] = byte(i*7 + j*13 + k)
	}
	return b
}

func writeModel(path string, n int) error {
	rng := rand.New(rand.NewPCG(15, uint64(n)))
	classes := []float64{20e6, 50e6, 100e6, 200e6, 400e6} // bit/s
	nic := make([]float64, n)
	for i := range nic {
		nic[i] = classes[rng.IntN(len(classes))] / 8 * 40
	}
	m := &collective.Model{Latency: collective.Matrix(n, 50e-6), Bandwidth: collective.Matrix(n, 0)}
	for i := range n {
		m.Latency[i][i] = 0
		for j := range n {
			if i != j {
				m.Bandwidth[i][j] = min(nic[i], nic[j])
			}
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func each(n int, f func(r int)) {
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(r) }()
	}
	wg.Wait()
}

// maxRSSMB is this process's peak resident set, in MB.
func maxRSSMB() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // kilobytes on Linux
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
