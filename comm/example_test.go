package comm_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/netprobe"
	"github.com/hetcomm/hetcomm/transport"
)

// Three ranks in one process (over the in-memory network) exchange
// messages of different sizes with Alltoallv and sum a number.
func Example() {
	const n = 3
	netw := transport.NewMemNetwork(1)
	var wg sync.WaitGroup
	out := make([]string, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx := context.Background()
			c, err := comm.Init(ctx, &comm.Config{
				Bootstrap: &bootstrap.Bootstrap{Rank: r, Size: n, Coord: "coordinator", Secret: []byte("an example job secret"), Transport: "mem", Timeout: 10 * time.Second},
				Network:   netw,
				Probe:     netprobe.ModeOff,
			})
			if err != nil {
				out[r] = err.Error()
				return
			}
			defer c.Close()
			send := make([][]byte, n)
			for dst := range send {
				send[dst] = []byte(fmt.Sprintf("%d->%d", r, dst))
			}
			recv, err := c.Alltoallv(ctx, send)
			if err != nil {
				out[r] = err.Error()
				return
			}
			sum, err := comm.Allreduce(ctx, c, []int{r}, comm.Sum)
			if err != nil {
				out[r] = err.Error()
				return
			}
			out[r] = fmt.Sprintf("rank %d got %q %q %q, sum %d", r, recv[0], recv[1], recv[2], sum[0])
		}(r)
	}
	wg.Wait()
	for _, s := range out {
		fmt.Println(s)
	}
	// Output:
	// rank 0 got "0->0" "1->0" "2->0", sum 3
	// rank 1 got "0->1" "1->1" "2->1", sum 3
	// rank 2 got "0->2" "1->2" "2->2", sum 3
}
