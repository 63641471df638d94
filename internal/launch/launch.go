// Package launch starts the ranks of a hetcomm job, locally or through an
// ssh-like agent, prefixes their output with their rank, forwards signals,
// and tears everything down when one rank fails. cmd/hetrun is a thin
// command-line front end; hetbench uses it for live runs.
package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/internal/freeport"
)

// Spec describes one job.
type Spec struct {
	// N is the number of ranks.
	N int
	// Program is the executable every rank runs, with Args.
	Program string
	Args    []string
	// Hosts places ranks round-robin on these hosts through Rsh. Empty:
	// every rank runs locally.
	Hosts []string
	// Rsh is the agent used for hosts, called as `Rsh HOST COMMAND`
	// (default "ssh"). COMMAND is one shell command line.
	Rsh string
	// Transport is tcp, quic, udp or tls (default tcp).
	Transport string
	// Timeout is passed to the ranks as HETCOMM_TIMEOUT (0: comm's default).
	Timeout time.Duration
	// Coord overrides the coordinator address (host:port).
	Coord string
	// Env is added to every rank's environment (KEY=VALUE).
	Env []string
	// RankEnv, if set, adds per-rank variables.
	RankEnv func(rank int) []string
	// Stdin, if set, is forwarded to rank 0, as mpirun does; the other
	// ranks read nothing. Stdout and Stderr receive the ranks' output,
	// each line prefixed with "[rank] " unless NoPrefix.
	Stdin          *os.File
	Stdout, Stderr io.Writer
	NoPrefix       bool
	// Grace is how long ranks get between SIGTERM and SIGKILL (default 3s).
	Grace time.Duration
	// Secret is the job secret (default: a fresh random one).
	Secret string
	// Job is the job id (default: derived from the launcher's pid and time).
	Job string
}

// RankError reports a rank that failed.
type RankError struct {
	Rank   int
	Host   string // empty when local
	Status int    // exit status, or -1 when killed by a signal
	Signal syscall.Signal
	Err    error // a failure to start, if that is what happened
	// Panicked says that the rank's stderr showed a Go panic or fatal
	// runtime error.
	Panicked bool
	// Also lists the other ranks that failed on their own (before being
	// stopped), usually because of this one.
	Also []*RankError
}

func (e *RankError) Error() string {
	s := e.one()
	for _, o := range e.Also {
		s += "; then " + o.one()
	}
	return s
}

func (e *RankError) one() string {
	where := ""
	if e.Host != "" {
		where = " on " + e.Host
	}
	switch {
	case e.Err != nil:
		return fmt.Sprintf("rank %d%s failed to start: %v", e.Rank, where, e.Err)
	case e.Status < 0:
		return fmt.Sprintf("rank %d%s was killed by signal %v", e.Rank, where, e.Signal)
	case e.Panicked:
		return fmt.Sprintf("rank %d%s panicked (exit status %d)", e.Rank, where, e.Status)
	default:
		return fmt.Sprintf("rank %d%s exited with status %d", e.Rank, where, e.Status)
	}
}

// crashed reports a rank that died rather than exited with an error: a
// panic, a fatal runtime error or a signal.
func (e *RankError) crashed() bool { return e.Panicked || e.Status < 0 }

// ExitCode is the status a launcher should exit with for this failure:
// the rank's own exit status, 128 plus the signal that killed it, or 1
// when it could not start.
func (e *RankError) ExitCode() int {
	if e.Status > 0 && e.Status < 256 {
		return e.Status
	}
	if e.Status < 0 {
		return 128 + int(e.Signal)
	}
	return 1
}

// ErrInterrupted is returned when the job was stopped by ctx (for
// example on Ctrl-C) before every rank finished.
var ErrInterrupted = errors.New("launch: interrupted")

