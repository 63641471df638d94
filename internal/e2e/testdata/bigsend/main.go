// Command bigsend is a test program for the stopped-peer and launcher
// tests: rank 0 sends rank 1 one large message (-mib MiB) and rank 1
// receives it, or every rank just sleeps (-sleep). It prints "ready" once
// the world has formed, and on failure the error, then exits with status
// 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hetcomm/hetcomm/comm"
)

func main() {
	mib := flag.Int("mib", 256, "message size in MiB")
	sleep := flag.Duration("sleep", 0, "instead of sending, sleep this long once the world has formed")
	panicRank := flag.Int("panic", -1, "instead of sending, this rank panics (its Close deferred) and the others wait in a Barrier")
	flag.Parse()
	ctx := context.Background()
	c, err := comm.Init(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bigsend:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println("ready")
	if *panicRank >= 0 {
		if c.Rank() == *panicRank {
			panic(fmt.Sprintf("rank %d fails on purpose", c.Rank()))
		}
		if err := c.Barrier(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "bigsend: rank %d: %v\n", c.Rank(), err)
			os.Exit(1)
		}
		return
	}
	if *sleep > 0 {
		time.Sleep(*sleep)
		return
	}
	buf := make([]byte, *mib<<20)
	if c.Rank() == 0 {
		err = c.Send(ctx, 1, 7, buf)
	} else {
		_, _, err = c.RecvInto(ctx, buf, 0, 7)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bigsend: rank %d: %v\n", c.Rank(), err)
		os.Exit(1)
	}
}
