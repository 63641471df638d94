package bootstrap

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hetcomm/hetcomm/transport"
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

// env reads a launcher's variables. In every list of names, the first
// that is set wins.
type env func(string) string

func (e env) first(names ...string) (name, value string) {
	for _, n := range names {
		if v := e(n); v != "" {
			return n, v
		}
	}
	return names[0], ""
}

func (e env) set(names ...string) bool {
	_, v := e.first(names...)
	return v != ""
}

// int reads the first set variable of names as an integer.
func (e env) int(names ...string) (int, error) {
	name, v := e.first(names...)
	v = strings.TrimSpace(v)
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &EnvError{Var: name, Msg: fmt.Sprintf("%q is not an integer", v)}
	}
	return n, nil
}

// launcher describes how one launcher announces a rank.
type launcher struct {
	name Launcher
	// detect says whether the process was started by this launcher.
	detect func(env) bool
	// rank, size and local name the variables that hold the rank, the
	// size and (optional) the local rank.
	rank, size, local []string
	// sizeMissing, when set, is the error when no size variable is set.
	sizeMissing string
	// job derives the job id ("" or a bare prefix: FromEnv makes one up).
	job func(env) string
	// coord derives the coordinator's address when HETCOMM_COORD is unset
	// ("" if the launcher offers none).
	coord func(env) (string, error)
}

