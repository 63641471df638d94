package comm

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

// pattern returns deterministic content for (src, dst, salt) of n bytes.
func pattern(src, dst, salt, n int) []byte {
	b := make([]byte, n)
	x := uint32(src*1000003 + dst*7919 + salt*104729 + 1)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// conformanceTransports are the transports the suite runs over.
var conformanceTransports = []string{"mem", "tcp", "quic", "udp"}

func TestConformance(t *testing.T) {
	sizes := []int{1, 2, 3, 4, 7}
	msgSizes := []int{0, 100, 3 << 20}
	if testing.Short() {
		msgSizes = []int{0, 100, 300 << 10}
	}
	for _, tr := range conformanceTransports {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("transport=%s/ranks=%d", tr, n), func(t *testing.T) {
				comms := startWorld(t, n, tr, nil)
				for _, m := range msgSizes {
					t.Run(fmt.Sprintf("bytes=%d", m), func(t *testing.T) {
						runCollectives(t, comms, m)
					})
				}
			})
		}
	}
}

func runCollectives(t *testing.T, comms []*Comm, m int) {
	ctx := context.Background()
	n := len(comms)
	commtest.OnAll(t, comms, func(c *Comm) error {
		me := c.Rank()
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		// Bcast from every root.
		for root := 0; root < n; root++ {
			var data []byte
			if me == root {
				data = pattern(root, -1, 1, m)
			}
			got, err := c.Bcast(ctx, root, data)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, pattern(root, -1, 1, m)) {
				return fmt.Errorf("Bcast root %d: wrong data", root)
			}
		}
		// Every algorithm of the planned collectives, forced, with up to
		// 300 KiB (pieces and rendezvous already, at a tenth of the time).
		fm := min(m, 300<<10)
		for _, algo := range []collective.Algorithm{collective.BcastBinomial, collective.BcastPipeline, collective.AllgatherRing, collective.AllgatherMesh, collective.AllreduceTree, collective.AllreduceRSAG} {
			actx := WithAlgorithm(ctx, algo)
			root := n / 2
			var data []byte
			if me == root {
				data = pattern(root, -2, 7, fm)
			}
			got, err := c.Bcast(actx, root, data)
			if err != nil {
				return fmt.Errorf("%s: %w", algo, err)
			}
			if !bytes.Equal(got, pattern(root, -2, 7, fm)) {
				return fmt.Errorf("%s: Bcast root %d: wrong data", algo, root)
			}
			everyone, err := c.Allgatherv(actx, pattern(me, -2, 8, fm+5*me))
			if err != nil {
				return fmt.Errorf("%s: %w", algo, err)
			}
			for r := 0; r < n; r++ {
				if !bytes.Equal(everyone[r], pattern(r, -2, 8, fm+5*r)) {
					return fmt.Errorf("%s: Allgatherv: part %d wrong", algo, r)
				}
			}
			vec := make([]int64, fm/8+3)
			for i := range vec {
				vec[i] = int64(me*1000 + i)
			}
			sum, err := Allreduce(actx, c, vec, Sum)
			if err != nil {
				return fmt.Errorf("%s: %w", algo, err)
			}
			for i, v := range sum {
				if want := int64(1000*n*(n-1)/2 + n*i); v != want {
					return fmt.Errorf("%s: Allreduce sum[%d] = %v, want %v", algo, i, v, want)
				}
			}
			// Reduce to a root other than 0 (Bcast's algorithms choose
			// its tree, Allreduce's the tree or reduce-scatter).
			red, err := Reduce(actx, c, root, vec, Sum)
			if err != nil {
				return fmt.Errorf("%s: Reduce: %w", algo, err)
			}
			if me != root && red != nil || me == root && len(red) != len(vec) {
				return fmt.Errorf("%s: Reduce gave rank %d %d elements", algo, me, len(red))
			}
			for i, v := range red {
				if v != sum[i] {
					return fmt.Errorf("%s: Reduce [%d] = %v, Allreduce %v", algo, i, v, sum[i])
				}
			}
		}
		// Gatherv / Scatterv with sizes that differ per rank.
		root := n - 1
		mine := pattern(me, root, 2, m+me)
		all, err := c.Gatherv(ctx, root, mine)
		if err != nil {
			return err
		}
		if me == root {
			for r := 0; r < n; r++ {
				if !bytes.Equal(all[r], pattern(r, root, 2, m+r)) {
					return fmt.Errorf("Gatherv: part %d wrong", r)
				}
			}
		} else if all != nil {
			return fmt.Errorf("Gatherv: non-root got data")
		}
		var parts [][]byte
		if me == root {
			for r := 0; r < n; r++ {
				parts = append(parts, pattern(root, r, 3, m+2*r))
			}
		}
		part, err := c.Scatterv(ctx, root, parts)
		if err != nil {
			return err
		}
		if !bytes.Equal(part, pattern(root, me, 3, m+2*me)) {
			return fmt.Errorf("Scatterv: wrong part")
		}
		// Allgatherv.
		everyone, err := c.Allgatherv(ctx, pattern(me, -1, 4, m+3*me))
		if err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			if !bytes.Equal(everyone[r], pattern(r, -1, 4, m+3*r)) {
				return fmt.Errorf("Allgatherv: part %d wrong", r)
			}
		}
		// Reductions.
		vec := make([]float64, max(1, m/64))
		for i := range vec {
			vec[i] = float64(me*1000 + i)
		}
		sum, err := Allreduce(ctx, c, vec, Sum)
		if err != nil {
			return err
		}
		for i, v := range sum {
			want := float64(1000*n*(n-1)/2 + n*i)
			if v != want {
				return fmt.Errorf("Allreduce sum[%d] = %v, want %v", i, v, want)
			}
		}
		mx, err := Reduce(ctx, c, 0, []int64{int64(me), -int64(me)}, Max)
		if err != nil {
			return err
		}
		if me == 0 && (mx[0] != int64(n-1) || mx[1] != 0) {
			return fmt.Errorf("Reduce max = %v", mx)
		}
		mn, err := Allreduce(ctx, c, []int32{int32(me + 5)}, Min)
		if err != nil {
			return err
		}
		if mn[0] != 5 {
			return fmt.Errorf("Allreduce min = %v", mn)
		}
		prod, err := Allreduce(ctx, c, []uint64{2}, Prod)
		if err != nil {
			return err
		}
		if prod[0] != 1<<n {
			return fmt.Errorf("Allreduce prod = %v", prod)
		}
		// A user op that is associative but not commutative: combining
		// in rank order writes the ranks as the digits of a number.
		user, err := Allreduce(ctx, c, []int{me, 1}, digits)
		if err != nil {
			return err
		}
		if want := decimal(0, n); user[0] != want {
			return fmt.Errorf("Allreduce in rank order = %d, want %d", user[0], want)
		}
		for root := 0; root < n; root++ {
			res, err := Reduce(ctx, c, root, []int{me, 1}, digits)
			if err != nil {
				return err
			}
			if me == root && res[0] != decimal(0, n) || me != root && res != nil {
				return fmt.Errorf("Reduce to %d in rank order = %v, want %d at the root only", root, res, decimal(0, n))
			}
		}
		if err := checkPrefixReductions(ctx, c, m); err != nil {
			return err
		}
		// Alltoallv with every algorithm, sizes varying per pair.
		for _, algo := range append(collective.Algorithms(collective.KindAlltoall), collective.Auto, Naive, collective.Paced) {
			send := make([][]byte, n)
			for j := range send {
				send[j] = pattern(me, j, 5, (m*(me+1)+j*131)%(m+1))
			}
			recv, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: algo})
			if err != nil {
				return fmt.Errorf("Alltoallv %s: %w", algo, err)
			}
			for i := range recv {
				if !bytes.Equal(recv[i], pattern(i, me, 5, (m*(i+1)+me*131)%(m+1))) {
					return fmt.Errorf("Alltoallv %s: data from %d wrong (%d bytes)", algo, i, len(recv[i]))
				}
			}
		}
		return c.Barrier(ctx)
	})
}

