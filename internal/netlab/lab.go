package netlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config controls how a lab is brought up and found again. The zero value
// is ready to use.
type Config struct {
	// Name overrides the topology's name as the lab's name, so one
	// topology can run twice side by side. Zero: the topology's name.
	Name string
	// StateDir holds one directory per lab (the resolved topology and the
	// agent script). Zero: DefaultStateDir.
	StateDir string
	// Recreate makes Up take an existing lab of the same name down first.
	// Zero: Up fails with an error matching ErrExists.
	Recreate bool
	// Log, if set, receives every command as it runs.
	Log io.Writer
	// Grace is how long processes still running in a lab's namespaces get
	// between SIGTERM and SIGKILL when it goes down. Zero: 2s.
	Grace time.Duration
}

// DefaultStateDir is where labs keep their state (tmpfs: gone at reboot,
// like the namespaces).
const DefaultStateDir = "/run/netlab"

func (c Config) stateDir() string {
	if c.StateDir != "" {
		return c.StateDir
	}
	return DefaultStateDir
}

func (c Config) grace() time.Duration {
	if c.Grace > 0 {
		return c.Grace
	}
	return 2 * time.Second
}

// ErrExists is matched (errors.Is) by Up's error when the lab already
// exists and Config.Recreate is not set.
var ErrExists = errors.New("netlab: lab already exists")

// ErrNoLab is matched when a lab, host or namespace cannot be found.
var ErrNoLab = errors.New("netlab: no such lab")

// CmdError reports an external command that failed, with its stderr.
type CmdError struct {
	Cmd    Command
	Stderr string
	Err    error
}

func (e *CmdError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	} else {
		msg = e.Err.Error() + ": " + msg
	}
	return "netlab: " + e.Cmd.String() + ": " + msg
}

func (e *CmdError) Unwrap() error { return e.Err }

// Tools lists the external programs netlab runs.
var Tools = []string{"ip", "tc", "nft", "unshare"}

// CheckTools reports the first of Tools missing from PATH, naming the
// Debian package that provides it.
func CheckTools() error {
	pkg := map[string]string{"ip": "iproute2", "tc": "iproute2", "nft": "nftables", "unshare": "util-linux"}
	for _, t := range Tools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("netlab: %s not found in PATH (apt-get install %s)", t, pkg[t])
		}
	}
	return nil
}

func run(ctx context.Context, log io.Writer, c Command) (string, error) {
	if log != nil {
		fmt.Fprintln(log, "+ "+c.String())
	}
	cmd := exec.CommandContext(ctx, c.Args[0], c.Args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), &CmdError{Cmd: c, Stderr: stderr.String(), Err: err}
	}
	return stdout.String(), nil
}

// Lab is a lab that is up (or was found in the state directory).
type Lab struct {
	// Name is the lab's name and Prefix its namespace prefix.
	Name, Prefix string
	// Topology is the topology it was built from, with Name as given.
	Topology *Topology
	r        *resolved
	cfg      Config
}

func newLab(t *Topology, cfg Config) (*Lab, error) {
	r, err := t.resolve()
	if err != nil {
		return nil, err
	}
	name := t.Name
	if cfg.Name != "" {
		name = cfg.Name
	}
	if !labNameRE.MatchString(name) {
		return nil, fmt.Errorf("netlab: lab name %q: want 1-20 lower-case letters, digits or '-'", name)
	}
	return &Lab{Name: name, Prefix: Prefix(name), Topology: t, r: r, cfg: cfg}, nil
}

