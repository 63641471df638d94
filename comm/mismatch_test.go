package comm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
)

// Mismatched collective calls, every collective against every kind of
// mismatch, under every algorithm that can be forced: every rank must
// return, and every rank's error must be ErrMismatch naming the odd rank
// and what differed. The op timeout is only a safety net, far above what
// any case takes: a rank that reaches it fails the test.
//
// A rank whose part of a collective needs nothing back (a Bcast root
// whose pieces go eagerly, a Reduce leaf, a Gather sender) cannot know,
// without a round trip that every correct call would pay for, that
// another rank called something else: it may return nil. Such a rank
// must then fail its next collective with the first mismatch's error,
// not one about the next call; the test checks that through an Exscan,
// which no case calls otherwise.

// mmVariant is a way for one rank (the odd one) to call a collective
// differently from the others.
type mmVariant string

const (
	mmLength mmVariant = "length" // another length
	mmRoot   mmVariant = "root"   // the odd rank believes it is the root
	mmOp     mmVariant = "op"     // another reduction operator
	mmOther  mmVariant = "other"  // another collective (Barrier)
	mmA2A    mmVariant = "a2a"    // another collective (Alltoallv)
)

// mmCall is one rank's call: odd says whether this rank is the one that
// differs, elems the others' number of float64 elements.
type mmCall func(ctx context.Context, c *Comm, odd bool, elems int) error

// mmColl is a collective and the variants that make a mismatch of it.
type mmColl struct {
	name     string
	variants []mmVariant
	call     func(v mmVariant) mmCall
}

// mmVec is rank r's vector of n elements.
func mmVec(r, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(r + i%7)
	}
	return v
}

// oddLen is the odd rank's length: across the reduction tree's size
// class (collective.ReduceLargeFrom) from the others' when they are just
// under it.
func oddLen(elems int) int { return elems + elems/20 + 1 }

// mmRootFor is the root a rank passes: 0, or for the odd rank in the
// root variant itself (Bcast, Scatter: roots that send) or another rank
// (Gather, Reduce: two ranks that both believe they are the root of
// these wait for each other and send nothing, which no message can
// reveal; see ErrMismatch).
func mmRootFor(c *Comm, v mmVariant, odd, sends bool) int {
	switch {
	case v != mmRoot || !odd:
		return 0
	case sends:
		return c.Rank()
	case c.Rank() == 2:
		return 1
	}
	return 2
}

func mmOpFor(v mmVariant, odd bool) Op[float64] {
	if v == mmOp && odd {
		return Max[float64]
	}
	return Sum[float64]
}

// mmElems is the length a rank passes.
func mmElems(v mmVariant, odd bool, elems int) int {
	if v == mmLength && odd {
		return oddLen(elems)
	}
	return elems
}

