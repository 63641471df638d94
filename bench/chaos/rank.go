package chaos

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/comm"
)

// event is one line a rank prints on its stdout (JSON), and what the
// harness reads back.
type event struct {
	Ev   string `json:"ev"` // ready, wrong, error, done, concurrent; exit (made by the harness)
	Rank int    `json:"rank"`
	T    int64  `json:"t"` // wall clock, Unix nanoseconds
	N    int    `json:"n,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// An error, classified.
	Err        string `json:"err,omitempty"`
	RankErr    bool   `json:"rank_err,omitempty"` // a *comm.RankError
	Blame      int    `json:"blame"`              // its Rank, or -1
	Failed     bool   `json:"failed,omitempty"`   // matches comm.ErrRankFailed
	Concurrent bool   `json:"concurrent,omitempty"`
	Mismatch   bool   `json:"mismatch,omitempty"`
	Timeout    bool   `json:"timeout,omitempty"`
	// Next (mismatch): the mismatched call returned nil and the error
	// came from the rank's next collective.
	Next bool `json:"next,omitempty"`
	// concurrent: how many calls returned correct data, wrong data, and
	// the errors seen (one classified event each).
	OK     int     `json:"ok,omitempty"`
	Wrong  int     `json:"wrong,omitempty"`
	Errors []event `json:"errors,omitempty"`
	// exit (harness): the exit status and the end of stderr.
	Code   int    `json:"code,omitempty"`
	Stderr string `json:"stderr,omitempty"`
}

// classify fills an event from err.
func classify(ev event, err error) event {
	ev.Err = err.Error()
	ev.Blame = -1
	var re *comm.RankError
	if errors.As(err, &re) {
		ev.RankErr, ev.Blame = true, re.Rank
	}
	ev.Failed = errors.Is(err, comm.ErrRankFailed)
	ev.Concurrent = errors.Is(err, comm.ErrConcurrent)
	ev.Mismatch = errors.Is(err, comm.ErrMismatch)
	ev.Timeout = errors.Is(err, context.DeadlineExceeded)
	return ev
}

// reporter prints events, one JSON line each.
type reporter struct {
	mu   sync.Mutex
	w    io.Writer
	rank int
}

func (r *reporter) emit(ev event) {
	ev.Rank = r.rank
	if ev.T == 0 {
		ev.T = time.Now().UnixNano()
	}
	if ev.Err == "" {
		ev.Blame = -1
	}
	b, _ := json.Marshal(ev)
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, "%s\n", b)
}

// fill writes the pattern of seed into b: word i is a hash of seed and i.
func fill(b []byte, seed uint64) {
	var w [8]byte
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], mix(seed, uint64(i)))
	}
	if i < len(b) {
		binary.LittleEndian.PutUint64(w[:], mix(seed, uint64(i)))
		copy(b[i:], w[:])
	}
}

// check reports whether b holds the pattern of seed (n bytes).
func check(b []byte, seed uint64, n int) bool {
	if len(b) != n {
		return false
	}
	var w [8]byte
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != mix(seed, uint64(i)) {
			return false
		}
	}
	if i < len(b) {
		binary.LittleEndian.PutUint64(w[:], mix(seed, uint64(i)))
		for k := i; k < len(b); k++ {
			if b[k] != w[k-i] {
				return false
			}
		}
	}
	return true
}

// mix is splitmix64 of seed and i.
func mix(seed, i uint64) uint64 {
	z := seed*0x9e3779b97f4a7c15 + i + 0x632be59bd9b4e5d
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// blockSize is the size of the Alltoallv block from src to dst in
// iteration it: between base/2 and base, varied.
func blockSize(base, it, src, dst int) int {
	return base/2 + ((src*7+dst*13+it*5)%9)*base/16
}

func seedOf(tag, it, a, b int) uint64 {
	return uint64(tag)<<56 ^ uint64(it)<<24 ^ uint64(a)<<12 ^ uint64(b)
}

// RankCommand is the hidden "chaos-rank" command: one rank of a chaos
// trial, started by the chaos command with the HETCOMM_* variables. It
// prints JSON events on stdout (ready, wrong, error, done) and exits 1
// after an error.
func RankCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaos-rank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	op := fs.String("op", "alltoallv", "alltoallv, bcast, send, concurrent or mismatch")
	size := fs.Int("size", 256<<10, "bytes: the base Alltoallv block, the Bcast message or the Send message")
	iters := fs.Int("iters", 0, "iterations (0: until an error, or until rank 0 reads \"stop\" on stdin)")
	sender := fs.Int("sender", 0, "send: the rank that sends (the other receives)")
	kind := fs.String("kind", "", "mismatch: allreduce-len, bcast-root or bcast-alltoallv")
	odd := fs.Int("odd", 1, "mismatch: the rank whose call differs")
	linger := fs.Duration("linger", 0, "after the last event, stay alive this long (the harness ends the rank)")
	if code, ok := bench.ParseFlags(fs, "chaos-rank", args, false, stderr); !ok {
		return code
	}
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(stderr, "chaos-rank: init:", err)
		return bench.ExitError
	}
	rep := &reporter{w: stdout, rank: c.Rank()}
	// Concurrent and mismatched collectives break the communicator they
	// run on, on every rank, even where the Barrier below still runs:
	// they get their own.
	work := c
	if *op == "concurrent" || *op == "mismatch" {
		if work, err = c.Dup(ctx); err != nil {
			rep.emit(classify(event{Ev: "error", Msg: "dup"}, err))
			return bench.ExitError
		}
	}
	if err := c.Barrier(ctx); err != nil {
		rep.emit(classify(event{Ev: "error", Msg: "barrier after init"}, err))
		return bench.ExitError
	}
	rep.emit(event{Ev: "ready"})
	end := func(code int) int {
		if *linger > 0 {
			time.Sleep(*linger)
		}
		if code == 0 {
			c.Close()
		}
		return code
	}
	var stop atomic.Bool
	if c.Rank() == 0 {
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if sc.Text() == "stop" {
					stop.Store(true)
				}
			}
		}()
	}
	switch *op {
	case "alltoallv":
		n, err := loopAlltoallv(ctx, c, rep, *size, *iters, &stop)
		if err != nil {
			rep.emit(classify(event{Ev: "error", N: n}, err))
			return end(bench.ExitError)
		}
		rep.emit(event{Ev: "done", N: n})
	case "bcast":
		n, err := loopBcast(ctx, c, rep, *size, *iters)
		if err != nil {
			rep.emit(classify(event{Ev: "error", N: n}, err))
			return end(bench.ExitError)
		}
		rep.emit(event{Ev: "done", N: n})
	case "send":
		n, err := loopSend(ctx, c, rep, *size, *iters, *sender)
		if err != nil {
			rep.emit(classify(event{Ev: "error", N: n}, err))
			return end(bench.ExitError)
		}
		rep.emit(event{Ev: "done", N: n})
	case "concurrent":
		rep.emit(concurrent(ctx, work, *size, max(*iters, 1)))
		return end(bench.ExitOK)
	case "mismatch":
		start := time.Now()
		err := mismatch(ctx, work, *kind, *odd)
		next := false
		if err == nil {
			// A rank whose part of the call needs nothing back (a Bcast
			// root whose data went eagerly, a Gather sender) may return
			// nil from a mismatched call; its communicator must break,
			// and its next collective fail with the mismatch (see
			// comm.ErrMismatch). The others return at once with their
			// error, so this Barrier ends only by that break.
			err, next = work.Barrier(ctx), true
		}
		if err != nil {
			ev := classify(event{Ev: "error", N: int(time.Since(start).Microseconds())}, err)
			ev.Next = next
			rep.emit(ev)
			return end(bench.ExitError)
		}
		rep.emit(event{Ev: "done", N: int(time.Since(start).Microseconds())})
		return end(bench.ExitOK)
	default:
		fmt.Fprintf(stderr, "chaos-rank: unknown -op %q\n", *op)
		return bench.ExitUsage
	}
	return end(bench.ExitOK)
}

// loopAlltoallv runs Alltoallv with checked blocks of varied sizes. Each
// block starts with a flag byte: 1 in rank 0's blocks once it was told to
// stop, so every rank stops after the same iteration.
func loopAlltoallv(ctx context.Context, c *comm.Comm, rep *reporter, base, iters int, stop *atomic.Bool) (int, error) {
	n, me := c.Size(), c.Rank()
	for it := 0; iters == 0 || it < iters; it++ {
		flagByte := byte(0)
		if stop.Load() {
			flagByte = 1
		}
		send := make([][]byte, n)
		for dst := range send {
			b := make([]byte, 1+blockSize(base, it, me, dst))
			b[0] = flagByte
			fill(b[1:], seedOf(1, it, me, dst))
			send[dst] = b
		}
		recv, err := c.Alltoallv(ctx, send)
		if err != nil {
			return it, err
		}
		stopping := false
		for src, b := range recv {
			if len(b) < 1 || !check(b[1:], seedOf(1, it, src, me), blockSize(base, it, src, me)) {
				rep.emit(event{Ev: "wrong", N: it, Msg: fmt.Sprintf("alltoallv iteration %d: the block from rank %d (%d bytes) is wrong", it, src, len(b))})
				continue
			}
			stopping = stopping || b[0] == 1
		}
		if stopping {
			return it + 1, nil
		}
	}
	return iters, nil
}

// loopBcast runs Bcast from a root that changes every iteration.
func loopBcast(ctx context.Context, c *comm.Comm, rep *reporter, size, iters int) (int, error) {
	n, me := c.Size(), c.Rank()
	buf := make([]byte, size)
	for it := 0; iters == 0 || it < iters; it++ {
		root := it % n
		var data []byte
		if me == root {
			fill(buf, seedOf(2, it, root, 0))
			data = buf
		}
		got, err := c.Bcast(ctx, root, data)
		if err != nil {
			return it, err
		}
		if !check(got, seedOf(2, it, root, 0), size) {
			rep.emit(event{Ev: "wrong", N: it, Msg: fmt.Sprintf("bcast iteration %d from rank %d: %d bytes, wrong", it, root, len(got))})
		}
	}
	return iters, nil
}

// loopSend sends one large message after another from sender to the
// other rank of a world of two.
func loopSend(ctx context.Context, c *comm.Comm, rep *reporter, size, iters, sender int) (int, error) {
	if c.Size() != 2 {
		return 0, fmt.Errorf("send needs 2 ranks, not %d", c.Size())
	}
	buf := make([]byte, size)
	for it := 0; iters == 0 || it < iters; it++ {
		if c.Rank() == sender {
			fill(buf, seedOf(3, it, 0, 0))
			if err := c.Send(ctx, 1-sender, 7, buf); err != nil {
				return it, err
			}
			continue
		}
		got, _, err := c.RecvInto(ctx, buf, sender, 7)
		if err != nil {
			return it, err
		}
		if !check(got, seedOf(3, it, 0, 0), size) {
			rep.emit(event{Ev: "wrong", N: it, Msg: fmt.Sprintf("send iteration %d: %d bytes, wrong", it, len(got))})
		}
	}
	return iters, nil
}

// concurrent runs two goroutines of collectives on the same communicator:
// Alltoallv in one, Alltoallv and Allreduce in turn in the other. Each
// result is checked; each goroutine stops at its first error.
func concurrent(ctx context.Context, c *comm.Comm, base, iters int) event {
	n, me := c.Size(), c.Rank()
	var mu sync.Mutex
	ev := event{Ev: "concurrent"}
	record := func(ok bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			ev.Errors = append(ev.Errors, classify(event{}, err))
		case ok:
			ev.OK++
		default:
			ev.Wrong++
		}
	}
	a2a := func(tag, it int) error {
		send := make([][]byte, n)
		for dst := range send {
			send[dst] = make([]byte, blockSize(base, it, me, dst))
			fill(send[dst], seedOf(tag, it, me, dst))
		}
		recv, err := c.Alltoallv(ctx, send)
		if err != nil {
			return err
		}
		ok := true
		for src, b := range recv {
			ok = ok && check(b, seedOf(tag, it, src, me), blockSize(base, it, src, me))
		}
		record(ok, nil)
		return nil
	}
	allreduce := func(it int) error {
		v := make([]int64, 64)
		for j := range v {
			v[j] = int64(me*1000 + it + j)
		}
		got, err := comm.Allreduce(ctx, c, v, comm.Sum[int64])
		if err != nil {
			return err
		}
		ok := len(got) == len(v)
		for j := 0; ok && j < len(got); j++ {
			ok = got[j] == int64(1000*n*(n-1)/2+n*(it+j))
		}
		record(ok, nil)
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for it := range iters {
			if err := a2a(4, it); err != nil {
				record(false, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for it := range iters {
			var err error
			if it%2 == 0 {
				err = a2a(5, it)
			} else {
				err = allreduce(it)
			}
			if err != nil {
				record(false, err)
				return
			}
		}
	}()
	wg.Wait()
	return ev
}

// mismatch makes rank odd call something else than the others.
func mismatch(ctx context.Context, c *comm.Comm, kind string, odd int) error {
	me := c.Rank()
	switch kind {
	case "allreduce-len":
		v := make([]float64, 1000)
		if me == odd {
			v = make([]float64, 1001)
		}
		_, err := comm.Allreduce(ctx, c, v, comm.Sum[float64])
		return err
	case "bcast-root":
		root := 0
		if me == odd {
			root = 1
			if odd == 1 {
				root = 2
			}
		}
		data := make([]byte, 100<<10)
		_, err := c.Bcast(ctx, root, data)
		return err
	case "bcast-alltoallv":
		if me == odd {
			_, err := c.Bcast(ctx, 0, make([]byte, 100<<10))
			return err
		}
		send := make([][]byte, c.Size())
		for i := range send {
			send[i] = make([]byte, 1000)
		}
		_, err := c.Alltoallv(ctx, send)
		return err
	}
	return fmt.Errorf("unknown mismatch kind %q", kind)
}