// Up builds the lab described by t. If a lab of that name exists it fails
// with ErrExists, or takes it down first when cfg.Recreate is set. On any
// error it removes whatever it had created before returning.
func Up(ctx context.Context, t *Topology, cfg Config) (*Lab, error) {
	if err := CheckTools(); err != nil {
		return nil, err
	}
	l, err := newLab(t, cfg)
	if err != nil {
		return nil, err
	}
	existing, err := namespacesOf(l.Prefix)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		if !cfg.Recreate {
			return nil, fmt.Errorf("%w: %s (namespaces %s); take it down first or recreate it", ErrExists, l.Name, strings.Join(existing, " "))
		}
		if err := Down(ctx, l.Name, cfg); err != nil {
			return nil, err
		}
	}
	// Write the state first, so that a crash half-way leaves enough
	// behind for down.
	if err := l.writeState(); err != nil {
		return nil, err
	}
	if err := l.apply(ctx, l.r.upCommands(l.Prefix)); err != nil {
		return nil, err
	}
	return l, nil
}

// apply runs cmds in order; on the first failure it takes the lab down and
// returns the failure (and any error of the teardown).
func (l *Lab) apply(ctx context.Context, cmds []Command) error {
	for _, c := range cmds {
		if _, err := run(ctx, l.cfg.Log, c); err != nil {
			// Clean up even if ctx is what failed.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			derr := Down(dctx, l.Name, l.cfg)
			cancel()
			return errors.Join(err, derr)
		}
	}
	return nil
}

func (l *Lab) stateDir() string { return filepath.Join(l.cfg.stateDir(), l.Prefix) }

// AgentPath is the agent script of the lab: AGENT HOST COMMAND runs
// COMMAND (one shell command line, as ssh takes it) in HOST's namespace,
// HOST being a host name or one of its addresses. Give it to hetrun as
// --rsh.
func (l *Lab) AgentPath() string { return filepath.Join(l.stateDir(), "agent") }

func (l *Lab) writeState() error {
	dir := l.stateDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netlab: state: %w", err)
	}
	t := *l.Topology
	t.Name = l.Name
	data, err := json.MarshalIndent(&t, "", "  ")
	if err != nil {
		return fmt.Errorf("netlab: state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "topology.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("netlab: state: %w", err)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	script := AgentScript(l.Prefix, &t, ip, unshare)
	if err := os.WriteFile(l.AgentPath(), []byte(script), 0o755); err != nil {
		return fmt.Errorf("netlab: state: %w", err)
	}
	return nil
}

// Open finds the lab called name from its state directory.
func Open(name string, cfg Config) (*Lab, error) {
	if !labNameRE.MatchString(name) {
		return nil, fmt.Errorf("netlab: lab name %q: want 1-20 lower-case letters, digits or '-'", name)
	}
	path := filepath.Join(cfg.stateDir(), Prefix(name), "topology.json")
	t, err := Load(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s (no %s)", ErrNoLab, name, path)
		}
		return nil, err
	}
	cfg.Name = name
	return newLab(t, cfg)
}

// Hosts returns the host names in topology order.
func (l *Lab) Hosts() []string {
	var out []string
	for _, h := range l.Topology.Hosts {
		out = append(out, h.Name)
	}
	return out
}

// Namespace returns the network namespace of a host, given by name or by
// one of its addresses.
func (l *Lab) Namespace(host string) (string, error) {
	h, err := l.host(host)
	if err != nil {
		return "", err
	}
	return HostNamespace(l.Prefix, l.Topology.Hosts[h].Name), nil
}

// SetRateOut re-shapes what a host sends on one of its NICs to mbit
// Mbit/s (the rate tc applies: the topology's scale is not applied), as a
// network whose links change under a running job. Only NICs with the plain
// shaper (no per-destination classes) can be re-shaped.
func (l *Lab) SetRateOut(ctx context.Context, host string, nic int, mbit float64) error {
	h, err := l.host(host)
	if err != nil {
		return err
	}
	if nic < 0 || nic >= len(l.Topology.Hosts[h].NICs) {
		return fmt.Errorf("netlab: host %s has no NIC %d", host, nic)
	}
	if !(mbit > 0) {
		return fmt.Errorf("netlab: rate %v Mbit/s is not positive", mbit)
	}
	tc := []string{"tc", "-n", HostNamespace(l.Prefix, l.Topology.Hosts[h].Name)}
	for _, c := range shaperClasses(tc, "change", NICDevice(nic), mbit) {
		if _, err := run(ctx, l.cfg.Log, c); err != nil {
			return err
		}
	}
	return nil
}