func TestAlltoallvRecvBuffers(t *testing.T) {
	comms := startWorld(t, 3, "mem", func(c *Config) { c.EagerLimit = 1000 })
	ctx := context.Background()
	for _, algo := range []collective.Algorithm{collective.OpenShop, Naive} {
		commtest.OnAll(t, comms, func(c *Comm) error {
			me := c.Rank()
			send := make([][]byte, 3)
			bufs := make([][]byte, 3)
			for j := range send {
				send[j] = pattern(me, j, 9, 500*(j+1)*(me+1))
				bufs[j] = make([]byte, 1500) // large enough for some sources only
			}
			recv, err := c.AlltoallvWith(ctx, send, AlltoallvOptions{Algorithm: algo, Recv: bufs})
			if err != nil {
				return err
			}
			for i := range recv {
				want := pattern(i, me, 9, 500*(me+1)*(i+1))
				if !bytes.Equal(recv[i], want) {
					return fmt.Errorf("%s: data from %d wrong", algo, i)
				}
				aliased := len(want) > 0 && &recv[i][0] == &bufs[i][0]
				if aliased != (len(want) > 0 && len(want) <= 1500) {
					return fmt.Errorf("%s: buffer from %d (%d bytes) aliased=%v", algo, i, len(want), aliased)
				}
			}
			return nil
		})
	}
}

