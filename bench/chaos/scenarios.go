package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// outcome is the verdict of one trial.
type outcome struct {
	expected bool // everything as the scenario requires
	late     bool // as required, but detected after the limit
	hang     bool // a rank neither finished nor failed by the deadline
	wrong    bool // a rank accepted wrong data
	blame    bool // a survivor named another rank than the victim (or none)
	nostart  bool // the job did not form
	other    bool // any other departure (finished where it should fail, another error)
	skipped  string
	// nilFirst (mismatch): ranks whose mismatched call returned nil and
	// whose next collective failed with the mismatch (comm.ErrMismatch's
	// documented exception: their part needed nothing back).
	nilFirst int
	time     time.Duration
	hasTime  bool
	notes    []string
}

func (o *outcome) note(format string, args ...any) {
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
}

// scenario is one row family of the table.
type scenario struct {
	name       string
	help       string
	transports []string
	timeName   string // what the time column measures
	exclusive  bool   // runs alone (it loads the machine, or its timing matters)
	run        func(s *suite, tr string, r *rand.Rand) outcome
	// setup runs once before the trials of a transport; it returns a
	// teardown, or a reason to skip the row.
	setup func(s *suite, tr string) (teardown func(), skip string)
}

var allTransports = []string{"tcp", "tls", "udp", "quic"}

func scenarios() []scenario {
	var out []scenario
	for _, sig := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill", syscall.SIGKILL}, {"stop", syscall.SIGSTOP}} {
		for _, op := range []string{"alltoallv", "bcast", "send-sender", "send-receiver"} {
			out = append(out, scenario{
				name:       sig.name + "/" + op,
				help:       fmt.Sprintf("%s a random non-zero rank at a random time in the middle of %s", map[string]string{"kill": "kill -9", "stop": "SIGSTOP"}[sig.name], op),
				transports: allTransports,
				timeName:   "detection",
				run: func(s *suite, tr string, r *rand.Rand) outcome {
					return s.signalTrial(sig.sig, op, tr, r)
				},
			})
		}
	}
	out = append(out,
		scenario{name: "spoof", help: "the unsigned SYN of issue 17 and 10,000 random and spoofed datagrams at a running UDP job", transports: []string{"udp"},
			run: (*suite).spoofTrial},
		scenario{name: "flood", help: "1,000 idle connections on the coordinator port and on every rank listener during a 4-rank start", transports: []string{"tcp", "tls"},
			timeName: "start delay", exclusive: true, run: (*suite).floodTrial},
		scenario{name: "concurrent", help: "two goroutines run collectives on one Comm", transports: allTransports,
			run: (*suite).concurrentTrial},
	)
	for _, kind := range []string{"allreduce-len", "bcast-root", "bcast-alltoallv"} {
		out = append(out, scenario{name: "mismatch/" + kind, help: "one random rank calls with other arguments: " + kind, transports: allTransports,
			timeName: "to the last error",
			run: func(s *suite, tr string, r *rand.Rand) outcome {
				return s.mismatchTrial(kind, tr, r)
			}})
	}
	out = append(out, scenario{name: "loss", help: "20% of the packets dropped (nftables, in a namespace) under an Alltoallv job", transports: allTransports,
		timeName: "job", exclusive: true, run: (*suite).lossTrial, setup: (*suite).lossSetup})
	return out
}

// shortTransport is the one transport a scenario runs on with -short.
var shortTransport = map[string]string{
	"kill/alltoallv": "tcp", "kill/bcast": "tls", "kill/send-sender": "udp", "kill/send-receiver": "quic",
	"stop/alltoallv": "udp", "stop/bcast": "quic", "stop/send-sender": "tls", "stop/send-receiver": "tcp",
	"spoof": "udp", "flood": "tcp", "concurrent": "quic",
	"mismatch/allreduce-len": "tcp", "mismatch/bcast-root": "udp", "mismatch/bcast-alltoallv": "tls",
	"loss": "udp",
}

