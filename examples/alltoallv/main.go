// Command alltoallv exchanges messages of random sizes between every pair
// of ranks with Alltoallv and verifies every byte.
//
//	hetrun -n 4 ./examples/alltoallv -seed 1 -max 1048576 -iters 3 -algo openshop
//
// Each rank sends, to each rank, a message whose size (0..max bytes) and
// content are a function of (seed, source, destination, iteration), so
// every receiver can check what it got. Rank 0 prints one summary line.
// The exit status is 0 only when every rank verified everything.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	seed := flag.Int64("seed", 1, "seed of the message sizes and contents")
	maxBytes := flag.Int("max", 1<<20, "largest message, in bytes")
	iters := flag.Int("iters", 3, "number of exchanges")
	algo := flag.String("algo", "auto", "Alltoallv planner: caterpillar, maxmatch, minmatch, greedy, openshop, auto or naive")
	failRank := flag.Int("fail-rank", -1, "this rank exits with status 3 just before the first exchange (a failure test)")
	timeline := flag.String("timeline", "", "write the last exchange's predicted and measured timelines (JSON) here, from rank 0")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: hetrun -n N alltoallv [flags]\n\nExchanges verified messages of random sizes with Alltoallv.\n\nFlags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	log.SetFlags(0)
	if *maxBytes < 0 || *iters < 1 {
		log.Fatalf("alltoallv: -max must be >= 0 and -iters >= 1")
	}

	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		log.Fatalf("alltoallv: %v", err)
	}
	defer c.Close()
	me, n := c.Rank(), c.Size()
	if me == *failRank {
		fmt.Fprintf(os.Stderr, "alltoallv: rank %d failing on purpose (-fail-rank)\n", me)
		os.Exit(3)
	}

	bad := int64(0)
	var total int64           // bytes sent to other ranks (not the copy to itself)
	var elapsed time.Duration // in Alltoallv, not in preparing or checking
	for it := 0; it < *iters; it++ {
		send := make([][]byte, n)
		for dst := range send {
			send[dst] = content(*seed, me, dst, it, *maxBytes)
			if dst != me {
				total += int64(len(send[dst]))
			}
		}
		start := time.Now()
		recv, err := c.AlltoallvWith(ctx, send, comm.AlltoallvOptions{Algorithm: collective.Algorithm(*algo)})
		elapsed += time.Since(start)
		if err != nil {
			log.Fatalf("alltoallv: rank %d: %v", me, err)
		}
		for src := range recv {
			want := content(*seed, src, me, it, *maxBytes)
			if string(recv[src]) != string(want) {
				bad++
				fmt.Fprintf(os.Stderr, "alltoallv: rank %d: iteration %d: %d bytes from rank %d are wrong (want %d bytes)\n", me, it, len(recv[src]), src, len(want))
			}
		}
	}
	sums, err := comm.Allreduce(ctx, c, []int64{bad, total}, comm.Sum)
	if err != nil {
		log.Fatalf("alltoallv: rank %d: %v", me, err)
	}
	slowest, err := comm.Allreduce(ctx, c, []float64{elapsed.Seconds()}, comm.Max)
	if err != nil {
		log.Fatalf("alltoallv: rank %d: %v", me, err)
	}
	// The last exchange as planned and as it ran (collective).
	var pred, meas *collective.Plan
	if *iters > 0 && *algo != "naive" {
		if pred, meas, err = c.Timeline(ctx); err != nil {
			log.Fatalf("alltoallv: rank %d: timeline: %v", me, err)
		}
		if me == 0 && *timeline != "" {
			if err := writeTimeline(*timeline, pred, meas); err != nil {
				log.Fatalf("alltoallv: %v", err)
			}
		}
	}
	if me == 0 {
		status := "OK"
		if sums[0] != 0 {
			status = fmt.Sprintf("FAILED (%d wrong messages)", sums[0])
		}
		chose := *algo
		if last := c.LastAlgorithm(); *iters > 0 && last != "" && string(last) != *algo {
			chose += " (chose " + string(last) + ")"
		}
		fmt.Printf("alltoallv: %s: %d ranks, %d iterations, algo %s, %.1f MB sent between ranks in %.3f s of Alltoallv\n",
			status, n, *iters, chose, float64(sums[1])/1e6, slowest[0])
		if pred != nil && meas != nil && pred.LowerBound > 0 {
			fmt.Printf("alltoallv: last exchange (%s): measured %.4f s, predicted %.4f s, lower bound %.4f s (measured / lower bound %.2f)\n",
				pred.Algorithm, meas.Predicted, pred.Predicted, pred.LowerBound, meas.Predicted/pred.LowerBound)
		}
	}
	if sums[0] != 0 {
		c.Close()
		os.Exit(1)
	}
}

// content returns the message src sends dst in iteration it: its size and
// every byte depend only on the arguments.
func content(seed int64, src, dst, it, maxBytes int) []byte {
	x := uint64(seed)*0x9E3779B97F4A7C15 ^ uint64(src)*0xBF58476D1CE4E5B9 ^ uint64(dst)*0x94D049BB133111EB ^ uint64(it+1)*0x2545F4914F6CDD1D
	next := func() uint64 {
		x ^= x >> 30
		x *= 0xBF58476D1CE4E5B9
		x ^= x >> 27
		x *= 0x94D049BB133111EB
		x ^= x >> 31
		return x
	}
	size := 0
	if maxBytes > 0 {
		size = int(next() % uint64(maxBytes+1))
	}
	b := make([]byte, size)
	for i := 0; i < size; i += 8 {
		v := next()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