type proc struct {
	rank   int
	host   string
	cmd    *exec.Cmd
	done   chan struct{}
	err    *RankError // nil when the rank exited 0
	exitAt time.Time  // when it was reaped
	wg     sync.WaitGroup
	// panicked is set when the rank's stderr shows a Go panic or fatal
	// runtime error.
	panicked atomic.Bool
}

// Run starts the job and waits for it. It returns nil when every rank
// exited 0, a *RankError naming the first rank that failed (after stopping
// the others), or ErrInterrupted when ctx ended first (after stopping
// every rank).
func Run(ctx context.Context, s Spec) error {
	s, err := s.withDefaults()
	if err != nil {
		return err
	}
	// Every rank holds a connection to this watcher and exits when it
	// ends: when Run returns, or when the launcher dies, SIGKILL included.
	// (Local ranks also die with the launcher by Pdeathsig.)
	watcher, watch, err := s.startWatcher()
	if err != nil {
		return err
	}
	defer watcher.Close()
	procs, err := s.startAll(watch)
	if err != nil {
		return err
	}
	return s.watch(ctx, procs)
}

// startWatcher listens for the ranks' watch connections: on loopback for
// a local job, on every interface otherwise; it returns the address the
// ranks dial.
func (s Spec) startWatcher() (*bootstrap.Watcher, string, error) {
	bind, host := "127.0.0.1:0", "127.0.0.1"
	if len(s.Hosts) > 0 {
		bind, host = ":0", routeTo(hostOnly(s.Hosts[0]))
	}
	w, err := bootstrap.NewWatcher(bind)
	if err != nil {
		return nil, "", fmt.Errorf("launch: %w", err)
	}
	return w, net.JoinHostPort(host, strconv.Itoa(w.Port())), nil
}

