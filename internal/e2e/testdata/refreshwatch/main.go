// Command refreshwatch idles with the background model refresher on (run
// it under hetrun --refresh) until every link from rank -src has moved
// away from the start-up model by more than the drift threshold, or -for
// has passed, and then for -settle more, so that a first proposal that was
// off can be corrected by the next one. Every -tick it runs a tiny
// Alltoallv, which moves no bulk data (so it observes no rate) but spreads
// the refresher's proposals.
// Rank 0 prints when the links had moved (seconds after start-up, -1 if
// never) and the start-up and final bandwidth matrices as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	src := flag.Int("src", 1, "the rank whose outgoing links are watched")
	share := flag.Float64("share", 0.2, "Config.RefreshShare")
	wait := flag.Duration("for", time.Minute, "give up after this long")
	tick := flag.Duration("tick", 500*time.Millisecond, "interval of the tiny Alltoallv")
	settle := flag.Duration("settle", 5*time.Second, "keep the refresher running this long after the links moved")
	flag.Parse()
	if err := run(*src, *share, *wait, *tick, *settle); err != nil {
		fmt.Fprintln(os.Stderr, "refreshwatch:", err)
		os.Exit(1)
	}
}

func run(src int, share float64, wait, tick, settle time.Duration) error {
	ctx := context.Background()
	c, err := comm.Init(ctx, &comm.Config{RefreshShare: share})
	if err != nil {
		return err
	}
	defer c.Close()
	n := c.Size()
	if src < 0 || src >= n {
		return fmt.Errorf("-src %d: the world has %d ranks", src, n)
	}
	initial := c.Model()
	start := time.Now()
	var moved time.Time // when every watched link had moved; zero before
	for {
		time.Sleep(tick)
		send := make([][]byte, n)
		for j := range send {
			send[j] = []byte{byte(c.Rank())}
		}
		if _, err := c.Alltoallv(ctx, send); err != nil {
			return err
		}
		// Every rank has the same model now; only the clock differs, so
		// rank 0 decides whether to go on.
		m := c.Model()
		done := byte(1)
		for j := 0; j < n; j++ {
			if j != src && m.Bandwidth[src][j] > 0.7*initial.Bandwidth[src][j] {
				done = 0
			}
		}
		if done == 1 && c.Rank() == 0 {
			if moved.IsZero() {
				moved = time.Now()
			}
			if time.Since(moved) < settle {
				done = 0
			}
		}
		if time.Since(start) > wait {
			done = 1
		}
		flag, err := c.Bcast(ctx, 0, []byte{done})
		if err != nil {
			return err
		}
		if flag[0] == 1 {
			break
		}
	}
	if c.Rank() == 0 {
		learned := -1.0 // the links never moved
		if !moved.IsZero() {
			learned = moved.Sub(start).Seconds()
		}
		out, err := json.Marshal(map[string]any{
			"seconds": learned,
			"initial": initial.Bandwidth,
			"final":   c.Model().Bandwidth,
		})
		if err != nil {
			return err
		}
		fmt.Println(string(out))
	}
	return nil
}
