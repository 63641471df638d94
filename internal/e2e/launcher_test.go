package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// localAgent writes an ssh-like agent that runs its command on this host
// (AGENT HOST COMMAND) and, like ssh, stays alive, its arguments visible,
// while the command runs in a shell of its own, in a session of its own
// (setsid): killing the agent does not kill the rank, as killing ssh
// does not kill a rank on another host.
func localAgent(t *testing.T) string {
	agent := filepath.Join(t.TempDir(), "agent")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\nshift\nsetsid /bin/sh -c \"$1\"\n"), 0o755))
	return agent
}

// cmdlines returns every process's command line, its arguments joined by
// spaces.
func cmdlines() map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(d), "%d", &pid)
		out[pid] = string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '}))
	}
	return out
}

// TestSecretNotInArgv: with --hosts and an agent, the job secret reaches
// every rank on the agent's stdin, and no process's command line (the
// agent's, the shell's, the rank's) shows it while the job runs.
func TestSecretNotInArgv(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to read command lines")
	}
	bin := binaries(t)
	cmd := exec.Command(filepath.Join(bin, "hetrun"), "-n", "2", "--hosts", "a,b", "--rsh", localAgent(t),
		"/bin/sh", "-c", `echo "secret of ${#HETCOMM_SECRET} bytes"; sleep 2`)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	seen := map[int]string{}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		for pid, line := range cmdlines() {
			if strings.Contains(line, "HETCOMM_SECRET=") {
				seen[pid] = line
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Wait(), "%s", out.String())
	require.Empty(t, seen, "command lines that carry the job secret")
	require.Contains(t, out.String(), "[0] secret of 48 bytes")
	require.Contains(t, out.String(), "[1] secret of 48 bytes")
}

// TestRanksDieWithHetrun: when hetrun is killed (SIGKILL, which it cannot
// catch), no rank survives it, whether started locally or through an
// agent.
func TestRanksDieWithHetrun(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc to read command lines")
	}
	bin := binaries(t)
	for _, how := range []string{"local", "agent"} {
		t.Run(how, func(t *testing.T) {
			marker := fmt.Sprintf("%ds", 3600+time.Now().UnixNano()%100000)
			rank := filepath.Join(bin, "bigsend") + " -sleep " + marker
			args := []string{"-n", "3"}
			if how == "agent" {
				// One "remote" host, reached through the agent.
				args = append(args, "--hosts", "127.0.0.1", "--rsh", localAgent(t))
			}
			args = append(args, strings.Fields(rank)...)
			cmd := exec.Command(filepath.Join(bin, "hetrun"), args...)
			cmd.Env = cleanEnv()
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			sc := bufio.NewScanner(stdout)
			for up := 0; up < 3 && sc.Scan(); {
				if strings.HasSuffix(sc.Text(), "ready") {
					up++
				}
			}
			ranks := func() []string {
				var live []string
				for _, line := range cmdlines() {
					if line == rank { // the ranks, not hetrun or an agent, whose arguments hold the same words
						live = append(live, line)
					}
				}
				return live
			}
			require.Eventually(t, func() bool { return len(ranks()) == 3 }, 10*time.Second, 10*time.Millisecond, "the ranks run")
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			cmd.Wait()
			require.Eventually(t, func() bool { return len(ranks()) == 0 }, 5*time.Second, 20*time.Millisecond,
				"ranks outlived hetrun: %v", ranks())
		})
	}
}

// TestHetrunStdin: hetrun's stdin reaches rank 0 (locally and through an
// agent, behind the secret), the other ranks read nothing, and a stdin
// that never ends does not keep hetrun waiting once the ranks are done.
func TestHetrunStdin(t *testing.T) {
	bin := binaries(t)
	for _, how := range []string{"local", "agent"} {
		t.Run(how, func(t *testing.T) {
			args := []string{"-n", "2"}
			if how == "agent" {
				args = append(args, "--hosts", "127.0.0.1", "--rsh", localAgent(t))
			}
			args = append(args, "/bin/sh", "-c", `read line; echo "got: $line"`)
			cmd := exec.Command(filepath.Join(bin, "hetrun"), args...)
			cmd.Env = cleanEnv()
			cmd.Stdin = strings.NewReader("a line for rank 0\n")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Contains(t, string(out), "[0] got: a line for rank 0")
			require.Contains(t, string(out), "[1] got: \n")

			// A stdin that stays open: hetrun ends with its ranks.
			r, w, err := os.Pipe()
			require.NoError(t, err)
			defer w.Close()
			cmd = exec.Command(filepath.Join(bin, "hetrun"), append(args[:len(args)-3], "/bin/true")...)
			cmd.Env = cleanEnv()
			cmd.Stdin = r
			done := make(chan error, 1)
			go func() { done <- cmd.Run() }()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("hetrun waited for its stdin after the ranks had ended")
			}
			r.Close()
		})
	}
}

// TestHetrunPanicBlame: when a rank panics, the others learn that it
// failed and why (not that it "closed its communicator"), and hetrun
// names it, as a panic, with its status, though the others may exit
// first.
func TestHetrunPanicBlame(t *testing.T) {
	bin := binaries(t)
	cmd := exec.Command(filepath.Join(bin, "hetrun"), "-n", "3", filepath.Join(bin, "bigsend"), "-panic", "1")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	require.Equal(t, 2, ee.ExitCode(), "hetrun exits with the panicking rank's status\n%s", out)
	require.Contains(t, string(out), "hetrun: rank 1 panicked (exit status 2)")
	// A rank learns from rank 1 itself that it failed, and why: in the
	// Barrier, or still in Init if rank 1 got through Init first. (The
	// other may instead name the first one, which exits on its error
	// without a word, if it notices that first.)
	require.Regexp(t, `\[[02]\] bigsend: .*comm: (Barrier|Bcast): rank 1: failed: panicked: rank 1 fails on purpose`, string(out))
	require.NotContains(t, string(out), "closed its communicator")
}