func mmCollectives() []mmColl {
	wrap := func(f mmCall) func(v mmVariant) mmCall {
		return func(v mmVariant) mmCall {
			return func(ctx context.Context, c *Comm, odd bool, elems int) error {
				switch {
				case odd && v == mmOther:
					return c.Barrier(ctx)
				case odd && v == mmA2A:
					send := make([][]byte, c.Size())
					for i := range send {
						send[i] = make([]byte, 8*elems)
					}
					_, err := c.Alltoallv(ctx, send)
					return err
				}
				return f(ctx, c, odd, elems)
			}
		}
	}
	var colls []mmColl
	add := func(name string, variants []mmVariant, f func(v mmVariant) mmCall) {
		colls = append(colls, mmColl{name, variants, f})
	}
	add("Barrier", []mmVariant{mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error { return c.Barrier(ctx) })(v)
	})
	add("Bcast", []mmVariant{mmRoot, mmOther, mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			root := mmRootFor(c, v, odd, true)
			var data []byte
			if c.Rank() == root {
				data = AsBytes(mmVec(root, elems))
			}
			_, err := c.Bcast(ctx, root, data)
			return err
		})(v)
	})
	for _, equal := range []bool{true, false} {
		name, vs := "Gatherv", []mmVariant{mmRoot, mmOther, mmA2A}
		if equal {
			name, vs = "Gather", []mmVariant{mmLength, mmRoot, mmOther, mmA2A}
		}
		add(name, vs, func(v mmVariant) mmCall {
			return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
				data := AsBytes(mmVec(c.Rank(), mmElems(v, odd, elems)))
				_, err := c.gather(ctx, mmRootFor(c, v, odd, false), data, equal)
				return err
			})(v)
		})
		name = map[bool]string{true: "Scatter", false: "Scatterv"}[equal]
		add(name, []mmVariant{mmRoot, mmOther, mmA2A}, func(v mmVariant) mmCall {
			return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
				root := mmRootFor(c, v, odd, true)
				var parts [][]byte
				if c.Rank() == root {
					for r := 0; r < c.Size(); r++ {
						parts = append(parts, AsBytes(mmVec(r, elems)))
					}
				}
				_, err := c.scatter(ctx, root, parts, equal)
				return err
			})(v)
		})
		name, vs = "Allgatherv", []mmVariant{mmOther, mmA2A}
		if equal {
			name, vs = "Allgather", []mmVariant{mmLength, mmOther, mmA2A}
		}
		add(name, vs, func(v mmVariant) mmCall {
			return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
				data := AsBytes(mmVec(c.Rank(), mmElems(v, odd, elems)))
				var err error
				if equal {
					_, err = c.Allgather(ctx, data)
				} else {
					_, err = c.Allgatherv(ctx, data)
				}
				return err
			})(v)
		})
	}
	add("Reduce", []mmVariant{mmLength, mmRoot, mmOp, mmOther, mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			_, err := Reduce(ctx, c, mmRootFor(c, v, odd, false), mmVec(c.Rank(), mmElems(v, odd, elems)), mmOpFor(v, odd))
			return err
		})(v)
	})
	add("Allreduce", []mmVariant{mmLength, mmOp, mmOther, mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			_, err := Allreduce(ctx, c, mmVec(c.Rank(), mmElems(v, odd, elems)), mmOpFor(v, odd))
			return err
		})(v)
	})
	add("ReduceScatter", []mmVariant{mmLength, mmOp, mmOther, mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			n := mmElems(v, odd, elems)
			counts := make([]int, c.Size())
			for r := range counts {
				counts[r] = n
			}
			_, err := ReduceScatter(ctx, c, mmVec(c.Rank(), n*c.Size()), counts, mmOpFor(v, odd))
			return err
		})(v)
	})
	add("Alltoall", []mmVariant{mmLength, mmOther}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			send := make([][]byte, c.Size())
			for r := range send {
				send[r] = AsBytes(mmVec(r, mmElems(v, odd, elems)))
			}
			_, err := c.Alltoall(ctx, send)
			return err
		})(v)
	})
	add("Alltoallv", []mmVariant{mmOther}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			send := make([][]byte, c.Size())
			for r := range send {
				send[r] = AsBytes(mmVec(r, elems+r))
			}
			_, err := c.Alltoallv(ctx, send)
			return err
		})(v)
	})
	// Scan's messages do not carry the operator (see ErrMismatch).
	add("Scan", []mmVariant{mmLength, mmOther, mmA2A}, func(v mmVariant) mmCall {
		return wrap(func(ctx context.Context, c *Comm, odd bool, elems int) error {
			_, err := Scan(ctx, c, mmVec(c.Rank(), mmElems(v, odd, elems)), mmOpFor(v, odd))
			return err
		})(v)
	})
	return colls
}

// mmAlgorithms are the algorithms a case is run under (WithAlgorithm;
// each collective takes those that are its own and ignores the others).
var mmAlgorithms = []collective.Algorithm{collective.Auto, collective.BcastBinomial, collective.BcastPipeline,
	collective.AllreduceTree, collective.AllreduceRSAG, collective.AllgatherRing, collective.AllgatherMesh}

