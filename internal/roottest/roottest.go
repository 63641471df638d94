// Package roottest gates the tests that change the machine they run on:
// those that build network namespaces (internal/netlab and its users),
// shape links with tc, inject loss with nftables or start a local Slurm
// cluster. Plain `go test ./...` never runs them, even as root: they run
// only when the environment variable HETCOMM_ROOT_TESTS is 1, as .ci/run
// sets it (it runs as root and installs the tools). Without the variable
// such a test skips, and says how to run it; with it, a test whose
// prerequisites are missing (not Linux, not root, a tool not installed)
// fails and names what is missing, since whoever set the variable asked
// for the test to run.
package roottest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// Env is the environment variable that enables the root tests: "1" runs
// them, unset, empty or "0" skips them.
const Env = "HETCOMM_ROOT_TESTS"

// packages names the Debian package that provides each tool a root test
// may need (what .ci/run installs).
var packages = map[string]string{
	"ip":        "iproute2",
	"tc":        "iproute2",
	"nft":       "nftables",
	"unshare":   "util-linux",
	"pgrep":     "procps",
	"slurmctld": "slurm-wlm",
	"slurmd":    "slurm-wlm",
	"srun":      "slurm-wlm",
	"sbatch":    "slurm-wlm",
	"munged":    "munge",
}

// Require skips t unless HETCOMM_ROOT_TESTS=1, and fails it when the
// variable is set but this is not Linux, the process is not root, or one
// of tools is not in PATH. what says in a few words what the test does
// that needs root ("builds network namespaces", "starts a local Slurm").
func Require(t testing.TB, what string, tools ...string) {
	t.Helper()
	skip, fail := check(os.Getenv(Env), runtime.GOOS, os.Geteuid(), func(tool string) error {
		_, err := exec.LookPath(tool)
		return err
	}, what, tools)
	switch {
	case fail != "":
		t.Fatal(fail)
	case skip != "":
		t.Skip(skip)
	}
}

// check is Require's decision: a reason to skip, a reason to fail, or
// neither.
func check(env, goos string, euid int, lookPath func(string) error, what string, tools []string) (skip, fail string) {
	switch env {
	case "", "0":
		return fmt.Sprintf("root test (%s): set %s=1 to run it, as root on Linux with %s installed (.ci/run does)",
			what, Env, strings.Join(tools, ", ")), ""
	case "1":
	default:
		return "", fmt.Sprintf("%s=%q: want 1 (run the root tests) or 0 (skip them)", Env, env)
	}
	if goos != "linux" {
		return "", fmt.Sprintf("%s=1, but this root test (%s) needs Linux, not %s", Env, what, goos)
	}
	if euid != 0 {
		return "", fmt.Sprintf("%s=1, but this root test (%s) needs root (effective uid %d)", Env, what, euid)
	}
	var missing []string
	for _, tool := range tools {
		if lookPath(tool) != nil {
			m := tool
			if p, ok := packages[tool]; ok {
				m += " (Debian package " + p + ")"
			}
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Sprintf("%s=1, but this root test (%s) needs %s, not found in PATH (.ci/run installs the tools)",
			Env, what, strings.Join(missing, ", "))
	}
	return "", ""
}
