package bootstrap

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestBootstrapLaunchers(t *testing.T) {
	cases := []struct {
		name            string
		env             map[string]string
		launcher        Launcher
		rank, size, loc int
		coord           string
	}{
		{"hetcomm", map[string]string{EnvRank: "2", EnvSize: "4", EnvLocalRank: "1", EnvCoord: "10.0.0.1:5000", EnvSecret: "s"},
			LauncherHetcomm, 2, 4, 1, "10.0.0.1:5000"},
		{"slurm", map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "3", "SLURM_JOB_ID": "17", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "node[07-09]", EnvSecret: "s"},
			LauncherSlurm, 3, 4, 3, ""},
		{"slurm step tasks win", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NODELIST": "localhost", EnvSecret: "s"},
			LauncherSlurm, 1, 2, 0, ""},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1", EnvCoord: "h:1", EnvSecret: "s"},
			LauncherOpenMPI, 1, 2, 1, "h:1"},
		{"mpich", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "3", EnvCoord: "h:1", EnvSecret: "s"},
			LauncherMPICH, 0, 3, 0, "h:1"},
		{"torchrun", map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "10.1.1.1", "MASTER_PORT": "29500", EnvSecret: "s"},
			LauncherTorchrun, 1, 2, 1, "10.1.1.1:29501"},
		{"kubernetes", map[string]string{"JOB_COMPLETION_INDEX": "5", EnvSize: "8", EnvCoord: "job-0.svc:7000", EnvSecret: "s"},
			LauncherKubernetes, 5, 8, 0, "job-0.svc:7000"},
		{"singleton", map[string]string{}, LauncherSingleton, 0, 1, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := FromEnv(envOf(c.env))
			require.NoError(t, err)
			require.Equal(t, c.launcher, b.Launcher)
			require.Equal(t, c.rank, b.Rank)
			require.Equal(t, c.size, b.Size)
			require.Equal(t, c.loc, b.LocalRank)
			if c.coord != "" {
				require.Equal(t, c.coord, b.Coord)
			}
			require.Equal(t, "tcp", b.Transport)
			require.Equal(t, DefaultTimeout, b.Timeout)
			require.NotEmpty(t, b.Job)
		})
	}
}

func TestBootstrapSlurmCoordinator(t *testing.T) {
	env := map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "1", "SLURM_STEP_NODELIST": "cn[003-004]", EnvSecret: "x"}
	a, err := FromEnv(envOf(env))
	require.NoError(t, err)
	env["SLURM_PROCID"] = "3"
	b, err := FromEnv(envOf(env))
	require.NoError(t, err)
	require.Equal(t, a.Coord, b.Coord, "every task derives the same coordinator")
	require.Contains(t, a.Coord, "cn003:")
	require.Equal(t, "slurm-42.1", a.Job)
	env["SLURM_STEP_ID"] = "2"
	c, err := FromEnv(envOf(env))
	require.NoError(t, err)
	require.NotEqual(t, a.Coord, c.Coord, "another step gets another port")
}

func TestBootstrapOverridesAndErrors(t *testing.T) {
	b, err := FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "127.0.0.1:1", EnvSecret: "k",
		EnvTransport: "QUIC", EnvTimeout: "5s", EnvRails: "10.0.0.1, 10.1.0.1", EnvJob: "j1", EnvHost: "10.0.0.1"}))
	require.NoError(t, err)
	require.Equal(t, "quic", b.Transport)
	require.Equal(t, 5*time.Second, b.Timeout)
	require.Equal(t, []string{"10.0.0.1", "10.1.0.1"}, b.Rails)
	require.Equal(t, "j1", b.Job)
	// Env round-trips.
	m := map[string]string{}
	for _, kv := range b.Env() {
		for i := range kv {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	b2, err := FromEnv(envOf(m))
	require.NoError(t, err)
	require.Equal(t, b, b2)

	bad := map[string]map[string]string{
		"rank not int":    {EnvRank: "x", EnvSize: "2"},
		"no size":         {EnvRank: "0"},
		"rank range":      {EnvRank: "2", EnvSize: "2", EnvCoord: "h:1", EnvSecret: "s"},
		"no secret":       {EnvRank: "0", EnvSize: "2", EnvCoord: "h:1"},
		"no coord":        {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", EnvSecret: "s"},
		"bad coord":       {EnvRank: "0", EnvSize: "2", EnvCoord: "nohostport", EnvSecret: "s"},
		"bad transport":   {EnvRank: "0", EnvSize: "1", EnvTransport: "carrier-pigeon"},
		"bad timeout":     {EnvRank: "0", EnvSize: "1", EnvTimeout: "soon"},
		"k8s no size":     {"JOB_COMPLETION_INDEX": "0"},
		"missing secfile": {EnvRank: "0", EnvSize: "2", EnvCoord: "h:1", EnvSecretFile: "/nonexistent/secret"},
	}
	for name, env := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := FromEnv(envOf(env))
			var be *EnvError
			require.True(t, errors.As(err, &be), "want *EnvError, got %v", err)
		})
	}
}

func TestBootstrapSecretFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "secret")
	require.NoError(t, os.WriteFile(f, []byte("  hunter2\n"), 0o600))
	b, err := FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "h:1", EnvSecretFile: f}))
	require.NoError(t, err)
	require.Equal(t, []byte("hunter2"), b.Secret)
	require.NoError(t, os.Chmod(f, 0o644))
	_, err = FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "h:1", EnvSecretFile: f}))
	require.ErrorContains(t, err, "world-readable")
}

func TestExpandHostlist(t *testing.T) {
	cases := map[string][]string{
		"localhost":            {"localhost"},
		"a,b":                  {"a", "b"},
		"node[1-3]":            {"node1", "node2", "node3"},
		"cn[08-10,15],login":   {"cn08", "cn09", "cn10", "cn15", "login"},
		"r[1-2]n[1-2]":         {"r1n1", "r1n2", "r2n1", "r2n2"},
		"gpu[001-002]-ib":      {"gpu001-ib", "gpu002-ib"},
		"x[3]":                 {"x3"},
		"":                     nil,
		"host1,host[2-3],h[9]": {"host1", "host2", "host3", "h9"},
	}
	for in, want := range cases {
		got, err := ExpandHostlist(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"n[1-", "n[3-1]", "n[a-b]", "n]"} {
		_, err := ExpandHostlist(bad)
		require.Error(t, err, bad)
	}
}

func TestBootstrapEmulateAndProbe(t *testing.T) {
	b, err := FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "1", EnvEmulate: "/x/model.json", EnvProbe: "OFF"}))
	require.NoError(t, err)
	require.Equal(t, "/x/model.json", b.Emulate)
	require.Equal(t, "off", b.Probe)
	b, err = FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "1", EnvProbe: "pairwise"}))
	require.NoError(t, err, "the tournament of every pair")
	require.Equal(t, "pairwise", b.Probe)
	_, err = FromEnv(envOf(map[string]string{EnvRank: "0", EnvSize: "1", EnvProbe: "sometimes"}))
	require.ErrorContains(t, err, "probing mode")
}

func TestLocalProcesses(t *testing.T) {
	dir := &Directory{Peers: []Peer{
		{Rank: 0, Host: "a", PID: 10},
		{Rank: 1, Host: "a", PID: 11},
		{Rank: 2, Host: "b", PID: 10},
		{Rank: 3, Host: "a", PID: 10}, // a second rank of rank 0's process
		{Rank: 4, Host: "", PID: 12},
	}}
	require.Equal(t, 2, dir.LocalProcesses(0))
	require.Equal(t, 2, dir.LocalProcesses(1))
	require.Equal(t, 1, dir.LocalProcesses(2))
	require.Equal(t, 1, dir.LocalProcesses(4), "an unknown host is shared with nobody")
}

func TestResolveRails(t *testing.T) {
	local := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
			&net.IPNet{IP: net.ParseIP("10.77.2.3"), Mask: net.CIDRMask(24, 32)},
		}, nil
	}
	got, err := resolveRails([]string{"10.77.2.0/24", "192.168.1.5"}, local)
	require.NoError(t, err)
	require.Equal(t, []string{"10.77.2.3", "192.168.1.5"}, got)
	_, err = resolveRails([]string{"10.99.0.0/16"}, local)
	require.ErrorContains(t, err, "no address in that network")
}

func TestBootstrapRefresh(t *testing.T) {
	b, err := FromEnv(func(k string) string {
		return map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "127.0.0.1:1", EnvSecret: "s", EnvRefresh: "10s"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, b.Refresh)
	require.Contains(t, b.Env(), EnvRefresh+"=10s")
	_, err = FromEnv(func(k string) string {
		return map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "127.0.0.1:1", EnvSecret: "s", EnvRefresh: "often"}[k]
	})
	var be *EnvError
	require.ErrorAs(t, err, &be)
	require.Equal(t, EnvRefresh, be.Var)
}

func TestBootstrapOpTimeout(t *testing.T) {
	env := map[string]string{EnvRank: "0", EnvSize: "2", EnvCoord: "127.0.0.1:1", EnvSecret: "s", EnvOpTimeout: "90s"}
	b, err := FromEnv(envOf(env))
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, b.OpTimeout)
	require.Contains(t, b.Env(), EnvOpTimeout+"=1m30s")
	env[EnvOpTimeout] = "soon"
	_, err = FromEnv(envOf(env))
	var be *EnvError
	require.ErrorAs(t, err, &be)
	require.Equal(t, EnvOpTimeout, be.Var)
}
