// Command pingpong measures point-to-point latency and bandwidth between
// ranks 0 and 1, printed like the OSU micro-benchmarks.
//
//	hetrun -n 2 ./examples/pingpong
//	hetrun -n 2 --transport quic ./examples/pingpong -max 4194304
//
// Latency is half the round-trip time of a message and its echo, averaged
// over the timed iterations after a warm-up. Bandwidth is measured with a
// window of messages in flight, acknowledged by one small message.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	minSize := flag.Int("min", 1, "smallest message, bytes")
	maxSize := flag.Int("max", 4<<20, "largest message, bytes")
	iters := flag.Int("iters", 1000, "timed iterations for small messages (fewer for large ones)")
	warmup := flag.Int("warmup", 100, "untimed iterations first")
	window := flag.Int("window", 16, "messages in flight for the bandwidth test")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n 2 pingpong [flags]\n\nOSU-style latency and bandwidth between ranks 0 and 1.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("pingpong: %v", err)
	}
	defer c.Close()
	if c.Size() < 2 {
		log.Fatalf("pingpong: needs 2 ranks (hetrun -n 2)")
	}
	me := c.Rank()
	if me > 1 {
		if err := c.Barrier(ctx); err != nil {
			log.Fatal(err)
		}
		return
	}
	peer := 1 - me
	if me == 0 {
		fmt.Printf("# hetcomm pingpong\n# %-10s %16s %16s\n", "Size", "Avg Latency(us)", "Bandwidth(MB/s)")
	}
	for size := *minSize; size <= *maxSize; size *= 2 {
		n, w := *iters, *warmup
		if size > 64<<10 {
			n, w = max(10, *iters/20), max(2, *warmup/20)
		}
		msg := make([]byte, size)
		buf := make([]byte, size)
		var elapsed time.Duration
		for i := 0; i < n+w; i++ {
			if i == w {
				if err := c.Barrier(ctx); err != nil {
					log.Fatal(err)
				}
			}
			t0 := time.Now()
			if me == 0 {
				must(c.Send(ctx, peer, 1, msg))
				_, _, err := c.RecvInto(ctx, buf, peer, 1)
				must(err)
			} else {
				_, _, err := c.RecvInto(ctx, buf, peer, 1)
				must(err)
				must(c.Send(ctx, peer, 1, msg))
			}
			if i >= w {
				elapsed += time.Since(t0)
			}
		}
		lat := elapsed.Seconds() / float64(n) / 2 * 1e6

		// Bandwidth: a window of messages, then an acknowledgement.
		rounds := max(4, n/8)
		must(c.Barrier(ctx))
		t0 := time.Now()
		for r := 0; r < rounds; r++ {
			if me == 0 {
				reqs := make([]*comm.Request, *window)
				for k := range reqs {
					reqs[k] = c.Isend(ctx, peer, 2, msg)
				}
				for _, rq := range reqs {
					_, err := rq.Wait(ctx)
					must(err)
				}
				_, _, err := c.Recv(ctx, peer, 3)
				must(err)
			} else {
				for k := 0; k < *window; k++ {
					_, _, err := c.RecvInto(ctx, buf, peer, 2)
					must(err)
				}
				must(c.Send(ctx, peer, 3, nil))
			}
		}
		bw := float64(size) * float64(*window*rounds) / time.Since(t0).Seconds() / 1e6
		if me == 0 {
			fmt.Printf("  %-10d %16.2f %16.2f\n", size, lat, bw)
		}
	}
	must(c.Barrier(ctx))
}

func must(err error) {
	if err != nil {
		log.Fatalf("pingpong: %v", err)
	}
}