// mmSizes are the others' lengths (float64 elements): one element, just
// under the reduction tree's size class (the odd rank's length is across
// it), and pieces.
var mmSizes = []int{1, (collective.ReduceLargeFrom - 8) / 8, 40000}

// mmTimeout is the safety net: far above what any case takes, on a
// machine starved by other work too (10 s ran out twice under the race
// detector beside chaos runs). A mismatch must show as ErrMismatch, not
// as this timeout.
const mmTimeout = 30 * time.Second

func TestMismatchEverywhere(t *testing.T) {
	for _, n := range []int{4, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			// Without the notices of calls that wait long (stall.go),
			// which would end a case the messages missed about 1 s
			// late, with ErrMismatch: here the messages must tell.
			worlds := startWorld(t, n, "mem", func(cfg *Config) {
				cfg.Model, cfg.OpTimeout, cfg.noCallNotices = mixedModel(n), mmTimeout, true
			})
			for _, coll := range mmCollectives() {
				for _, v := range coll.variants {
					if v == mmOp && n == 8 {
						continue
					}
					for _, algo := range mmAlgorithms {
						for _, elems := range mmSizes {
							if n == 8 && (elems != mmSizes[1] || algo != collective.Auto) {
								continue
							}
							for _, odd := range []int{1, n - 1} {
								// Subtests, so that one case can be run
								// alone (-run 'TestMismatchEverywhere/n=4/Reduce/other/tree/elems=4095/odd=1').
								sub := fmt.Sprintf("%s/%s/%s/elems=%d/odd=%d", coll.name, v, algo, elems, odd)
								t.Run(sub, func(t *testing.T) {
									runMismatch(t, fmt.Sprintf("n=%d/%s", n, sub), worlds, coll.call(v), v, algo, odd, elems)
								})
							}
						}
					}
				}
			}
		})
	}
}

// runMismatch runs one case on a fresh communicator of every rank.
func runMismatch(t *testing.T, name string, worlds []*Comm, call mmCall, v mmVariant, algo collective.Algorithm, odd, elems int) {
	t.Helper()
	comms := make([]*Comm, len(worlds))
	for r, w := range worlds {
		var err error
		comms[r], err = w.Dup(context.Background())
		if err != nil {
			t.Fatalf("%s: Dup: %v", name, err)
		}
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	ctx := WithAlgorithm(context.Background(), algo)
	first := make([]error, len(comms))
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		err := call(ctx, c, r == odd, elems)
		first[r] = err
		if err == nil {
			// The next call must not succeed with the mismatch's messages
			// in flight; it may, when it needs nothing that the odd rank
			// took, but then the communicator must break soon.
			if _, err = Exscan(ctx, c, []int64{1}, Sum[int64]); err == nil {
				select {
				case <-c.broken:
					err = c.brokenErr()
				case <-time.After(mmTimeout):
					err = errors.New("the communicator did not break")
				}
			}
		}
		return err
	})
	var nils []int
	for r, err := range errs {
		if first[r] == nil {
			nils = append(nils, r)
		}
		switch {
		case err == nil:
			t.Errorf("%s: rank %d: no error", name, r)
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: rank %d waited for the op timeout: %v", name, r, err)
		case !errors.Is(err, ErrMismatch):
			t.Errorf("%s: rank %d: not ErrMismatch: %v", name, r, err)
		case strings.Contains(strings.TrimPrefix(err.Error(), "comm: Exscan: "), "Exscan"):
			t.Errorf("%s: rank %d: the error describes the next call: %v", name, r, err)
		case !strings.Contains(err.Error(), fmt.Sprintf("rank %d", odd)):
			t.Errorf("%s: rank %d: the error does not name rank %d: %v", name, r, odd, err)
		}
	}
	if len(nils) > 0 && testing.Verbose() {
		t.Logf("%s: ranks %v returned nil from the mismatched call", name, nils)
	}
}
