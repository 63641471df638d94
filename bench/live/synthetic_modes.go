package live

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"

	"github.com/hetcomm/hetcomm/bench"
	"github.com/hetcomm/hetcomm/transport"
)

// runSynthetic runs the benchmark in the mode the options select.
func runSynthetic(ctx context.Context, o *synthOptions, log io.Writer) (*synthResult, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if o.netlab() {
		return runSyntheticNetlab(ctx, o, hex.EncodeToString(secret), log)
	}
	// Loopback: the slaves are goroutines, each with one listener per
	// rail; both ends of every link shape what they send.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	peers := make([][]string, o.Slaves)
	errs := make(chan error, o.Slaves)
	for i := range o.Slaves {
		ready := make(chan []string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := synthSlave(ctx, i, []string{"127.0.0.1:0", "127.0.0.1:0"}, secret, func(a []string) { ready <- a }); err != nil {
				errs <- err
				close(ready)
			}
		}()
		a, ok := <-ready
		if !ok {
			return nil, <-errs
		}
		peers[i] = a
	}
	res, err := synthMaster(ctx, o, nil, peers, secret, log)
	cancel()
	wg.Wait()
	return res, err
}

// runSyntheticNetlab starts the master and the slaves on the lab's hosts
// through the agent and collects the master's result.
func runSyntheticNetlab(ctx context.Context, o *synthOptions, secret string, log io.Writer) (*synthResult, error) {
	log = &lockedWriter{w: log} // every rank's stderr goes there
	prefix := o.rankPrefix
	if prefix == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		prefix = []string{exe, "synthetic-rank"}
	}
	// Each host's NIC addresses, as the agent exports them.
	addrs := make([][]string, len(o.Hosts))
	for i, h := range o.Hosts {
		out, err := exec.CommandContext(ctx, o.Rsh, h, `echo "$NETLAB_ADDRS"`).Output()
		if err != nil {
			return nil, fmt.Errorf("asking %s for its addresses through %s: %w", h, o.Rsh, err)
		}
		addrs[i] = strings.Split(strings.TrimSpace(string(out)), ",")
		if len(addrs[i]) < 2 {
			return nil, fmt.Errorf("host %s has %d NIC(s) (%q): two rails are needed", h, len(addrs[i]), out)
		}
		addrs[i] = addrs[i][:2]
	}
	start := func(host string, args []string, stdout io.Writer) (*exec.Cmd, io.WriteCloser, error) {
		words := append(slices.Clone(prefix), args...)
		for i, w := range words {
			words[i] = shellQuote(w)
		}
		cmd := exec.CommandContext(ctx, o.Rsh, host, strings.Join(words, " "))
		cmd.Env = append(os.Environ(), envSecret+"="+secret)
		cmd.Stdout, cmd.Stderr = stdout, log
		stdin, err := cmd.StdinPipe() // ranks stop when it closes
		if err != nil {
			return nil, nil, err
		}
		return cmd, stdin, cmd.Start()
	}
	common := []string{"-n", fmt.Sprint(o.N), "-runs", fmt.Sprint(o.Runs), "-seed", fmt.Sprint(o.Seed),
		"-types", synthTypeNames(o.Types), "-configs", strings.Join(o.Configs, ","),
		"-slow-delay", o.SlowDelay.String(), "-fast-delay", o.FastDelay.String(),
		"-min-chunk", fmt.Sprint(o.MinChunk), "-split-at", fmt.Sprint(o.SplitAt), "-port", fmt.Sprint(o.Port)}
	var slaves []*exec.Cmd
	var stdins []io.WriteCloser
	defer func() {
		for _, s := range stdins {
			_ = s.Close()
		}
		for _, c := range slaves {
			_ = c.Wait()
		}
	}()
	var peers []string
	for i, h := range o.Hosts[1:] {
		args := append([]string{"-role", "slave", "-index", fmt.Sprint(i), "-addrs", strings.Join(addrs[i+1], ",")}, common...)
		cmd, stdin, err := start(h, args, log)
		if err != nil {
			return nil, fmt.Errorf("starting the slave on %s: %w", h, err)
		}
		slaves = append(slaves, cmd)
		stdins = append(stdins, stdin)
		var p []string
		for nic, a := range addrs[i+1] {
			p = append(p, net.JoinHostPort(a, fmt.Sprint(o.Port+nic)))
		}
		peers = append(peers, strings.Join(p, ","))
	}
	var out strings.Builder
	args := append([]string{"-role", "master", "-addrs", strings.Join(addrs[0], ","), "-peers", strings.Join(peers, ";")}, common...)
	master, stdin, err := start(o.Hosts[0], args, &out)
	if err != nil {
		return nil, fmt.Errorf("starting the master on %s: %w", o.Hosts[0], err)
	}
	err = master.Wait()
	_ = stdin.Close()
	if err != nil {
		return nil, fmt.Errorf("master on %s: %w", o.Hosts[0], err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "SYNTHETIC "); ok {
			var res synthResult
			if err := json.Unmarshal([]byte(rest), &res); err != nil {
				return nil, fmt.Errorf("the master's result: %w", err)
			}
			return &res, nil
		}
	}
	return nil, fmt.Errorf("no result from the master: %q", out.String())
}

