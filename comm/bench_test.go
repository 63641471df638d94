package comm

import (
	"context"
	"fmt"
	"testing"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

// BenchmarkAlltoallv measures one Alltoallv of 4 in-process ranks over
// loopback sockets, every pair exchanging bytes=N.
func BenchmarkAlltoallv(b *testing.B) {
	for _, tr := range []string{"tcp", "quic"} {
		for _, size := range []int{64 << 10, 1 << 20} {
			for _, algo := range []collective.Algorithm{collective.OpenShop, Naive} {
				b.Run(fmt.Sprintf("transport=%s/bytes=%d/algo=%s", tr, size, algo), func(b *testing.B) {
					comms := startWorld(b, 4, tr, nil)
					sends := make([][][]byte, 4)
					recvs := make([][][]byte, 4)
					for r := range sends {
						sends[r] = make([][]byte, 4)
						recvs[r] = make([][]byte, 4)
						for j := range sends[r] {
							sends[r][j] = make([]byte, size)
							recvs[r][j] = make([]byte, size)
						}
					}
					b.SetBytes(int64(4 * 3 * size))
					ctx := context.Background()
					for b.Loop() {
						onAllRanks(b, comms, func(r int, c *Comm) error {
							_, err := c.AlltoallvWith(ctx, sends[r], AlltoallvOptions{Algorithm: algo, Recv: recvs[r]})
							return err
						})
					}
				})
			}
		}
	}
}

// BenchmarkAllreduce measures one Allreduce (Sum) of float64 vectors of
// bytes=N on 4 in-process ranks over loopback TCP, with each algorithm
// forced and chosen by the model (auto).
func BenchmarkAllreduce(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 1 << 20, 8 << 20} {
		for _, algo := range []collective.Algorithm{collective.AllreduceTree, collective.AllreduceRSAG, collective.Auto} {
			b.Run(fmt.Sprintf("bytes=%d/algo=%s", size, algo), func(b *testing.B) {
				comms := startWorld(b, 4, "tcp", func(c *Config) { c.Allreduce = algo })
				vecs := rankVectors(4, size/8)
				b.SetBytes(int64(size))
				ctx := context.Background()
				for b.Loop() {
					onAllRanks(b, comms, func(r int, c *Comm) error {
						return AllreduceInto(ctx, c, vecs[r], vecs[r], Sum)
					})
				}
			})
		}
	}
}

// BenchmarkBcast measures one Bcast from rank 0 of bytes=N on 4
// in-process ranks over loopback TCP, with each tree forced and chosen
// by the model (auto).
func BenchmarkBcast(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 1 << 20, 8 << 20} {
		for _, algo := range []collective.Algorithm{collective.BcastBinomial, collective.BcastPipeline, collective.Auto} {
			b.Run(fmt.Sprintf("bytes=%d/algo=%s", size, algo), func(b *testing.B) {
				comms := startWorld(b, 4, "tcp", func(c *Config) { c.Bcast = algo })
				data := make([]byte, size)
				b.SetBytes(int64(size))
				ctx := context.Background()
				for b.Loop() {
					onAllRanks(b, comms, func(r int, c *Comm) error {
						var in []byte
						if r == 0 {
							in = data
						}
						_, err := c.Bcast(ctx, 0, in)
						return err
					})
				}
			})
		}
	}
}

// BenchmarkAllgather measures one Allgather of bytes=N per rank on 4
// in-process ranks over loopback TCP, with each algorithm forced and
// chosen by the model (auto).
func BenchmarkAllgather(b *testing.B) {
	for _, size := range []int{8, 64 << 10, 1 << 20} {
		for _, algo := range []collective.Algorithm{collective.AllgatherRing, collective.AllgatherMesh, collective.Auto} {
			b.Run(fmt.Sprintf("bytes=%d/algo=%s", size, algo), func(b *testing.B) {
				comms := startWorld(b, 4, "tcp", func(c *Config) { c.Allgather = algo })
				data := make([]byte, size)
				b.SetBytes(int64(4 * size))
				ctx := context.Background()
				for b.Loop() {
					onAllRanks(b, comms, func(_ int, c *Comm) error {
						_, err := c.Allgather(ctx, data)
						return err
					})
				}
			})
		}
	}
}

// onAllRanks runs f on every rank at once and waits for them all.
func onAllRanks(b *testing.B, comms []*Comm, f func(r int, c *Comm) error) {
	for _, err := range commtest.Errors(comms, f) {
		if err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkReduceScatter measures one ReduceScatterBlock (Sum) of a
// float64 vector of bytes=N on 4 in-process ranks over loopback TCP.
func BenchmarkReduceScatter(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			comms := startWorld(b, 4, "tcp", nil)
			vecs := rankVectors(4, size/8)
			b.SetBytes(int64(size))
			ctx := context.Background()
			for b.Loop() {
				onAllRanks(b, comms, func(r int, c *Comm) error {
					_, err := ReduceScatterBlock(ctx, c, vecs[r], Sum)
					return err
				})
			}
		})
	}
}

// rankVectors returns one zero vector of elems float64s per rank.
func rankVectors(ranks, elems int) [][]float64 {
	vecs := make([][]float64, ranks)
	for r := range vecs {
		vecs[r] = make([]float64, elems)
	}
	return vecs
}
