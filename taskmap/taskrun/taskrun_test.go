package taskrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/comm"
	"github.com/hetcomm/hetcomm/taskmap"
	"github.com/stretchr/testify/require"
)

// layered builds a graph of layers x width tasks: task (0, j) produces a
// vector of j+1; task (l, j) adds the vectors of (l-1, j) and (l-1,
// j+1 mod width) and 1; a last task sums everything of the last layer.
// Every task first calls delay with its name. It returns the graph, the
// final item and its expected value.
func layered(layers, width, k int, delay func(ctx context.Context, task string)) (*Graph, ItemID, float64) {
	g := NewGraph()
	prev := make([]ItemID, width)
	vals := make([]float64, width)
	for l := 0; l < layers; l++ {
		cur := make([]ItemID, width)
		next := make([]float64, width)
		for j := 0; j < width; j++ {
			cur[j] = g.Item(fmt.Sprintf("v%d.%d", l, j), int64(8*k))
			t := Task{Name: fmt.Sprintf("t%d.%d", l, j), Kind: "add", Work: 1, Out: []ItemID{cur[j]}}
			name := t.Name
			if l == 0 {
				j := j
				next[j] = float64(j + 1)
				t.Run = Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
					delay(ctx, name)
					v := make([]float64, k)
					for i := range v {
						v[i] = float64(j + 1)
					}
					return [][]float64{v}, nil
				})
			} else {
				a, b := j, (j+1)%width
				t.In = []ItemID{prev[a]}
				next[j] = vals[a] + 1
				if b != a {
					t.In = append(t.In, prev[b])
					next[j] += vals[b]
				}
				t.Run = Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
					delay(ctx, name)
					v := make([]float64, k)
					for i := range v {
						v[i] = 1
						for _, x := range in {
							v[i] += x[i]
						}
					}
					return [][]float64{v}, nil
				})
			}
			g.Add(t)
		}
		prev, vals = cur, next
	}
	final := g.Item("sum", 8)
	want := 0.0
	for _, v := range vals {
		want += v * float64(k)
	}
	g.Add(Task{Name: "sum", Kind: "sum", Work: 1, In: prev, Out: []ItemID{final}, Run: Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) {
		delay(ctx, "sum")
		s := 0.0
		for _, v := range in {
			for _, x := range v {
				s += x
			}
		}
		return [][]float64{{s}}, nil
	})})
	return g, final, want
}

func noDelay(context.Context, string) {}

// bodyClock records when each task's body ran and on which rank, on the
// test's own clock: every rank runs in this process, so unlike the
// ranks' clocks (each starts at its own exit from a barrier) it is one
// clock for all of them.
type bodyClock struct {
	ref        time.Time
	mu         sync.Mutex
	start, end map[string]float64 // seconds since ref
	rank       map[string]int
}

func newBodyClock() *bodyClock {
	return &bodyClock{ref: time.Now(), start: map[string]float64{}, end: map[string]float64{}, rank: map[string]int{}}
}

// delay is a task delay for layered that sleeps d on rank and records the
// body's start and end.
func (b *bodyClock) delay(rank int, d time.Duration) func(context.Context, string) {
	return func(_ context.Context, task string) {
		start := time.Since(b.ref).Seconds()
		time.Sleep(d)
		end := time.Since(b.ref).Seconds()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.start[task], b.end[task], b.rank[task] = start, end, rank
	}
}

