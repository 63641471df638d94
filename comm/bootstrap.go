package comm

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/transport"
)

// The environment contract between a launcher and comm.Init. hetrun sets
// these; under other launchers comm derives what it can from theirs.
const (
	EnvRank       = "HETCOMM_RANK"        // this rank, 0 <= rank < size
	EnvSize       = "HETCOMM_SIZE"        // number of ranks
	EnvLocalRank  = "HETCOMM_LOCAL_RANK"  // rank among those on this host (optional)
	EnvCoord      = "HETCOMM_COORD"       // host:port where rank 0 runs the coordinator
	EnvSecret     = "HETCOMM_SECRET"      // per-job secret (any string)
	EnvSecretFile = "HETCOMM_SECRET_FILE" // or a file holding it (must not be world-readable)
	EnvTransport  = "HETCOMM_TRANSPORT"   // tcp (default), quic, udp
	EnvTimeout    = "HETCOMM_TIMEOUT"     // Go duration: start-up and per-operation timeout
	EnvJob        = "HETCOMM_JOB"         // job id (optional; derived from the launcher)
	EnvHost       = "HETCOMM_HOST"        // address other ranks use to reach this one (optional)
	EnvRails      = "HETCOMM_RAILS"       // comma-separated rails: local addresses, or networks (CIDR) resolved to this host's address in them (optional)
	EnvRailPolicy = "HETCOMM_RAIL_POLICY" // auto (default), single, mux, agg or muxagg (optional)
	EnvModel      = "HETCOMM_MODEL"       // cost-model JSON file (optional)
	EnvProbe      = "HETCOMM_PROBE"       // link probing at start-up: full, cached (default) or off
	EnvEmulate    = "HETCOMM_EMULATE"     // a model JSON whose rates and latencies the links emulate (optional)
	EnvRefresh    = "HETCOMM_REFRESH"     // Go duration: run the background model refresher at this interval (optional)
)

// Launcher names the launcher a Bootstrap was derived from.
type Launcher string

// Recognised launchers.
const (
	LauncherHetcomm    Launcher = "hetcomm"    // hetrun or the HETCOMM_* variables by hand
	LauncherSlurm      Launcher = "slurm"      // srun
	LauncherOpenMPI    Launcher = "openmpi"    // mpirun from Open MPI
	LauncherMPICH      Launcher = "mpich"      // mpiexec from MPICH (Hydra, PALS)
	LauncherTorchrun   Launcher = "torchrun"   // torchrun / torch.distributed.run
	LauncherKubernetes Launcher = "kubernetes" // an Indexed Job
	LauncherSingleton  Launcher = "singleton"  // started alone: a world of one
)

// DefaultTimeout is the start-up and operation timeout when none is set.
const DefaultTimeout = 60 * time.Second

// Bootstrap is what one rank needs to join its world. comm.Init reads it
// from the environment (see [BootstrapFromEnv]) unless Config provides one.
type Bootstrap struct {
	Rank      int
	Size      int
	LocalRank int
	// Coord is host:port of the coordinator, which rank 0 runs.
	Coord string
	// Secret authenticates every connection of the job.
	Secret []byte
	// Job identifies the job; connections from another job are refused.
	Job string
	// Transport is tcp, quic or udp.
	Transport string
	// Timeout bounds start-up and, by default, every operation.
	Timeout time.Duration
	// Host is the address this rank advertises; empty means: the local
	// address of the route to the coordinator.
	Host string
	// Rails lists local addresses to listen on, one per rail, or networks
	// in CIDR form (10.77.2.0/24), each meaning this host's address in it;
	// empty means one rail on Host.
	Rails []string
	// RailPolicy names the rail policy (transport.ParseRailPolicy) used
	// when Config.RailPolicy is left at its zero value; "" means auto.
	RailPolicy string
	// Model is a cost-model JSON file to use instead of probing; optional.
	Model string
	// Probe is the probing mode at start-up: "full", "cached" or "off";
	// "" means cached (or off when Model is set).
	Probe string
	// Emulate is a model JSON file (latency and bandwidth matrices): each
	// rank shapes what it sends to rank j in user space to the rate and
	// one-way delay of row i, column j, so a heterogeneous network, with
	// latencies, can be reproduced on one machine without root.
	Emulate string
	// Refresh is the background refresher's interval used when
	// Config.Refresh is zero; 0 means off.
	Refresh time.Duration
	// Launcher says where the values came from.
	Launcher Launcher
}

// BootstrapError reports an unusable launch environment.
type BootstrapError struct {
	Var string // the variable at fault, if one is
	Msg string
}

