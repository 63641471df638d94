package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/internal/freeport"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// flooder holds idle TCP connections open on addresses: each of its
// goroutines dials, waits until the other side closes, and dials again,
// until stop.
type flooder struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func newFlooder() *flooder { return &flooder{stop: make(chan struct{})} }

// flood opens n connections to addr and returns once all of them were
// established once (or after 20 s), keeping them open (re-dialled when
// closed) until close.
func (f *flooder) flood(addr string, n int) (time.Duration, error) {
	start := time.Now()
	var up atomic.Int64
	done := make(chan struct{})
	for range n {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			first := true
			for {
				select {
				case <-f.stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					select {
					case <-f.stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					continue
				}
				if first {
					first = false
					if up.Add(1) == int64(n) {
						close(done)
					}
				}
				closed := make(chan struct{})
				go func() {
					var b [256]byte
					for {
						if _, err := c.Read(b[:]); err != nil {
							close(closed)
							return
						}
					}
				}()
				select {
				case <-f.stop:
					c.Close()
					<-closed
					return
				case <-closed:
					c.Close()
				}
				select { // an attacker would dial again at once; spare the CPU a little
				case <-f.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}
	select {
	case <-done:
		return time.Since(start), nil
	case <-time.After(20 * time.Second):
		return time.Since(start), fmt.Errorf("only %d of %d connections to %s after 20 s", up.Load(), n, addr)
	}
}

func (f *flooder) close() {
	close(f.stop)
	f.wg.Wait()
}

// floodNetwork is a socket network whose listeners are flooded as soon
// as they listen, before their rank tells anyone where they are.
type floodNetwork struct {
	transport.Network
	f     *flooder
	n     int
	mu    sync.Mutex
	spent map[int]time.Duration // per rank: time spent flooding its listener
	err   error
}

func (fn *floodNetwork) Listen(addr string, cfg transport.Config) (transport.Listener, error) {
	l, err := fn.Network.Listen(addr, cfg)
	if err != nil || fn.n == 0 {
		return l, err
	}
	took, ferr := fn.f.flood(l.Addr().String(), fn.n)
	fn.mu.Lock()
	fn.spent[cfg.Rank] += took
	if ferr != nil && fn.err == nil {
		fn.err = ferr
	}
	fn.mu.Unlock()
	return l, nil
}

// floodStart starts a world of 4 ranks in this process over transport tr
// with n idle connections held open on the coordinator's port and on
// every rank's listener (n = 0: none), and runs a Barrier and a checked
// Alltoallv on it. It returns how long ranks 1 to 3 took in Init (the
// longest), leaving out the time the flood of their own listener took to
// set up.
func floodStart(tr string, n int, deadline time.Duration) (took time.Duration, hang bool, err error) {
	kind, err := transport.ParseKind(tr)
	if err != nil {
		return 0, false, err
	}
	inner, err := transport.NetworkFor(kind)
	if err != nil {
		return 0, false, err
	}
	coord, err := freeport.Loopback()
	if err != nil {
		return 0, false, err
	}
	f := newFlooder()
	defer f.close()
	fn := &floodNetwork{Network: inner, f: f, n: n, spent: map[int]time.Duration{}}
	var sec [16]byte
	_, _ = rand.Read(sec[:])
	secret, job := hex.EncodeToString(sec[:]), "chaos-flood-"+hex.EncodeToString(sec[:4])
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	coordReady := make(chan error, 1)
	go func() {
		if n == 0 {
			coordReady <- nil
			return
		}
		_, err := f.flood(coord, n) // dials until rank 0's coordinator listens
		coordReady <- err
	}()
	const size = 4
	comms := make([]*comm.Comm, size)
	errs := make([]error, size)
	times := make([]time.Duration, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r != 0 {
				if err := <-coordReady; err != nil {
					errs[r] = err
					coordReady <- err
					return
				}
				coordReady <- nil
			}
			b := &bootstrap.Bootstrap{Rank: r, Size: size, Coord: coord, Secret: []byte(secret), Job: job, Transport: tr,
				Timeout: deadline / 2, RailsAuto: "off", Probe: "off"}
			start := time.Now()
			comms[r], errs[r] = comm.Init(ctx, &comm.Config{Bootstrap: b, Network: fn, Probe: netprobe.ModeOff, CPUs: -1})
			times[r] = time.Since(start)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(deadline + 10*time.Second):
		return 0, true, fmt.Errorf("Init did not return %v after the start", deadline+10*time.Second)
	}
	defer func() { // together: a rank's Close waits for its peers' goodbyes
		var cw sync.WaitGroup
		for _, c := range comms {
			if c != nil {
				cw.Add(1)
				go func() { defer cw.Done(); c.Close() }()
			}
		}
		cw.Wait()
	}()
	for r, e := range errs {
		if e != nil {
			return 0, false, fmt.Errorf("rank %d: %w", r, e)
		}
	}
	if fn.err != nil {
		return 0, false, fn.err
	}
	fn.mu.Lock()
	for r := 1; r < size; r++ {
		took = max(took, times[r]-fn.spent[r])
	}
	fn.mu.Unlock()
	// The world works, with the flood still on.
	wrong := make([]string, size)
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[r] = c.Barrier(ctx); errs[r] != nil {
				return
			}
			send := make([][]byte, size)
			for dst := range send {
				send[dst] = make([]byte, blockSize(64<<10, 0, r, dst))
				fill(send[dst], seedOf(6, 0, r, dst))
			}
			recv, err := c.Alltoallv(ctx, send)
			if errs[r] = err; err != nil {
				return
			}
			for src, b := range recv {
				if !check(b, seedOf(6, 0, src, r), blockSize(64<<10, 0, src, r)) {
					wrong[r] = fmt.Sprintf("rank %d: the block from rank %d is wrong", r, src)
				}
			}
		}()
	}
	wg.Wait()
	for r, e := range errs {
		if e != nil {
			return took, ctx.Err() != nil, fmt.Errorf("after Init, rank %d: %w", r, e)
		}
		if wrong[r] != "" {
			return took, false, errWrong(wrong[r])
		}
	}
	return took, false, nil
}

// errWrong reports wrong data.
type errWrong string

func (e errWrong) Error() string { return string(e) }