// checkSchedule checks the schedule the root recorded, s (on the ranks'
// clocks, each from its own epoch), against the bodies b saw run (on one
// clock):
//   - every recorded [Start, Finish] holds its body's run, with one clock
//     offset (epoch) per rank: the bodies bound each rank's epoch from
//     both sides, and the bounds must meet;
//   - on the shared clock, no body starts before the bodies of its
//     inputs' producers end;
//   - in the record, no task starts before the producer of one of its
//     inputs finishes: exactly when both ran on one rank (one clock), and
//     across ranks within the difference of their epochs that the bodies
//     allow (measured in this run, rather than a fixed skew: a busy
//     machine leaves the ranks' barrier milliseconds apart).
func checkSchedule(t *testing.T, g *Graph, s *taskmap.Schedule, b *bodyClock) {
	t.Helper()
	const eps = 1e-6 // float rounding of seconds
	b.mu.Lock()
	defer b.mu.Unlock()
	n := g.Tasks()
	lo := map[int]float64{} // epoch of rank r >= lo[r] (on the shared clock)
	hi := map[int]float64{} // epoch of rank r <= hi[r]
	rank := make([]int, n)
	for i := 0; i < n; i++ {
		name := g.tasks[i].Name
		r, ok := b.rank[name]
		require.True(t, ok, "task %d (%s) never ran its body", i, name)
		require.Equal(t, s.Machine[i], r, "task %d (%s) ran on rank %d, the schedule says %d", i, name, r, s.Machine[i])
		require.LessOrEqual(t, s.Start[i], s.Finish[i])
		rank[i] = r
		if v, ok := lo[r]; !ok || b.end[name]-s.Finish[i] > v {
			lo[r] = b.end[name] - s.Finish[i]
		}
		if v, ok := hi[r]; !ok || b.start[name]-s.Start[i] < v {
			hi[r] = b.start[name] - s.Start[i]
		}
	}
	for r := range lo {
		require.LessOrEqual(t, lo[r], hi[r]+eps, "rank %d: no one epoch puts every body inside its recorded [Start, Finish]", r)
	}
	producer := map[ItemID]int{}
	for k, tk := range g.tasks {
		for _, o := range tk.Out {
			producer[o] = k
		}
	}
	for i := 0; i < n; i++ {
		for _, d := range g.tasks[i].In {
			p := producer[d]
			require.GreaterOrEqual(t, b.start[g.tasks[i].Name], b.end[g.tasks[p].Name],
				"task %d's body starts before the body of %d, which produces its input, ends", i, p)
			skew := 0.0 // the most the consumer's epoch can exceed the producer's
			if rank[i] != rank[p] {
				skew = hi[rank[i]] - lo[rank[p]]
			}
			require.GreaterOrEqual(t, s.Start[i], s.Finish[p]-skew-eps,
				"task %d starts before its input from %d (ranks %d and %d, whose epochs differ by at most %.3g s)", i, p, rank[i], rank[p], skew)
		}
	}
}

func TestRunAlgorithms(t *testing.T) {
	comms := startWorld(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, a := range []taskmap.Algorithm{taskmap.Static, taskmap.PS, taskmap.CS, taskmap.CD, taskmap.GS, ""} {
		for _, adapt := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/adapt=%v", a, adapt), func(t *testing.T) {
				bodies := newBodyClock()
				res, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
					g, final, _ := layered(6, 5, 1000, bodies.delay(c.Rank(), time.Millisecond))
					return Run(ctx, c, g, &Config{Root: 1, Algorithm: a, Adapt: adapt, SecondsPerUnit: []float64{1e-3, 1e-3, 2e-3}, Collect: []ItemID{final, 0}})
				})
				for r, err := range errs {
					require.NoError(t, err, "rank %d", r)
				}
				g, final, want := layered(6, 5, 1000, noDelay)
				root := res[1]
				require.NotNil(t, root.Schedule)
				got, err := comm.FromBytes[float64](root.Items[final])
				require.NoError(t, err)
				require.Equal(t, []float64{want}, got)
				first, err := comm.FromBytes[float64](root.Items[0])
				require.NoError(t, err)
				require.Len(t, first, 1000)
				require.Equal(t, 1.0, first[0])
				total := 0
				for _, n := range root.TasksPerRank {
					total += n
				}
				require.Equal(t, g.Tasks(), total)
				for r := range res {
					require.Equal(t, root.TasksPerRank, res[r].TasksPerRank)
					require.Equal(t, root.Makespan, res[r].Makespan)
				}
				algo := a
				if algo == "" {
					algo = taskmap.CD
				}
				require.Equal(t, algo, root.Algorithm)
				checkSchedule(t, g, root.Schedule, bodies)
				switch algo {
				case taskmap.GS:
					require.GreaterOrEqual(t, root.Remaps, g.Tasks()/2)
				case taskmap.Static:
					require.Zero(t, root.Remaps)
				default:
					require.Equal(t, 6, root.Remaps) // blocks 1..6
				}
				require.NotNil(t, root.Profile)
				require.Len(t, root.Profile.SecondsPerUnit["add"], 3)
				require.Len(t, root.Expected, g.Tasks())
				require.Equal(t, 2e-3, root.Expected[0][2])
			})
		}
	}
}