// signalTrial kills or stops a random non-zero rank at a random time in
// the middle of op, and checks that every survivor fails naming it.
func (s *suite) signalTrial(sig syscall.Signal, op, tr string, r *rand.Rand) outcome {
	var o outcome
	n, args := 4, []string{"-op", op}
	delay := 100*time.Millisecond + time.Duration(r.Int64N(int64(900*time.Millisecond)))
	switch op {
	case "alltoallv":
		args = append(args, "-size", fmt.Sprint(256<<10))
	case "bcast":
		args = append(args, "-size", fmt.Sprint(8<<20))
	case "send-sender", "send-receiver": // the victim, rank 1, sends or receives
		n = 2
		sender := 0
		if op == "send-sender" {
			sender = 1
		}
		args = []string{"-op", "send", "-size", fmt.Sprint(s.sendMiB << 20), "-sender", fmt.Sprint(sender)}
		delay = 300*time.Millisecond + time.Duration(r.Int64N(int64(1200*time.Millisecond)))
	}
	victim := 1 + r.IntN(n-1)
	j, c, ok := s.start(&o, jobSpec{n: n, transport: tr, args: args})
	if !ok {
		return o
	}
	defer s.end(&o, j)
	time.Sleep(delay)
	j.drain(c)
	if len(c.final) > 0 {
		o.other = true
		for _, ev := range c.final {
			o.note("before the signal: %s", ev.describe())
		}
		return o
	}
	ts := time.Now()
	if err := j.signal(victim, sig); err != nil {
		o.other = true
		o.note("signal: %v", err)
		return o
	}
	var survivors []int
	for i := range n {
		if i != victim {
			survivors = append(survivors, i)
		}
	}
	missing := j.wait(c, survivors, true, ts.Add(s.hang))
	j.drain(c)
	s.checkWrong(&o, c)
	if len(missing) > 0 {
		o.hang = true
		o.note("ranks %v still running %v after rank %d got %v", missing, s.hang, victim, sig)
	}
	for _, i := range survivors {
		ev, ok := c.final[i]
		if !ok {
			continue
		}
		if ev.Ev == "error" {
			o.time, o.hasTime = max(o.time, time.Duration(ev.T-ts.UnixNano())), true
		}
		switch {
		case ev.Ev == "error" && ev.RankErr && ev.Blame == victim:
		case ev.Ev == "error":
			o.blame = true
			o.note("victim %d; %s", victim, ev.describe())
		default:
			o.other = true
			o.note("victim %d; %s", victim, ev.describe())
		}
	}
	s.judge(&o)
	if o.late {
		for _, i := range survivors {
			ev := c.final[i]
			o.note("victim %d; after %v, %s", victim, time.Duration(ev.T-ts.UnixNano()).Round(100*time.Millisecond), ev.describe())
		}
	}
	return o
}

// start starts a job and waits until every rank is ready.
func (s *suite) start(o *outcome, spec jobSpec) (*job, *collected, bool) {
	spec.exe = s.exe
	if spec.startup == 0 {
		spec.startup = 30 * time.Second
	}
	j, err := startJob(spec)
	if err != nil {
		o.nostart = true
		o.note("start: %v", err)
		return nil, nil, false
	}
	c := &collected{}
	all := make([]int, spec.n)
	for i := range all {
		all[i] = i
	}
	missing := j.wait(c, all, false, time.Now().Add(spec.startup+15*time.Second))
	early := false
	for r := range c.final {
		if _, ok := c.ready[r]; !ok {
			early = true
		}
	}
	if len(missing) > 0 || early {
		o.nostart = true
		if len(missing) > 0 {
			o.note("ranks %v not ready after %v", missing, spec.startup+15*time.Second)
		}
		for r, ev := range c.final {
			if _, ok := c.ready[r]; !ok {
				o.note("%s", ev.describe())
			}
		}
		s.end(o, j)
		return nil, nil, false
	}
	return j, c, true
}

// end kills the job's processes.
func (s *suite) end(o *outcome, j *job) {
	if err := j.kill(); err != nil {
		o.other = true
		o.note("cleanup: %v", err)
	}
}

func (s *suite) checkWrong(o *outcome, c *collected) {
	if len(c.wrong) > 0 {
		o.wrong = true
		for i, ev := range c.wrong {
			if i == 3 {
				o.note("... %d wrong blocks in all", len(c.wrong))
				break
			}
			o.note("WRONG DATA %s", ev.describe())
		}
	}
}

// judge sets expected or late from the other verdicts and the time.
func (s *suite) judge(o *outcome) {
	if o.hang || o.wrong || o.blame || o.nostart || o.other {
		return
	}
	if o.hasTime && s.limit > 0 && o.time > s.limit {
		o.late = true
		return
	}
	o.expected = true
}

