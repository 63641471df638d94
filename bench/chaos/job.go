package chaos

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/internal/freeport"
)

// jobSpec says how to start the ranks of one trial.
type jobSpec struct {
	exe       string // this executable (it has the chaos-rank command)
	n         int
	transport string
	args      []string // chaos-rank's flags
	netns     string   // run the ranks in this network namespace ("" : here)
	env       []string // more variables
	startup   time.Duration
}

// job is the rank processes of one trial. Every rank runs in its own
// process group, which kill ends whatever state it is in (stopped too).
type job struct {
	procs  []*proc
	events chan event
	coord  string
}

type proc struct {
	rank   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	exited chan struct{}
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append([]byte(nil), t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// launcherVars are the variables of launchers that the ranks must not
// inherit (they would override HETCOMM_* or confuse FromEnv).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HETCOMM_") || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "PMI_") ||
			k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" || k == "JOB_COMPLETION_INDEX" || k == "GOMAXPROCS" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// startJob starts the n ranks. The caller must call kill.
func startJob(spec jobSpec) (*job, error) {
	coord := "127.0.0.1:29517" // a fresh namespace has every port free
	if spec.netns == "" {
		var err error
		if coord, err = freeport.Loopback(); err != nil {
			return nil, err
		}
	}
	var sec [16]byte
	_, _ = rand.Read(sec[:])
	secret := hex.EncodeToString(sec[:])
	j := &job{events: make(chan event, 1024), coord: coord}
	for r := range spec.n {
		name, args := spec.exe, append([]string{"chaos-rank"}, spec.args...)
		if spec.netns != "" {
			name, args = "ip", append([]string{"netns", "exec", spec.netns, spec.exe}, args...)
		}
		cmd := exec.Command(name, args...)
		cmd.Env = append(cleanEnv(),
			fmt.Sprintf("HETCOMM_RANK=%d", r), fmt.Sprintf("HETCOMM_SIZE=%d", spec.n), "HETCOMM_COORD="+coord,
			"HETCOMM_SECRET="+secret, "HETCOMM_TRANSPORT="+spec.transport, "HETCOMM_PROBE=off", "HETCOMM_RAILS_AUTO=off",
			fmt.Sprintf("HETCOMM_TIMEOUT=%v", spec.startup))
		cmd.Env = append(cmd.Env, spec.env...)
		cmd.SysProcAttr = procAttr()
		p := &proc{rank: r, cmd: cmd, stderr: &tailBuffer{}, exited: make(chan struct{})}
		cmd.Stderr = p.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			j.kill()
			return nil, err
		}
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			j.kill()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			j.kill()
			return nil, err
		}
		j.procs = append(j.procs, p)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				var ev event
				if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Ev != "" {
					ev.Rank = p.rank
					j.events <- ev
				}
			}
			_, _ = io.Copy(io.Discard, out)
			err := cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			close(p.exited)
			j.events <- event{Ev: "exit", Rank: p.rank, T: time.Now().UnixNano(), Code: code, Stderr: p.stderr.String()}
		}()
	}
	return j, nil
}

// signal sends sig to rank r's process.
func (j *job) signal(r int, sig syscall.Signal) error {
	return j.procs[r].cmd.Process.Signal(sig)
}

// kill ends every rank's process group and waits for the processes (at
// most 10 s: a process that survives SIGKILL that long is reported).
func (j *job) kill() error {
	for _, p := range j.procs {
		if p.cmd.Process != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			_ = p.cmd.Process.Kill()
		}
	}
	var stuck []string
	for _, p := range j.procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			stuck = append(stuck, fmt.Sprint(p.cmd.Process.Pid))
		}
	}
	if len(stuck) > 0 {
		return fmt.Errorf("processes %s did not end after SIGKILL", strings.Join(stuck, ", "))
	}
	return nil
}

// collected is what the ranks reported during a trial.
type collected struct {
	ready  map[int]event
	final  map[int]event // error, done, concurrent, or exit without either
	wrong  []event
	events []event
}

// wait reads events until every rank in want has a final event (when
// final) or a ready event (when !final), or until deadline. It returns
// the ranks still missing.
func (j *job) wait(c *collected, want []int, final bool, deadline time.Time) []int {
	missing := func() []int {
		var m []int
		for _, r := range want {
			if final {
				if _, ok := c.final[r]; !ok {
					m = append(m, r)
				}
			} else if _, ok := c.ready[r]; !ok {
				if _, dead := c.final[r]; !dead {
					m = append(m, r)
				}
			}
		}
		return m
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		m := missing()
		if len(m) == 0 {
			return nil
		}
		select {
		case ev := <-j.events:
			c.add(ev)
		case <-timer.C:
			return m
		}
	}
}

func (c *collected) add(ev event) {
	if c.ready == nil {
		c.ready, c.final = map[int]event{}, map[int]event{}
	}
	c.events = append(c.events, ev)
	switch ev.Ev {
	case "ready":
		c.ready[ev.Rank] = ev
	case "wrong":
		c.wrong = append(c.wrong, ev)
	case "error", "done", "concurrent":
		if _, ok := c.final[ev.Rank]; !ok {
			c.final[ev.Rank] = ev
		}
	case "exit":
		if _, ok := c.final[ev.Rank]; !ok {
			c.final[ev.Rank] = ev
		}
	}
}

// drain takes the events already queued.
func (j *job) drain(c *collected) {
	for {
		select {
		case ev := <-j.events:
			c.add(ev)
		default:
			return
		}
	}
}

func (e event) describe() string {
	switch e.Ev {
	case "exit":
		s := e.Stderr
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		return fmt.Sprintf("rank %d exited (status %d) without a report: %s", e.Rank, e.Code, s)
	case "error":
		return fmt.Sprintf("rank %d: %s", e.Rank, e.Err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "rank %d: %s", e.Rank, e.Ev)
	if e.Msg != "" {
		fmt.Fprintf(&b, ": %s", e.Msg)
	}
	return b.String()
}