// TestRunSlowRank: a rank that becomes five times slower than expected
// after its second task receives much less work from the hybrid remapper
// with Adapt than from the static mapping. (A count of tasks, not a
// timing.) "Five times" is a ratio measured in the run, not a longer
// sleep: each of the slow rank's tasks sleeps one unit, measures how long
// that took, and then sleeps four times that again, so that it takes five
// times what a task of the other ranks takes on this machine at this
// moment, however late a busy machine wakes sleepers (a fixed 15 ms
// against 3 ms, each late by a few ms, was a ratio of 2-3). Without Adapt,
// CD sees the slow rank only through its late completions, and keeps
// expecting its queued tasks to take the expected time: it reacts little
// (logged, not asserted).
func TestRunSlowRank(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the graph three times with sleeping tasks")
	}
	comms := startWorld(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const unit = 3 * time.Millisecond
	run := func(a taskmap.Algorithm, adapt bool) []int {
		res, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
			var ran atomic.Int32
			slow := c.Rank() == 3
			g, _, _ := layered(12, 8, 16, func(context.Context, string) {
				start := time.Now()
				time.Sleep(unit)
				if slow && ran.Add(1) > 2 {
					time.Sleep(4 * time.Since(start))
				}
			})
			return Run(ctx, c, g, &Config{Algorithm: a, Adapt: adapt, SecondsPerUnit: []float64{unit.Seconds(), unit.Seconds(), unit.Seconds(), unit.Seconds()}})
		})
		for r, err := range errs {
			require.NoError(t, err, "rank %d", r)
		}
		t.Logf("%s adapt=%v: tasks per rank %v, busy %.3v, completion %.3f s", a, adapt, res[0].TasksPerRank, res[0].BusyPerRank, res[0].Makespan)
		return res[0].TasksPerRank
	}
	static := run(taskmap.Static, false)
	run(taskmap.CD, false)
	cd := run(taskmap.CD, true)
	gs := run(taskmap.GS, true)
	require.LessOrEqual(t, cd[3], static[3]/2)
	require.LessOrEqual(t, gs[3], static[3]/2)
}