// spoofTrial attacks a running 4-rank UDP job with spoofed datagrams and
// checks that it finishes with correct data.
func (s *suite) spoofTrial(tr string, r *rand.Rand) outcome {
	var o outcome
	j, c, ok := s.start(&o, jobSpec{n: 4, transport: tr, args: []string{"-op", "alltoallv", "-size", fmt.Sprint(64 << 10)}})
	if !ok {
		return o
	}
	defer s.end(&o, j)
	pids := make([]int, len(j.procs))
	for i, p := range j.procs {
		pids[i] = p.cmd.Process.Pid
	}
	sent, err := attack(pids, s.datagrams, r)
	if err != nil {
		o.skipped = err.Error()
		return o
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := fmt.Fprintln(j.procs[0].stdin, "stop"); err != nil {
		o.note("telling rank 0 to stop: %v", err)
	}
	missing := j.wait(c, []int{0, 1, 2, 3}, true, time.Now().Add(s.shortHang()))
	j.drain(c)
	s.checkWrong(&o, c)
	if len(missing) > 0 {
		o.hang = true
		o.note("ranks %v still running %v after the attack", missing, s.shortHang())
	}
	iters := 0
	for _, ev := range c.final {
		if ev.Ev != "done" {
			o.other = true
			o.note("after %d spoofed datagrams: %s", sent, ev.describe())
		}
		iters = max(iters, ev.N)
	}
	if o.other || o.hang {
		o.note("%d iterations", iters)
	}
	s.judge(&o)
	return o
}

// floodTrial starts a world with and without a flood and compares.
func (s *suite) floodTrial(tr string, r *rand.Rand) outcome {
	var o outcome
	base, hang, err := floodStart(tr, 0, 30*time.Second)
	if err != nil {
		o.nostart, o.hang = !hang, hang
		o.note("without a flood: %v", err)
		return o
	}
	took, hang, err := floodStart(tr, s.conns, 30*time.Second)
	var ew errWrong
	switch {
	case errors.As(err, &ew):
		o.wrong = true
		o.note("%v", err)
	case hang:
		o.hang = true
		o.note("with %d connections on each port: %v", s.conns, err)
	case err != nil:
		o.other = true
		o.note("with %d connections on each port: %v", s.conns, err)
	}
	o.time, o.hasTime = max(0, took-base), err == nil
	if err == nil && o.time >= s.startLim {
		o.other = true
		o.note("start %v with the flood, %v without", took.Round(time.Millisecond), base.Round(time.Millisecond))
	}
	if !o.other && !o.hang && !o.wrong {
		o.expected = true
	}
	return o
}

// concurrentTrial runs two goroutines of collectives on one Comm on every
// rank: each call returns correct data or ErrConcurrent, and every rank
// sees ErrConcurrent.
func (s *suite) concurrentTrial(tr string, r *rand.Rand) outcome {
	var o outcome
	j, c, ok := s.start(&o, jobSpec{n: 4, transport: tr, args: []string{"-op", "concurrent", "-iters", "20", "-size", fmt.Sprint(64 << 10), "-linger", "5m"}})
	if !ok {
		return o
	}
	defer s.end(&o, j)
	missing := j.wait(c, []int{0, 1, 2, 3}, true, time.Now().Add(s.shortHang()))
	j.drain(c)
	s.checkWrong(&o, c)
	if len(missing) > 0 {
		o.hang = true
		o.note("ranks %v still in their collectives after %v", missing, s.shortHang())
	}
	for _, ev := range c.final {
		if ev.Ev != "concurrent" {
			o.other = true
			o.note("%s", ev.describe())
			continue
		}
		if ev.Wrong > 0 {
			o.wrong = true
			o.note("WRONG DATA: rank %d: %d calls returned wrong data (%d right)", ev.Rank, ev.Wrong, ev.OK)
		}
		if len(ev.Errors) == 0 {
			o.other = true
			o.note("rank %d: no ErrConcurrent (%d calls right)", ev.Rank, ev.OK)
		}
		for _, e := range ev.Errors {
			if !e.Concurrent {
				o.other = true
				o.note("rank %d: %s", ev.Rank, e.Err)
			}
		}
	}
	s.judge(&o)
	return o
}

// mismatchTrial makes one random rank call a collective with other
// arguments: every rank must fail with ErrMismatch. Ranks stay alive after
// their call (as if they went on with local work), so that no exit rescues
// a rank that would otherwise wait forever.
func (s *suite) mismatchTrial(kind, tr string, r *rand.Rand) outcome {
	var o outcome
	odd := r.IntN(4)
	j, c, ok := s.start(&o, jobSpec{n: 4, transport: tr, args: []string{"-op", "mismatch", "-kind", kind, "-odd", fmt.Sprint(odd), "-linger", "5m"}})
	if !ok {
		return o
	}
	defer s.end(&o, j)
	missing := j.wait(c, []int{0, 1, 2, 3}, true, time.Now().Add(s.shortHang()))
	j.drain(c)
	if len(missing) > 0 {
		o.hang = true
		o.note("rank %d differs; ranks %v still waiting after %v", odd, missing, s.shortHang())
	}
	for _, ev := range c.final {
		switch {
		case ev.Ev == "error" && ev.Mismatch:
			o.time, o.hasTime = max(o.time, time.Duration(ev.N)*time.Microsecond), true
			if ev.Next {
				o.nilFirst++
			}
		case ev.Ev == "done":
			o.other = true
			o.note("rank %d differs; rank %d returned no error", odd, ev.Rank)
		default:
			o.other = true
			o.note("rank %d differs; %s", odd, ev.describe())
		}
	}
	if o.hang {
		o.hasTime = false
	}
	if !o.hang && !o.other {
		o.expected = true
	}
	return o
}

// lossSetup makes a network namespace whose loopback drops 20% of the
// packets (of every packet for the stream transports, of UDP datagrams
// for udp and quic).
func (s *suite) lossSetup(tr string) (func(), string) {
	if os.Geteuid() != 0 {
		return nil, "needs root (a network namespace and nftables)"
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, tool + " is not installed"
		}
	}
	ns := fmt.Sprintf("hcchaos%d%s", os.Getpid(), tr)
	teardown := func() { _ = exec.Command("ip", "netns", "del", ns).Run() }
	proto := "udp"
	if tr == "tcp" || tr == "tls" {
		proto = "tcp"
	}
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "netns", "exec", ns, "nft", "add", "table", "inet", "chaos"},
		{"ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "chaos", "in", "{ type filter hook input priority 0; }"},
		{"ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "chaos", "in", "meta", "l4proto", proto, "numgen", "random", "mod", "100", "lt", fmt.Sprint(s.lossPct), "drop"},
	}
	for _, st := range steps {
		if out, err := exec.Command(st[0], st[1:]...).CombinedOutput(); err != nil {
			teardown()
			return nil, fmt.Sprintf("%s: %v: %s", strings.Join(st, " "), err, strings.TrimSpace(string(out)))
		}
	}
	s.netns[tr] = ns
	return func() { delete(s.netns, tr); teardown() }, ""
}