// launchers are tried in order; the HETCOMM_* contract wins, a process
// that none recognises is a world of one.
var launchers = []launcher{
	{
		name:        LauncherHetcomm,
		detect:      func(e env) bool { return e.set(EnvRank) },
		rank:        []string{EnvRank},
		size:        []string{EnvSize},
		local:       []string{EnvLocalRank},
		sizeMissing: "not set (HETCOMM_RANK is)",
	},
	{
		name: LauncherSlurm,
		detect: func(e env) bool {
			return e.set("SLURM_PROCID") && e.set("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
		},
		rank:  []string{"SLURM_PROCID"},
		size:  []string{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"},
		local: []string{"SLURM_LOCALID"},
		job:   func(e env) string { return "slurm-" + slurmStep(e) },
		coord: slurmCoord,
	},
	{
		name:   LauncherOpenMPI,
		detect: func(e env) bool { return e.set("OMPI_COMM_WORLD_RANK") },
		rank:   []string{"OMPI_COMM_WORLD_RANK"},
		size:   []string{"OMPI_COMM_WORLD_SIZE"},
		local:  []string{"OMPI_COMM_WORLD_LOCAL_RANK"},
		job: func(e env) string {
			_, id := e.first("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE")
			return "ompi-" + id
		},
	},
	{
		name:   LauncherMPICH,
		detect: func(e env) bool { return e.set("PMI_RANK") },
		rank:   []string{"PMI_RANK"},
		size:   []string{"PMI_SIZE"},
		local:  []string{"PMI_LOCAL_RANK"},
		job: func(e env) string {
			_, id := e.first("PMI_JOBID", "PALS_APID")
			return "mpich-" + id
		},
	},
	{
		name:   LauncherTorchrun,
		detect: func(e env) bool { return e.set("RANK") && e.set("WORLD_SIZE") },
		rank:   []string{"RANK"},
		size:   []string{"WORLD_SIZE"},
		local:  []string{"LOCAL_RANK"},
		job:    func(e env) string { return "torchrun-" + e("TORCHELASTIC_RUN_ID") },
		coord:  torchrunCoord,
	},
	{
		name:        LauncherKubernetes,
		detect:      func(e env) bool { return e.set("JOB_COMPLETION_INDEX") },
		rank:        []string{"JOB_COMPLETION_INDEX"},
		size:        []string{EnvSize},
		sizeMissing: "not set: an Indexed Job must set it to spec.completions",
	},
}

// slurmStep is a Slurm job step's "job.step" id.
func slurmStep(e env) string {
	_, job := e.first("SLURM_JOB_ID", "SLURM_JOBID")
	_, step := e.first("SLURM_STEP_ID", "SLURM_STEPID")
	return job + "." + step
}

// slurmCoord puts the coordinator on the step's first node, at a port
// derived from the step's ids.
func slurmCoord(e env) (string, error) {
	_, nodes := e.first("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")
	hosts, err := ExpandHostlist(nodes)
	if err != nil || len(hosts) == 0 {
		return "", &EnvError{Var: "SLURM_STEP_NODELIST", Msg: fmt.Sprintf("cannot find rank 0's node in %q (set HETCOMM_COORD)", nodes)}
	}
	return net.JoinHostPort(hosts[0], strconv.Itoa(slurmPort(slurmStep(e)))), nil
}

// slurmPort derives the coordinator port of a Slurm job step from its
// "job.step" id, so that every task computes the same one and concurrent
// steps differ.
func slurmPort(step string) int {
	h := uint32(2166136261)
	for _, c := range []byte(step) {
		h ^= uint32(c)
		h *= 16777619
	}
	return 20000 + int(h%20000)
}

// torchrunCoord puts the coordinator beside torchrun's own store, which
// listens on MASTER_PORT: at the next port.
func torchrunCoord(e env) (string, error) {
	if e("MASTER_ADDR") == "" {
		return "", nil
	}
	port, err := e.int("MASTER_PORT")
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(e("MASTER_ADDR"), strconv.Itoa(port+1)), nil
}

// FromEnv derives a Bootstrap from environment variables, read through
// getenv (os.Getenv when nil). The HETCOMM_* contract wins; without
// HETCOMM_RANK it recognises, in order, Slurm, Open MPI, MPICH/PALS,
// torchrun and Kubernetes Indexed Jobs; with none of them the process is a
// world of one. The HETCOMM_* variables other than the rank, size and
// local rank apply under every launcher.
func FromEnv(getenv func(string) string) (*Bootstrap, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	e := env(getenv)
	b := &Bootstrap{Transport: "tcp", Timeout: DefaultTimeout, Launcher: LauncherSingleton, Size: 1}
	for _, l := range launchers {
		if l.detect(e) {
			if err := l.read(e, b); err != nil {
				return nil, err
			}
			break
		}
	}
	if err := readOptions(e, b); err != nil {
		return nil, err
	}
	if b.Job == "" || strings.HasSuffix(b.Job, "-") {
		b.Job = string(b.Launcher) + "-job"
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	return b, nil
}

// read fills in what this launcher says: rank, size, local rank, job and
// the coordinator when HETCOMM_COORD does not name it.
func (l launcher) read(e env, b *Bootstrap) error {
	b.Launcher = l.name
	var err error
	if b.Rank, err = e.int(l.rank...); err != nil {
		return err
	}
	if l.sizeMissing != "" && !e.set(l.size...) {
		return &EnvError{Var: l.size[0], Msg: l.sizeMissing}
	}
	if b.Size, err = e.int(l.size...); err != nil {
		return err
	}
	if len(l.local) > 0 && e.set(l.local...) {
		if b.LocalRank, err = e.int(l.local...); err != nil {
			return err
		}
	}
	if l.job != nil {
		b.Job = l.job(e)
	}
	if l.coord != nil && e(EnvCoord) == "" {
		if b.Coord, err = l.coord(e); err != nil {
			return err
		}
	}
	return nil
}

// readOptions reads the HETCOMM_* variables that apply under every
// launcher.
func readOptions(e env, b *Bootstrap) error {
	if v := e(EnvCoord); v != "" {
		b.Coord = v
	}
	if v := e(EnvJob); v != "" {
		b.Job = v
	}
	if v := e(EnvTransport); v != "" {
		b.Transport = strings.ToLower(strings.TrimSpace(v))
	}
	var err error
	if v := e(EnvTimeout); v != "" {
		if b.Timeout, err = time.ParseDuration(v); err != nil {
			return &EnvError{Var: EnvTimeout, Msg: fmt.Sprintf("%q is not a duration such as 30s", v)}
		}
	}
	b.Host = e(EnvHost)
	for _, r := range strings.Split(e(EnvRails), ",") {
		if r = strings.TrimSpace(r); r != "" {
			b.Rails = append(b.Rails, r)
		}
	}
	b.RailsAuto = e(EnvRailsAuto)
	if _, _, err := parseRailsAuto(b.RailsAuto); err != nil {
		return &EnvError{Var: EnvRailsAuto, Msg: err.Error() + " (want on, off or networks such as 10.77.1.0/24)"}
	}
	if b.RailPolicy = e(EnvRailPolicy); b.RailPolicy != "" {
		if _, err := transport.ParseRailPolicy(b.RailPolicy); err != nil {
			return &EnvError{Var: EnvRailPolicy, Msg: fmt.Sprintf("%q is not a rail policy (auto, single, mux, agg or muxagg)", b.RailPolicy)}
		}
	}
	b.Model = e(EnvModel)
	b.Probe = strings.ToLower(strings.TrimSpace(e(EnvProbe)))
	b.Emulate = e(EnvEmulate)
	b.Watch = e(EnvWatch)
	if v := e(EnvOpTimeout); v != "" {
		d, derr := time.ParseDuration(v)
		if derr != nil || d < 0 {
			return &EnvError{Var: EnvOpTimeout, Msg: fmt.Sprintf("%q is not a positive duration such as 2m", v)}
		}
		b.OpTimeout = d
	}
	if v := e(EnvRefresh); v != "" {
		d, derr := time.ParseDuration(v)
		if derr != nil || d < 0 {
			return &EnvError{Var: EnvRefresh, Msg: fmt.Sprintf("%q is not a positive duration such as 30s", v)}
		}
		b.Refresh = d
	}
	if s := e(EnvSecret); s != "" {
		b.Secret = []byte(s)
	} else if f := e(EnvSecretFile); f != "" {
		if b.Secret, err = readSecretFile(f); err != nil {
			return err
		}
	}
	return nil
}