func TestRunRejects(t *testing.T) {
	comms := startWorld(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok := func(context.Context, [][]byte) ([][]byte, error) { return [][]byte{{1}}, nil }
	cases := map[string]func(c *comm.Comm) (*Graph, *Config){
		"no producer": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			a := g.Item("a", 1)
			g.Add(Task{Name: "t", In: []ItemID{a}, Out: []ItemID{g.Item("b", 1)}, Run: ok})
			return g, nil
		},
		"two producers": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			a := g.Item("a", 1)
			g.Add(Task{Name: "t", Out: []ItemID{a}, Run: ok})
			g.Add(Task{Name: "u", Out: []ItemID{a}, Run: ok})
			return g, nil
		},
		"cycle": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			a, b := g.Item("a", 1), g.Item("b", 1)
			g.Add(Task{Name: "t", In: []ItemID{b}, Out: []ItemID{a}, Run: ok})
			g.Add(Task{Name: "u", In: []ItemID{a}, Out: []ItemID{b}, Run: ok})
			return g, nil
		},
		"undeclared item": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{7}, Run: ok})
			return g, nil
		},
		"no body": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}})
			return g, nil
		},
		"negative size": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", -1)}, Run: ok})
			return g, nil
		},
		"negative work": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Work: -1, Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, nil
		},
		"expected times of the wrong length": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Expected: []float64{1}, Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, nil
		},
		"empty": func(c *comm.Comm) (*Graph, *Config) { return NewGraph(), nil },
		"unknown algorithm": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, &Config{Algorithm: "ideal"}
		},
		"root out of range": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, &Config{Root: 2}
		},
		"speeds of the wrong length": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, &Config{SecondsPerUnit: []float64{1}}
		},
		"collect an undeclared item": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, &Config{Collect: []ItemID{3}}
		},
		"invalid on one rank only": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			a := g.Item("a", 1)
			if c.Rank() == 1 {
				a = 5
			}
			g.Add(Task{Name: "t", Out: []ItemID{a}, Run: ok})
			return g, nil
		},
		"different graphs": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			if c.Rank() == 1 {
				g.Add(Task{Name: "u", Out: []ItemID{g.Item("b", 1)}, Run: ok})
			}
			return g, nil
		},
		"different configurations": func(c *comm.Comm) (*Graph, *Config) {
			g := NewGraph()
			g.Add(Task{Name: "t", Out: []ItemID{g.Item("a", 1)}, Run: ok})
			return g, &Config{Adapt: c.Rank() == 0}
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
				g, cfg := build(c)
				return Run(ctx, c, g, cfg)
			})
			for r, err := range errs {
				require.ErrorIs(t, err, ErrInvalid, "rank %d", r)
			}
		})
	}
	_, err := Run(ctx, nil, NewGraph(), nil)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Run(ctx, comms[0], nil, nil)
	require.ErrorIs(t, err, ErrInvalid)
	// After all that, the communicators still work.
	_, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
		g, _, _ := layered(2, 2, 4, noDelay)
		return Run(ctx, c, g, nil)
	})
	require.NoError(t, errors.Join(errs...))
}

func TestRunTaskFailure(t *testing.T) {
	comms := startWorld(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name string
		body Func
		msg  string
	}{
		{"error", func(context.Context, [][]byte) ([][]byte, error) { return nil, errors.New("disk full") }, "disk full"},
		{"panic", func(context.Context, [][]byte) ([][]byte, error) { panic("index out of range") }, "panic: index out of range"},
		{"outputs", func(context.Context, [][]byte) ([][]byte, error) { return nil, nil }, "returned 0 outputs, it declares 1"},
		{"typed", Typed(func(ctx context.Context, in [][]float64) ([][]float64, error) { return [][]float64{{1}}, nil }), "not a whole number"},
	} {
		for _, a := range []taskmap.Algorithm{taskmap.CD, taskmap.GS} {
			t.Run(c.name+"/"+string(a), func(t *testing.T) {
				_, errs := onAll(comms, func(cm *comm.Comm) (*Result, error) {
					g := NewGraph()
					ok := func(context.Context, [][]byte) ([][]byte, error) { return [][]byte{{1, 2, 3}}, nil }
					x, y := g.Item("x", 3), g.Item("y", 3)
					g.Add(Task{Name: "first", Out: []ItemID{x}, Run: ok})
					g.Add(Task{Name: "bad", In: []ItemID{x}, Out: []ItemID{y}, Run: c.body})
					g.Add(Task{Name: "last", In: []ItemID{y}, Out: []ItemID{g.Item("z", 3)}, Run: ok})
					return Run(ctx, cm, g, &Config{Algorithm: a})
				})
				var failed int
				for r, err := range errs {
					require.Error(t, err, "rank %d", r)
					var te *TaskError
					if errors.As(err, &te) {
						failed++
						require.Equal(t, "bad", te.Name)
						require.Equal(t, r, te.Rank)
						require.Contains(t, err.Error(), c.msg)
					} else {
						require.ErrorIs(t, err, ErrAborted, "rank %d", r)
						require.Contains(t, err.Error(), c.msg)
					}
				}
				require.Equal(t, 1, failed)
			})
		}
	}
	// The world survives a failed execution.
	_, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
		g, _, _ := layered(3, 3, 4, noDelay)
		return Run(ctx, c, g, nil)
	})
	require.NoError(t, errors.Join(errs...))
}