func TestMulticast(t *testing.T) {
	for _, tr := range []string{"mem", "tcp"} {
		for _, n := range []int{1, 2, 4, 7} {
			t.Run(fmt.Sprintf("transport=%s/ranks=%d", tr, n), func(t *testing.T) {
				comms := startWorld(t, n, tr, func(c *Config) { c.EagerLimit = 4096 })
				ctx := context.Background()
				// All-to-all broadcast plus a few odd ones: an empty message,
				// a message with no destination, two messages from one source.
				mkMsgs := func(n int, me int) []MulticastMsg {
					var msgs []MulticastMsg
					for s := 0; s < n; s++ {
						var dests []int
						for d := 0; d < n; d++ {
							if d != s {
								dests = append(dests, d)
							}
						}
						msgs = append(msgs, MulticastMsg{Source: s, Dests: dests})
					}
					msgs = append(msgs, MulticastMsg{Source: 0, Dests: nil})
					if n > 1 {
						msgs = append(msgs, MulticastMsg{Source: n - 1, Dests: []int{0}})
					}
					for k := range msgs {
						if msgs[k].Source == me {
							msgs[k].Data = pattern(msgs[k].Source, k, 11, []int{20000, 0, 7}[k%3])
						}
					}
					return msgs
				}
				for _, algo := range append(collective.Algorithms(collective.KindMulticast), collective.Auto, Naive) {
					commtest.OnAll(t, comms, func(c *Comm) error {
						msgs := mkMsgs(n, c.Rank())
						got, err := c.MulticastWith(ctx, msgs, MulticastOptions{Algorithm: algo})
						if err != nil {
							return fmt.Errorf("%s: %w", algo, err)
						}
						for k, m := range msgs {
							mine := m.Source == c.Rank()
							for _, d := range m.Dests {
								mine = mine || d == c.Rank()
							}
							want := pattern(m.Source, k, 11, []int{20000, 0, 7}[k%3])
							if mine && !bytes.Equal(got[k], want) {
								return fmt.Errorf("%s: message %d wrong (%d bytes)", algo, k, len(got[k]))
							}
							if !mine && got[k] != nil {
								return fmt.Errorf("%s: message %d delivered to a non-destination", algo, k)
							}
						}
						return nil
					})
				}
			})
		}
	}
}