// routeTo returns this host's address on the route to host (127.0.0.1 if
// there is none: a host that only resolves on the agent's side).
func routeTo(host string) string {
	c, err := net.Dial("udp", net.JoinHostPort(host, "9")) // sends nothing
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// withDefaults checks the spec and fills in its defaults: ssh, tcp, a
// 3 s grace, the process's stdout and stderr, a fresh secret and job id,
// and a free coordinator port on rank 0's host.
func (s Spec) withDefaults() (Spec, error) {
	if s.N < 1 {
		return s, fmt.Errorf("launch: -n %d: need at least one rank", s.N)
	}
	if s.Program == "" {
		return s, errors.New("launch: no program")
	}
	if s.Rsh == "" {
		s.Rsh = "ssh"
	}
	if s.Transport == "" {
		s.Transport = "tcp"
	}
	if s.Grace <= 0 {
		s.Grace = 3 * time.Second
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	if s.Secret == "" {
		s.Secret = bootstrap.NewSecret()
	}
	if s.Job == "" {
		s.Job = fmt.Sprintf("hetrun-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	}
	if s.Coord == "" {
		coord, err := pickCoord(s.host(0))
		if err != nil {
			return s, err
		}
		s.Coord = coord
	}
	return s, nil
}

// host is the host of a rank ("" for this one): round-robin over Hosts.
func (s Spec) host(rank int) string {
	if len(s.Hosts) == 0 {
		return ""
	}
	return s.Hosts[rank%len(s.Hosts)]
}

// startAll starts every rank, locally or through the agent; if one cannot
// start, it stops those already running.
func (s Spec) startAll(watch string) ([]*proc, error) {
	localRank := map[string]int{}
	outMu := &sync.Mutex{}
	procs := make([]*proc, s.N)
	for r := 0; r < s.N; r++ {
		h := s.host(r)
		b := bootstrap.Bootstrap{Rank: r, Size: s.N, LocalRank: localRank[h], Coord: s.Coord, Secret: []byte(s.Secret),
			Job: s.Job, Transport: s.Transport, Timeout: s.Timeout, Watch: watch}
		if b.Timeout <= 0 {
			b.Timeout = bootstrap.DefaultTimeout
		}
		localRank[h]++
		if h != "" {
			b.Host = hostOnly(h)
		}
		env := append(b.Env(), s.Env...)
		if s.RankEnv != nil {
			env = append(env, s.RankEnv(r)...)
		}
		var cmd *exec.Cmd
		var stdin io.Reader // what the rank's stdin pipe carries, if it has one
		if h == "" {
			cmd = exec.Command(s.Program, s.Args...)
			cmd.Env = append(os.Environ(), env...)
			if r == 0 && s.Stdin != nil {
				cmd.Stdin = s.Stdin
			}
		} else {
			// The secret goes to the agent on its stdin, never in a
			// command line that anyone on either host can read with ps;
			// rank 0's stdin follows it.
			cmd = exec.Command(s.Rsh, h, remoteCommand(withoutSecret(env), s.Program, s.Args))
			cmd.Env = os.Environ()
			stdin = strings.NewReader(s.Secret + "\n")
			if r == 0 && s.Stdin != nil {
				stdin = io.MultiReader(stdin, s.Stdin)
			}
		}
		cmd.SysProcAttr = procAttr()
		p := &proc{rank: r, host: h, cmd: cmd, done: make(chan struct{})}
		procs[r] = p
		if err := p.start(s, outMu, stdin); err != nil {
			stopAll(procs[:r], s.Grace)
			return nil, err
		}
	}
	return procs, nil
}

// watch waits for the ranks: it returns nil when every one exits 0, the
// first failure (with the others that followed) when one fails, and
// ErrInterrupted when ctx ends; it stops the other ranks in both cases.
func (s Spec) watch(ctx context.Context, procs []*proc) error {
	failed := make(chan *proc, s.N)
	for _, p := range procs {
		go func(p *proc) {
			p.wait()
			if p.err != nil {
				failed <- p
			}
		}(p)
	}
	allDone := make(chan struct{})
	go func() {
		for _, p := range procs {
			<-p.done
		}
		close(allDone)
	}()

	select {
	case <-allDone:
		return firstFailure(procs)
	case <-failed:
		// A failing rank makes others fail soon after, and they may be
		// reaped in any order: let the cascade settle briefly, then name the
		// cause and list the others (firstFailure).
		select {
		case <-allDone:
		case <-time.After(failureWindow):
		}
		err := firstFailure(procs)
		stopAll(procs, s.Grace)
		<-allDone
		return err
	case <-ctx.Done():
		stopAll(procs, s.Grace)
		<-allDone
		return ErrInterrupted
	}
}

func (p *proc) start(s Spec, outMu *sync.Mutex, stdin io.Reader) error {
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var in io.WriteCloser
	if stdin != nil {
		// A pipe fed by a goroutine nobody waits for: a forwarded
		// terminal that never sends EOF must not keep Wait from
		// returning once the rank has exited.
		if in, err = p.cmd.StdinPipe(); err != nil {
			return err
		}
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := p.cmd.Start(); err != nil {
		p.err = &RankError{Rank: p.rank, Host: p.host, Err: err}
		return p.err
	}
	if in != nil {
		go func() {
			io.Copy(in, stdin)
			in.Close()
		}()
	}
	prefix := ""
	if !s.NoPrefix {
		prefix = "[" + strconv.Itoa(p.rank) + "] "
	}
	p.wg.Add(2)
	go copyLines(&p.wg, outMu, s.Stdout, stdout, prefix, nil)
	go copyLines(&p.wg, outMu, s.Stderr, stderr, prefix, func(line string) {
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			p.panicked.Store(true)
		}
	})
	return nil
}

// failureWindow is how long Run lets other ranks fail after the first
// failure before it stops them.
const failureWindow = 300 * time.Millisecond

// firstFailure reports the failures among finished ranks (nil if none):
// the cause first (see blame), the others in Also.
func firstFailure(procs []*proc) error {
	var fails []*proc
	for _, p := range procs {
		select {
		case <-p.done:
			if p.err != nil {
				fails = append(fails, p)
			}
		default:
		}
	}
	if len(fails) == 0 {
		return nil
	}
	// A rank that crashed (a panic, a signal) is the cause; the ranks
	// that merely exited with an error usually reacted to it, and may have
	// been reaped first. Among equals, the first reaped.
	sort.SliceStable(fails, func(a, b int) bool {
		if ca, cb := fails[a].err.crashed(), fails[b].err.crashed(); ca != cb {
			return ca
		}
		return fails[a].exitAt.Before(fails[b].exitAt)
	})
	first := *fails[0].err
	for _, p := range fails[1:] {
		first.Also = append(first.Also, p.err)
	}
	return &first
}

// wait reaps the process after its output is drained, and records how it
// ended.
func (p *proc) wait() {
	p.wg.Wait()
	err := p.cmd.Wait()
	p.exitAt = time.Now()
	defer close(p.done)
	if err == nil {
		return
	}
	re := &RankError{Rank: p.rank, Host: p.host, Status: 1, Panicked: p.panicked.Load()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			re.Status, re.Signal = -1, ws.Signal()
		} else {
			re.Status = ee.ExitCode()
		}
	} else {
		re.Err = err
	}
	p.err = re
}

// copyLines copies r to w line by line, each line prefixed, whole lines
// at a time so that ranks' output does not interleave mid-line; see, if
// set, looks at every line.
func copyLines(wg *sync.WaitGroup, mu *sync.Mutex, w io.Writer, r io.Reader, prefix string, see func(string)) {
	defer wg.Done()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if see != nil && len(line) > 0 {
			see(line)
		}
		if len(line) > 0 {
			if !strings.HasSuffix(line, "\n") {
				line += "\n"
			}
			mu.Lock()
			io.WriteString(w, prefix+line)
			mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// stopAll sends SIGTERM to every rank's process group, then SIGKILL to
// those still running after grace.
func stopAll(procs []*proc, grace time.Duration) {
	for _, p := range procs {
		signalGroup(p, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			for _, q := range procs {
				signalGroup(q, syscall.SIGKILL)
			}
			return
		}
	}
}

func signalGroup(p *proc, sig syscall.Signal) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	// The rank leads its own process group (Setpgid), which also holds an
	// agent's children.
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// pickCoord chooses the coordinator address: a free loopback port for a
// local job, or a random port on the first host; both below the ephemeral
// range, which outgoing connections draw from (internal/freeport).
func pickCoord(host string) (string, error) {
	if host == "" {
		addr, err := freeport.Loopback()
		if err != nil {
			return "", fmt.Errorf("launch: finding a free port: %w", err)
		}
		return addr, nil
	}
	return net.JoinHostPort(hostOnly(host), strconv.Itoa(freeport.Random())), nil
}

// hostOnly strips a "user@" prefix from an agent host argument.
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, '@'); i >= 0 {
		return h[i+1:]
	}
	return h
}

// remoteCommand builds the shell command line an agent runs on a host:
// change to the same directory when it exists there, then exec the program
// with the job's environment.
func remoteCommand(env []string, prog string, args []string) string {
	var b strings.Builder
	// The first line of the agent's stdin is the job secret.
	b.WriteString("IFS= read -r " + bootstrap.EnvSecret + " && export " + bootstrap.EnvSecret + "; ")
	if wd, err := os.Getwd(); err == nil {
		b.WriteString("cd " + ShellQuote(wd) + " 2>/dev/null; ")
	}
	b.WriteString("exec env")
	for _, kv := range env {
		b.WriteString(" " + ShellQuote(kv))
	}
	b.WriteString(" " + ShellQuote(prog))
	for _, a := range args {
		b.WriteString(" " + ShellQuote(a))
	}
	return b.String()
}

// withoutSecret returns env without the job secret.
func withoutSecret(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, bootstrap.EnvSecret+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// ShellQuote quotes s as one word for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