func (e *BootstrapError) Error() string {
	if e.Var != "" {
		return "comm: bootstrap: " + e.Var + ": " + e.Msg
	}
	return "comm: bootstrap: " + e.Msg
}

// BootstrapFromEnv derives a Bootstrap from environment variables, read
// through getenv (os.Getenv when nil). The HETCOMM_* contract wins; without
// HETCOMM_RANK it recognises, in order, Slurm, Open MPI, MPICH/PALS,
// torchrun and Kubernetes Indexed Jobs; with none of them the process is a
// world of one.
func BootstrapFromEnv(getenv func(string) string) (*Bootstrap, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	b := &Bootstrap{Transport: "tcp", Timeout: DefaultTimeout}
	var err error
	intVar := func(name string) (int, error) {
		v := strings.TrimSpace(getenv(name))
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, &BootstrapError{Var: name, Msg: fmt.Sprintf("%q is not an integer", v)}
		}
		return n, nil
	}
	optInt := func(name string) (int, error) {
		if getenv(name) == "" {
			return 0, nil
		}
		return intVar(name)
	}

	switch {
	case getenv(EnvRank) != "":
		b.Launcher = LauncherHetcomm
		if b.Rank, err = intVar(EnvRank); err != nil {
			return nil, err
		}
		if getenv(EnvSize) == "" {
			return nil, &BootstrapError{Var: EnvSize, Msg: "not set (HETCOMM_RANK is)"}
		}
		if b.Size, err = intVar(EnvSize); err != nil {
			return nil, err
		}
		if b.LocalRank, err = optInt(EnvLocalRank); err != nil {
			return nil, err
		}
	case getenv("SLURM_PROCID") != "" && (getenv("SLURM_STEP_NUM_TASKS") != "" || getenv("SLURM_NTASKS") != ""):
		b.Launcher = LauncherSlurm
		if b.Rank, err = intVar("SLURM_PROCID"); err != nil {
			return nil, err
		}
		sizeVar := "SLURM_STEP_NUM_TASKS"
		if getenv(sizeVar) == "" {
			sizeVar = "SLURM_NTASKS"
		}
		if b.Size, err = intVar(sizeVar); err != nil {
			return nil, err
		}
		if b.LocalRank, err = optInt("SLURM_LOCALID"); err != nil {
			return nil, err
		}
		job := getenv("SLURM_JOB_ID")
		if job == "" {
			job = getenv("SLURM_JOBID")
		}
		step := getenv("SLURM_STEP_ID")
		if step == "" {
			step = getenv("SLURM_STEPID")
		}
		b.Job = "slurm-" + job + "." + step
		if getenv(EnvCoord) == "" {
			nodes := getenv("SLURM_STEP_NODELIST")
			if nodes == "" {
				nodes = getenv("SLURM_JOB_NODELIST")
			}
			if nodes == "" {
				nodes = getenv("SLURM_NODELIST")
			}
			hosts, herr := ExpandHostlist(nodes)
			if herr != nil || len(hosts) == 0 {
				return nil, &BootstrapError{Var: "SLURM_STEP_NODELIST", Msg: fmt.Sprintf("cannot find rank 0's node in %q (set HETCOMM_COORD)", nodes)}
			}
			b.Coord = net.JoinHostPort(hosts[0], strconv.Itoa(slurmPort(job, step)))
		}
	case getenv("OMPI_COMM_WORLD_RANK") != "":
		b.Launcher = LauncherOpenMPI
		if b.Rank, err = intVar("OMPI_COMM_WORLD_RANK"); err != nil {
			return nil, err
		}
		if b.Size, err = intVar("OMPI_COMM_WORLD_SIZE"); err != nil {
			return nil, err
		}
		if b.LocalRank, err = optInt("OMPI_COMM_WORLD_LOCAL_RANK"); err != nil {
			return nil, err
		}
		b.Job = "ompi-" + firstNonEmpty(getenv("OMPI_MCA_ess_base_jobid"), getenv("PMIX_NAMESPACE"))
	case getenv("PMI_RANK") != "":
		b.Launcher = LauncherMPICH
		if b.Rank, err = intVar("PMI_RANK"); err != nil {
			return nil, err
		}
		if b.Size, err = intVar("PMI_SIZE"); err != nil {
			return nil, err
		}
		if b.LocalRank, err = optInt("PMI_LOCAL_RANK"); err != nil {
			return nil, err
		}
		b.Job = "mpich-" + firstNonEmpty(getenv("PMI_JOBID"), getenv("PALS_APID"))
	case getenv("RANK") != "" && getenv("WORLD_SIZE") != "":
		b.Launcher = LauncherTorchrun
		if b.Rank, err = intVar("RANK"); err != nil {
			return nil, err
		}
		if b.Size, err = intVar("WORLD_SIZE"); err != nil {
			return nil, err
		}
		if b.LocalRank, err = optInt("LOCAL_RANK"); err != nil {
			return nil, err
		}
		b.Job = "torchrun-" + getenv("TORCHELASTIC_RUN_ID")
		if getenv(EnvCoord) == "" && getenv("MASTER_ADDR") != "" {
			port, perr := intVar("MASTER_PORT")
			if perr != nil {
				return nil, perr
			}
			// torchrun's own store listens on MASTER_PORT: use the next one.
			b.Coord = net.JoinHostPort(getenv("MASTER_ADDR"), strconv.Itoa(port+1))
		}
	case getenv("JOB_COMPLETION_INDEX") != "":
		b.Launcher = LauncherKubernetes
		if b.Rank, err = intVar("JOB_COMPLETION_INDEX"); err != nil {
			return nil, err
		}
		if getenv(EnvSize) == "" {
			return nil, &BootstrapError{Var: EnvSize, Msg: "not set: an Indexed Job must set it to spec.completions"}
		}
		if b.Size, err = intVar(EnvSize); err != nil {
			return nil, err
		}
	default:
		b.Launcher = LauncherSingleton
		b.Rank, b.Size = 0, 1
	}

	if v := getenv(EnvCoord); v != "" {
		b.Coord = v
	}
	if v := getenv(EnvJob); v != "" {
		b.Job = v
	}
	if v := getenv(EnvTransport); v != "" {
		b.Transport = strings.ToLower(strings.TrimSpace(v))
	}
	if v := getenv(EnvTimeout); v != "" {
		d, derr := time.ParseDuration(v)
		if derr != nil {
			return nil, &BootstrapError{Var: EnvTimeout, Msg: fmt.Sprintf("%q is not a duration such as 30s", v)}
		}
		b.Timeout = d
	}
	b.Host = getenv(EnvHost)
	if v := getenv(EnvRails); v != "" {
		for _, r := range strings.Split(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				b.Rails = append(b.Rails, r)
			}
		}
	}
	b.RailPolicy = getenv(EnvRailPolicy)
	if b.RailPolicy != "" {
		if _, err := transport.ParseRailPolicy(b.RailPolicy); err != nil {
			return nil, &BootstrapError{Var: EnvRailPolicy, Msg: fmt.Sprintf("%q is not a rail policy (auto, single, mux, agg or muxagg)", b.RailPolicy)}
		}
	}
	b.Model = getenv(EnvModel)
	b.Probe = strings.ToLower(strings.TrimSpace(getenv(EnvProbe)))
	b.Emulate = getenv(EnvEmulate)
	if v := getenv(EnvRefresh); v != "" {
		d, derr := time.ParseDuration(v)
		if derr != nil || d < 0 {
			return nil, &BootstrapError{Var: EnvRefresh, Msg: fmt.Sprintf("%q is not a positive duration such as 30s", v)}
		}
		b.Refresh = d
	}
	if s := getenv(EnvSecret); s != "" {
		b.Secret = []byte(s)
	} else if f := getenv(EnvSecretFile); f != "" {
		if b.Secret, err = readSecretFile(f); err != nil {
			return nil, err
		}
	}
	if b.Job == "" || strings.HasSuffix(b.Job, "-") {
		b.Job = string(b.Launcher) + "-job"
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate checks the bootstrap for consistency.
func (b *Bootstrap) Validate() error {
	switch {
	case b.Size < 1:
		return &BootstrapError{Var: EnvSize, Msg: fmt.Sprintf("size %d: must be at least 1", b.Size)}
	case b.Rank < 0 || b.Rank >= b.Size:
		return &BootstrapError{Var: EnvRank, Msg: fmt.Sprintf("rank %d out of range [0,%d)", b.Rank, b.Size)}
	case b.Timeout <= 0:
		return &BootstrapError{Var: EnvTimeout, Msg: fmt.Sprintf("%v: must be positive", b.Timeout)}
	}
	switch b.Probe {
	case "", "full", "cached", "off":
	default:
		return &BootstrapError{Var: EnvProbe, Msg: fmt.Sprintf("unknown probing mode %q (want full, cached or off)", b.Probe)}
	}
	switch b.Transport {
	case "tcp", "quic", "udp", "tls", "mem":
	default:
		return &BootstrapError{Var: EnvTransport, Msg: fmt.Sprintf("unknown transport %q (want tcp, quic, udp or tls)", b.Transport)}
	}
	if b.Size > 1 {
		if len(b.Secret) == 0 {
			return &BootstrapError{Msg: "no job secret: set HETCOMM_SECRET or HETCOMM_SECRET_FILE (hetrun does this for you)"}
		}
		if b.Coord == "" {
			return &BootstrapError{Var: EnvCoord, Msg: fmt.Sprintf("not set: under %s, set it to host:port where rank 0 can listen", b.Launcher)}
		}
		if _, _, err := net.SplitHostPort(b.Coord); err != nil && b.Transport != "mem" {
			return &BootstrapError{Var: EnvCoord, Msg: fmt.Sprintf("%q is not host:port", b.Coord)}
		}
	}
	return nil
}

// Env returns the HETCOMM_* variables that reproduce b, as KEY=VALUE
// strings for a child process.
func (b *Bootstrap) Env() []string {
	env := []string{
		EnvRank + "=" + strconv.Itoa(b.Rank),
		EnvSize + "=" + strconv.Itoa(b.Size),
		EnvLocalRank + "=" + strconv.Itoa(b.LocalRank),
		EnvCoord + "=" + b.Coord,
		EnvSecret + "=" + string(b.Secret),
		EnvTransport + "=" + b.Transport,
		EnvTimeout + "=" + b.Timeout.String(),
		EnvJob + "=" + b.Job,
	}
	if b.Host != "" {
		env = append(env, EnvHost+"="+b.Host)
	}
	if len(b.Rails) > 0 {
		env = append(env, EnvRails+"="+strings.Join(b.Rails, ","))
	}
	if b.RailPolicy != "" {
		env = append(env, EnvRailPolicy+"="+b.RailPolicy)
	}
	if b.Model != "" {
		env = append(env, EnvModel+"="+b.Model)
	}
	if b.Probe != "" {
		env = append(env, EnvProbe+"="+b.Probe)
	}
	if b.Emulate != "" {
		env = append(env, EnvEmulate+"="+b.Emulate)
	}
	if b.Refresh > 0 {
		env = append(env, EnvRefresh+"="+b.Refresh.String())
	}
	return env
}

// NewSecret returns a fresh random job secret, hex encoded.
func NewSecret() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("comm: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func readSecretFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &BootstrapError{Var: EnvSecretFile, Msg: err.Error()}
	}
	if st.Mode().Perm()&0o004 != 0 {
		return nil, &BootstrapError{Var: EnvSecretFile, Msg: fmt.Sprintf("%s is world-readable (chmod 600 it)", path)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &BootstrapError{Var: EnvSecretFile, Msg: err.Error()}
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return nil, &BootstrapError{Var: EnvSecretFile, Msg: path + " is empty"}
	}
	return []byte(s), nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// slurmPort derives the coordinator port of a Slurm job step from its ids,
// so that every task computes the same one and concurrent steps differ.
func slurmPort(job, step string) int {
	h := uint32(2166136261)
	for _, c := range []byte(job + "." + step) {
		h ^= uint32(c)
		h *= 16777619
	}
	return 20000 + int(h%20000)
}

// ExpandHostlist expands a Slurm hostlist expression such as
// "node[01-03,7],login" into its host names, in order.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		// Take one item up to a comma outside brackets.
		depth, end := 0, len(s)
		for i, c := range s {
			if c == '[' {
				depth++
			} else if c == ']' {
				depth--
			} else if c == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := s[:end]
		if end < len(s) {
			s = s[end+1:]
		} else {
			s = ""
		}
		if item == "" {
			continue
		}
		hosts, err := expandItem(item)
		if err != nil {
			return nil, err
		}
		out = append(out, hosts...)
	}
	return out, nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "]") {
			return nil, errors.New("comm: bad hostlist item " + item)
		}
		return []string{item}, nil
	}
	closeIdx := strings.IndexByte(item[open:], ']')
	if closeIdx < 0 {
		return nil, errors.New("comm: unbalanced bracket in hostlist item " + item)
	}
	closeIdx += open
	prefix, ranges, rest := item[:open], item[open+1:closeIdx], item[closeIdx+1:]
	tails, err := expandItem(rest)
	if rest == "" {
		tails, err = []string{""}, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || z < a || z-a > 100000 {
			return nil, errors.New("comm: bad hostlist range " + r)
		}
		width := len(lo)
		for n := a; n <= z; n++ {
			num := fmt.Sprintf("%0*d", width, n)
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}