func TestMulticastMismatch(t *testing.T) {
	comms := startWorld(t, 2, "mem", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *Comm) {
			defer wg.Done()
			msgs := []MulticastMsg{{Source: 0, Dests: []int{1}, Data: []byte("x")}}
			if r == 1 {
				msgs[0].Dests = []int{} // another pattern
			}
			_, errs[r] = c.Multicast(ctx, msgs)
		}(r, c)
	}
	wg.Wait()
	require.ErrorIs(t, errs[0], ErrMismatch)
	require.ErrorIs(t, errs[1], ErrMismatch)
	_, err := comms[0].Multicast(ctx, []MulticastMsg{{Source: 0, Dests: []int{0}}})
	require.ErrorIs(t, err, ErrArgument)
}

// digits is an associative, non-commutative op on (value, width) pairs of
// decimal digits: it writes src's digits after dst's.
func digits(dst, src []int) {
	for i := 0; i+1 < len(dst); i += 2 {
		for range src[i+1] {
			dst[i] *= 10
		}
		dst[i] += src[i]
		dst[i+1] += src[i+1]
	}
}

// decimal is the ranks lo..hi-1 written as the digits of a number, the
// rank-order reduction of digits over (rank, 1) pairs.
func decimal(lo, hi int) int {
	v := 0
	for r := lo; r < hi; r++ {
		v = v*10 + r
	}
	return v
}

// checkPrefixReductions checks Scan, Exscan, ReduceScatter,
// ReduceScatterBlock and AllreduceInto against their MPI definitions,
// computed here from every rank's data.
func checkPrefixReductions(ctx context.Context, c *Comm, m int) error {
	n, me := c.Size(), c.Rank()
	inc, err := Scan(ctx, c, []int{me, 1}, digits)
	if err != nil {
		return err
	}
	if want := decimal(0, me+1); inc[0] != want {
		return fmt.Errorf("Scan = %d, want %d", inc[0], want)
	}
	exc, err := Exscan(ctx, c, []int{me, 1}, digits)
	if err != nil {
		return err
	}
	if me == 0 && exc != nil || me > 0 && (len(exc) != 2 || exc[0] != decimal(0, me) || exc[1] != me) {
		return fmt.Errorf("Exscan = %v, want %d", exc, decimal(0, me))
	}
	// ReduceScatter: rank i gets i+1+m/64 elements; element e of every
	// rank's data is rank*1000+e.
	counts := make([]int, n)
	total := 0
	for i := range counts {
		counts[i] = i + 1 + m/64
		total += counts[i]
	}
	data := make([]float64, total)
	for e := range data {
		data[e] = float64(me*1000 + e)
	}
	part, err := ReduceScatter(ctx, c, data, counts, Sum)
	if err != nil {
		return err
	}
	first := 0
	for i := 0; i < me; i++ {
		first += counts[i]
	}
	if len(part) != counts[me] {
		return fmt.Errorf("ReduceScatter gave %d elements, want %d", len(part), counts[me])
	}
	for k, v := range part {
		if want := float64(1000*n*(n-1)/2 + n*(first+k)); v != want {
			return fmt.Errorf("ReduceScatter[%d] = %v, want %v", k, v, want)
		}
	}
	blocks := make([]int, 2*n) // a (rank, 1) pair for every rank
	for e := 0; e < len(blocks); e += 2 {
		blocks[e], blocks[e+1] = me, 1
	}
	bl, err := ReduceScatterBlock(ctx, c, blocks, digits)
	if err != nil {
		return err
	}
	if want := decimal(0, n); len(bl) != 2 || bl[0] != want || bl[1] != n {
		return fmt.Errorf("ReduceScatterBlock = %v, want (%d, %d)", bl, want, n)
	}
	// AllreduceInto, in place.
	vec := make([]int64, max(1, m/8))
	for e := range vec {
		vec[e] = int64(me + e)
	}
	if err := AllreduceInto(ctx, c, vec, vec, Sum); err != nil {
		return err
	}
	for e, v := range vec {
		if want := int64(n*(n-1)/2 + n*e); v != want {
			return fmt.Errorf("AllreduceInto[%d] = %d, want %d", e, v, want)
		}
	}
	return nil
}