// lossTrial runs a checked Alltoallv job in the lossy namespace: it
// completes with correct data, or every rank fails; it never hangs.
func (s *suite) lossTrial(tr string, r *rand.Rand) outcome {
	var o outcome
	start := time.Now()
	j, c, ok := s.start(&o, jobSpec{n: 4, transport: tr, netns: s.netns[tr], startup: 60 * time.Second,
		args: []string{"-op", "alltoallv", "-iters", fmt.Sprint(s.lossIters), "-size", fmt.Sprint(64 << 10)}})
	if !ok {
		return o
	}
	defer s.end(&o, j)
	missing := j.wait(c, []int{0, 1, 2, 3}, true, time.Now().Add(s.hang))
	j.drain(c)
	s.checkWrong(&o, c)
	if len(missing) > 0 {
		o.hang = true
		o.note("ranks %v still running %v after the start", missing, s.hang)
	}
	failed := 0
	for _, ev := range c.final {
		switch ev.Ev {
		case "done":
		case "error":
			failed++
			o.note("%s", ev.describe())
		default:
			o.other = true
			o.note("%s", ev.describe())
		}
	}
	if failed > 0 && failed+len(missing) < 4 {
		o.other = true
		o.note("%d of 4 ranks failed, the others finished", failed)
	}
	o.time, o.hasTime = time.Since(start), !o.hang
	if !o.hang && !o.wrong && !o.other {
		o.expected = true
	}
	return o
}
