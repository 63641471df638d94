package taskrun_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
	"github.com/hetcomm/hetcomm/taskmap/taskrun"
	"github.com/hetcomm/hetcomm/transport"
)

// A fan-out, fan-in graph of typed tasks run on three ranks by the CD
// hybrid remapper. In a real program each rank is a process started by
// hetrun and calls comm.Init(ctx, nil); here three ranks share one
// process over comm's in-memory network.
func Example() {
	const ranks = 3
	netw := transport.NewMemNetwork(1)
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			ctx := context.Background()
			c, err := comm.Init(ctx, &comm.Config{Network: netw, Bootstrap: &bootstrap.Bootstrap{
				Rank: r, Size: ranks, Coord: "coord", Job: "example", Transport: "mem",
				Secret: []byte("an example secret of 32 bytes..."), Timeout: 10 * time.Second}})
			if err != nil {
				panic(err)
			}
			defer c.Close()

			// Every rank declares the same graph: split a vector into 6
			// parts, square each part, sum everything.
			g := taskrun.NewGraph()
			const parts = 6
			var squares []taskrun.ItemID
			for k := 0; k < parts; k++ {
				part := g.Item(fmt.Sprintf("part%d", k), 8*100)
				sq := g.Item(fmt.Sprintf("square%d", k), 8*100)
				g.Add(taskrun.Task{Name: fmt.Sprintf("make%d", k), Kind: "make", Work: 100, Out: []taskrun.ItemID{part},
					Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
						v := make([]float64, 100)
						for i := range v {
							v[i] = float64(k*100 + i)
						}
						return [][]float64{v}, nil
					})})
				g.Add(taskrun.Task{Name: fmt.Sprintf("square%d", k), Kind: "square", Work: 100, In: []taskrun.ItemID{part}, Out: []taskrun.ItemID{sq},
					Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
						v := make([]float64, len(in[0]))
						for i, x := range in[0] {
							v[i] = x * x
						}
						return [][]float64{v}, nil
					})})
				squares = append(squares, sq)
			}
			total := g.Item("total", 8)
			g.Add(taskrun.Task{Name: "sum", Kind: "sum", Work: 600, In: squares, Out: []taskrun.ItemID{total},
				Run: taskrun.Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
					s := 0.0
					for _, v := range in {
						for _, x := range v {
							s += x
						}
					}
					return [][]float64{{s}}, nil
				})})

			res, err := taskrun.Run(ctx, c, g, &taskrun.Config{Algorithm: taskmap.CD, Collect: []taskrun.ItemID{total}})
			if err != nil {
				panic(err)
			}
			if c.Rank() == 0 {
				sum, _ := comm.FromBytes[float64](res.Items[total])
				n := 0
				for _, k := range res.TasksPerRank {
					n += k
				}
				fmt.Printf("sum of squares of 0..599: %.0f\n", sum[0])
				fmt.Printf("%d tasks on %d ranks, %d remappings (one per block after the first)\n", n, ranks, res.Remaps)
			}
		}(r)
	}
	wg.Wait()
	// Output:
	// sum of squares of 0..599: 71820100
	// 13 tasks on 3 ranks, 2 remappings (one per block after the first)
}