func TestRunProfile(t *testing.T) {
	comms := startWorld(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, errs := onAll(comms, func(c *comm.Comm) (*Result, error) {
		g, _, _ := layered(3, 2, 4, func(context.Context, string) { time.Sleep(2 * time.Millisecond) })
		return Run(ctx, c, g, &Config{Probe: func(context.Context) (float64, error) { return 1, nil }})
	})
	require.NoError(t, errors.Join(errs...))
	prof := res[0].Profile
	require.Contains(t, prof.SecondsPerUnit, "add")
	require.Equal(t, 1.0, res[0].Expected[0][0], "the probe's speed")
	for _, v := range prof.SecondsPerUnit["add"] {
		if v > 0 {
			require.Greater(t, v, 1e-3)
		}
	}
	res, errs = onAll(comms, func(c *comm.Comm) (*Result, error) {
		g, _, _ := layered(3, 2, 4, noDelay)
		return Run(ctx, c, g, &Config{Profile: prof, SecondsPerUnit: []float64{7, 7}})
	})
	require.NoError(t, errors.Join(errs...))
	for r := 0; r < 2; r++ {
		want := prof.SecondsPerUnit["add"][r]
		if want == 0 {
			want = 7
		}
		require.Equal(t, want, res[0].Expected[0][r])
	}
	// The "sum" kind has work 1 and a measured speed too.
	require.Contains(t, prof.SecondsPerUnit, "sum")
}

func TestDefaultConfig(t *testing.T) {
	d := DefaultConfig()
	z, err := Config{}.normalize(3)
	require.NoError(t, err)
	n, err := d.normalize(3)
	require.NoError(t, err)
	require.Equal(t, z.Algorithm, n.Algorithm)
	require.Equal(t, z.Root, n.Root)
	require.NotNil(t, d.Probe)
}

func TestDefaultProbe(t *testing.T) {
	v, err := DefaultProbe(context.Background())
	require.NoError(t, err)
	require.True(t, v > 0 && v < 1e-6, "%v seconds per multiply-add", v)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = DefaultProbe(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestProtocolRoundTrip(t *testing.T) {
	for _, m := range []*msg{
		{kind: msgAssign, task: 5, inputs: [][2]int{{1, 2}, {3, 0}}},
		{kind: msgAssign, task: 0},
		{kind: msgForward, item: 9, rank: 3},
		{kind: msgStop, items: []int{1, 2, 3}},
		{kind: msgStop},
		{kind: msgAbort, message: "task 3 failed: ☃"},
		{kind: msgStarted, task: 2, t0: 1.5},
		{kind: msgFinished, task: 2, t0: 1.5, t1: math.Pi},
		{kind: msgFailed, task: 7, message: "boom"},
	} {
		got, err := decode(m.encode())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	nan := (&msg{kind: msgStarted, task: 1, t0: math.NaN()}).encode()
	inf := (&msg{kind: msgFinished, task: 1, t0: 0, t1: math.Inf(1)}).encode()
	for _, b := range [][]byte{nil, {0}, {99}, {msgAssign}, {msgAssign, 2, 200}, {msgStarted, 2, 1}, {msgForward, 2, 2, 2}, {msgAbort, 100, 'x'}, nan, inf} {
		_, err := decode(b)
		require.Error(t, err, "%v", b)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&msg{kind: msgAssign, task: 5, inputs: [][2]int{{1, 2}}}).encode())
	f.Add((&msg{kind: msgStop, items: []int{4}}).encode())
	f.Add((&msg{kind: msgFinished, task: 1, t0: 1, t1: 2}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decode(b)
		if err != nil {
			return
		}
		again, err := decode(m.encode())
		require.NoError(t, err)
		require.Equal(t, m, again)
	})
}