// SwitchNamespace returns the namespace holding the lab's bridges.
func (l *Lab) SwitchNamespace() string { return SwitchNamespace(l.Prefix) }

func (l *Lab) host(host string) (int, error) {
	host = host[strings.LastIndexByte(host, '@')+1:]
	if i, ok := l.r.host[host]; ok {
		return i, nil
	}
	for i, as := range l.r.addrs {
		for _, a := range as {
			if a.String() == host {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: lab %s has no host or address %q", ErrNoLab, l.Name, host)
}

// Addr returns the address of host's nic-th NIC.
func (l *Lab) Addr(host string, nic int) (string, error) {
	h, err := l.host(host)
	if err != nil {
		return "", err
	}
	if nic < 0 || nic >= len(l.r.addrs[h]) {
		return "", fmt.Errorf("netlab: host %q has no nic %d", host, nic)
	}
	return l.r.addrs[h][nic].String(), nil
}

// Addrs returns the first address of every host, in topology order: the
// --hosts list for hetrun.
func (l *Lab) Addrs() []string {
	var out []string
	for _, as := range l.r.addrs {
		out = append(out, as[0].String())
	}
	return out
}

// hostnameScript sets the UTS namespace's hostname to $0 and runs "$@".
const hostnameScript = `echo "$0" > /proc/sys/kernel/hostname && exec "$@"`

// ExecArgs returns the command line that runs argv in host's namespace
// with its own hostname: ip netns exec NS unshare --uts sh -c ... HOST
// argv...
func (l *Lab) ExecArgs(host string, argv ...string) ([]string, error) {
	h, err := l.host(host)
	if err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, errors.New("netlab: exec: no command")
	}
	name := l.Topology.Hosts[h].Name
	args := []string{"ip", "netns", "exec", HostNamespace(l.Prefix, name), "unshare", "--uts", "sh", "-c", hostnameScript, name}
	return append(args, argv...), nil
}

// Env returns the variables that exec and the agent add for a command on
// host: NETLAB_LAB (the prefix), NETLAB_HOST, NETLAB_ADDRS (its NICs'
// addresses, comma-separated) and, when getenv("NETLAB_RAILS") is set and
// getenv("HETCOMM_RAILS") is not, HETCOMM_RAILS: one hetcomm rail per NIC,
// the NIC whose address host names first.
func (l *Lab) Env(host string, getenv func(string) string) ([]string, error) {
	h, err := l.host(host)
	if err != nil {
		return nil, err
	}
	host = host[strings.LastIndexByte(host, '@')+1:]
	var addrs, rails []string
	for _, a := range l.r.addrs[h] {
		addrs = append(addrs, a.String())
		if a.String() == host {
			rails = append([]string{host}, rails...)
		} else {
			rails = append(rails, a.String())
		}
	}
	env := []string{"NETLAB_LAB=" + l.Prefix, "NETLAB_HOST=" + l.Topology.Hosts[h].Name, "NETLAB_ADDRS=" + strings.Join(addrs, ",")}
	if getenv("NETLAB_RAILS") != "" && getenv("HETCOMM_RAILS") == "" {
		env = append(env, "HETCOMM_RAILS="+strings.Join(rails, ","))
	}
	return env, nil
}

// Command returns an *exec.Cmd that runs argv in host's namespace (see
// ExecArgs). The caller sets its I/O and starts it.
func (l *Lab) Command(ctx context.Context, host string, argv ...string) (*exec.Cmd, error) {
	args, err := l.ExecArgs(host, argv...)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, args[0], args[1:]...), nil
}

// Down takes the lab down (see the package function Down).
func (l *Lab) Down(ctx context.Context) error { return Down(ctx, l.Name, l.cfg) }

// Down removes the lab called name: it kills every process still running
// in its namespaces (SIGTERM, then SIGKILL after cfg.Grace), deletes the
// namespaces (which removes their veths, bridges, qdiscs and nftables
// tables) and its state directory. It works from the namespace names
// alone, so it also cleans up after a crash; a lab that does not exist is
// not an error.
func Down(ctx context.Context, name string, cfg Config) error {
	if !labNameRE.MatchString(name) {
		return fmt.Errorf("netlab: lab name %q: want 1-20 lower-case letters, digits or '-'", name)
	}
	prefix := Prefix(name)
	nss, err := namespacesOf(prefix)
	if err != nil {
		return err
	}
	var errs []error
	if err := killIn(nss, cfg.grace()); err != nil {
		errs = append(errs, err)
	}
	for _, c := range downCommands(nss) {
		if _, err := run(ctx, cfg.Log, c); err != nil {
			// Someone else may have removed it meanwhile.
			if _, serr := os.Stat(filepath.Join(netnsDir, c.Args[3])); serr == nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(cfg.stateDir(), prefix)); err != nil {
		errs = append(errs, fmt.Errorf("netlab: %w", err))
	}
	return errors.Join(errs...)
}

// DownAll takes down every netlab lab on the machine: every namespace
// whose name starts with NamespacePrefix and is shaped like a lab's, and
// every state directory.
func DownAll(ctx context.Context, cfg Config) error {
	labs, err := List(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range labs {
		if err := Down(ctx, strings.TrimPrefix(l.Prefix, NamespacePrefix), cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LabInfo describes a lab found on the machine.
type LabInfo struct {
	Prefix string
	// Namespaces are the lab's namespaces that exist.
	Namespaces []string
	// Pids are the processes running in them.
	Pids []int
	// State is true when the lab's state directory exists (a lab without
	// it, or without namespaces, is a leftover that down removes).
	State bool
}

// Name is the lab's name.
func (i LabInfo) Name() string { return strings.TrimPrefix(i.Prefix, NamespacePrefix) }

// List finds every netlab lab on the machine, from namespace names and
// state directories.
func List(cfg Config) ([]LabInfo, error) {
	byPrefix := map[string]*LabInfo{}
	get := func(p string) *LabInfo {
		if byPrefix[p] == nil {
			byPrefix[p] = &LabInfo{Prefix: p}
		}
		return byPrefix[p]
	}
	nss, err := allNamespaces()
	if err != nil {
		return nil, err
	}
	for _, ns := range nss {
		if p := labOf(ns); p != "" {
			li := get(p)
			li.Namespaces = append(li.Namespaces, ns)
		}
	}
	ents, err := os.ReadDir(cfg.stateDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && labOf(SwitchNamespace(e.Name())) == e.Name() {
			get(e.Name()).State = true
		}
	}
	var out []LabInfo
	for _, li := range byPrefix {
		pids, _ := pidsIn(li.Namespaces)
		for _, ps := range pids {
			li.Pids = append(li.Pids, ps...)
		}
		sort.Ints(li.Pids)
		out = append(out, *li)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Prefix < out[j].Prefix })
	return out, nil
}

const netnsDir = "/run/netns"

func allNamespaces() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out, nil
}

// namespacesOf lists the existing namespaces of the lab with this prefix.
func namespacesOf(prefix string) ([]string, error) {
	all, err := allNamespaces()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range all {
		if labOf(ns) == prefix {
			out = append(out, ns)
		}
	}
	return out, nil
}

// pidsIn maps each namespace to the processes whose network namespace it
// is, by comparing /proc/PID/ns/net with the namespace's bind mount.
func pidsIn(namespaces []string) (map[string][]int, error) {
	type key struct{ dev, ino uint64 }
	want := map[key]string{}
	for _, ns := range namespaces {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netnsDir, ns), &st); err != nil {
			continue
		}
		want[key{uint64(st.Dev), st.Ino}] = ns
	}
	out := map[string][]int{}
	if len(want) == 0 {
		return out, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/"+e.Name()+"/ns/net", &st); err != nil {
			continue // gone, or a kernel thread
		}
		if ns, ok := want[key{uint64(st.Dev), st.Ino}]; ok {
			out[ns] = append(out[ns], pid)
		}
	}
	return out, nil
}

// killIn stops every process running in the namespaces: SIGTERM, then
// SIGKILL to those left after grace.
func killIn(namespaces []string, grace time.Duration) error {
	pids, err := pidsIn(namespaces)
	if err != nil {
		return err
	}
	if len(pids) == 0 {
		return nil
	}
	for _, ps := range pids {
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		left, err := pidsIn(namespaces)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	left, err := pidsIn(namespaces)
	if err != nil {
		return err
	}
	for _, ps := range left {
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	// SIGKILL is not instant: wait a little so that the namespaces are
	// really released when they are deleted.
	for range 100 {
		if left, _ = pidsIn(namespaces); len(left) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	var still []string
	for ns, ps := range left {
		still = append(still, fmt.Sprintf("%s: %v", ns, ps))
	}
	sort.Strings(still)
	return fmt.Errorf("netlab: processes survive SIGKILL in %s", strings.Join(still, "; "))
}

// AgentScript returns the agent script of a lab: a POSIX sh script that,
// called as AGENT HOST COMMAND..., maps HOST (a host name or address,
// optionally user@) to its namespace and runs the command line there with
// the host's hostname: ip netns exec NS unshare --uts sh -c COMMAND.
// ip and unshare are the absolute paths of those programs.
func AgentScript(prefix string, t *Topology, ip, unshare string) string {
	r, err := t.resolve()
	if err != nil {
		return "#!/bin/sh\necho 'netlab agent: invalid topology' >&2\nexit 255\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `#!/bin/sh
# netlab agent for lab %s, generated by netlab up.
# usage: agent HOST COMMAND...   (HOST: a host name or address, optionally user@HOST)
# Runs COMMAND, one shell command line as ssh takes it, inside HOST's
# network namespace, with HOST's name as hostname. For hetrun:
#   hetrun --rsh THIS_FILE --hosts %s -n N PROGRAM
if [ $# -lt 2 ]; then
	echo "usage: $0 HOST COMMAND..." >&2
	exit 255
fi
host=${1##*@}
shift
case "$host" in
`, prefix, strings.Join(func() []string {
		var as []string
		for _, a := range r.addrs {
			as = append(as, a[0].String())
		}
		return as
	}(), ","))
	for i, h := range t.Hosts {
		alts := []string{h.Name}
		for _, a := range r.addrs[i] {
			alts = append(alts, a.String())
		}
		fmt.Fprintf(&b, "%s) ns=%s; name=%s; addrs=%s ;;\n", strings.Join(alts, "|"), shellQuote(HostNamespace(prefix, h.Name)), h.Name, strings.Join(alts[1:], ","))
	}
	fmt.Fprintf(&b, `*) echo "netlab agent: lab %s has no host or address $host" >&2; exit 255 ;;
esac
# What the command may want to know. With NETLAB_RAILS set (e.g. in
# hetrun's environment), a multi-NIC host gets one hetcomm rail per NIC,
# the addressed NIC first, unless HETCOMM_RAILS is set.
export NETLAB_LAB=%s NETLAB_HOST="$name" NETLAB_ADDRS="$addrs"
if [ -n "${NETLAB_RAILS:-}" ] && [ -z "${HETCOMM_RAILS:-}" ]; then
	rails=
	case ",$addrs," in *",$host,"*) rails=$host ;; esac
	IFS=,
	for a in $addrs; do [ "$a" = "$host" ] || rails=${rails:+$rails,}$a; done
	unset IFS
	export HETCOMM_RAILS="$rails"
fi
exec %s netns exec "$ns" %s --uts sh -c 'echo "$0" > /proc/sys/kernel/hostname && exec sh -c "$1"' "$name" "$*"
`, prefix, prefix, shellQuote(ip), shellQuote(unshare))
	return b.String()
}