// lockedWriter serialises writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./,:=;", r))
	}) < 0 && !strings.Contains(s, ";") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func synthTypeNames(ts []SyntheticType) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Name)
	}
	return b.String()
}

// SyntheticRankCommand is the rank side of `hetbench synthetic` in netlab
// mode (the hidden command synthetic-rank): a slave serves the master's
// sessions, the master runs the benchmark and prints its result. Both
// stop when their standard input closes. The per-job secret comes from
// $HETBENCH_SECRET.
func SyntheticRankCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("synthetic-rank", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "master or slave")
	index := fs.Int("index", 0, "slave index")
	addrs := fs.String("addrs", "", "this host's NIC addresses, slow first")
	peers := fs.String("peers", "", "master: each slave's rail addresses (ip:port,ip:port;...)")
	o := synthOptions{Rsh: "agent"}
	fs.IntVar(&o.N, "n", 10000, "")
	fs.IntVar(&o.Runs, "runs", 3, "")
	fs.Uint64Var(&o.Seed, "seed", 1, "")
	types := fs.String("types", "ABCDEF", "")
	configs := fs.String("configs", strings.Join(syntheticConfigs, ","), "")
	fs.DurationVar(&o.SlowDelay, "slow-delay", 0, "")
	fs.DurationVar(&o.FastDelay, "fast-delay", 0, "")
	fs.Int64Var(&o.MinChunk, "min-chunk", 1024, "")
	fs.Int64Var(&o.SplitAt, "split-at", 0, "")
	fs.IntVar(&o.Port, "port", 47400, "")
	if err := fs.Parse(args); err != nil {
		return bench.ExitUsage
	}
	secret, err := hex.DecodeString(os.Getenv(envSecret))
	if err != nil || len(secret) < transport.MinSecretLen {
		fmt.Fprintf(stderr, "synthetic-rank: $%s must hold the job's secret (hex)\n", envSecret)
		return bench.ExitUsage
	}
	o.Hosts = []string{"master", "slave"}
	o.SlowRate, o.FastRate = 1, 1
	if err := o.finish(*types, *configs); err != nil {
		fmt.Fprintln(stderr, "synthetic-rank:", err)
		return bench.ExitUsage
	}
	nics := strings.Split(*addrs, ",")
	if len(nics) != 2 {
		fmt.Fprintln(stderr, "synthetic-rank: -addrs needs two addresses")
		return bench.ExitUsage
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // stop when the launcher goes away
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	switch *role {
	case "slave":
		var listen []string
		for i, a := range nics {
			listen = append(listen, net.JoinHostPort(a, fmt.Sprint(o.Port+i)))
		}
		if err := synthSlave(ctx, *index, listen, secret, nil); err != nil {
			fmt.Fprintln(stderr, "synthetic-rank:", err)
			return bench.ExitError
		}
		return bench.ExitOK
	case "master":
		var ps [][]string
		for _, p := range strings.Split(*peers, ";") {
			ps = append(ps, strings.Split(p, ","))
		}
		o.Slaves = len(ps)
		res, err := synthMaster(ctx, &o, nics, ps, secret, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "synthetic-rank:", err)
			return bench.ExitError
		}
		b, _ := json.Marshal(res)
		w := bufio.NewWriter(stdout)
		fmt.Fprintf(w, "SYNTHETIC %s\n", b)
		if err := w.Flush(); err != nil {
			return bench.ExitError
		}
		return bench.ExitOK
	}
	fmt.Fprintln(stderr, "synthetic-rank: -role must be master or slave")
	return bench.ExitUsage
}
