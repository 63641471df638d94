package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoppedPeer: rank 0 sends rank 1 a 1000 MiB message; one of them is
// stopped (SIGSTOP) in the middle. A stopped process keeps its sockets,
// and its kernel keeps acknowledging TCP, so nothing closes: the survivor
// must still fail, naming the stopped rank, once it has heard nothing of
// the stopped process's own (heartbeat, pulse, byte) for FailAfter,
// whether it was blocked writing to a full socket or waiting for the rest
// of the message. The documented bound is FailAfter + Heartbeat/2 (5.5
// s; docs/liveness.md); the test allows three times that, as a loaded
// machine delays the processes, and logs the time. It used to hang on
// tcp and tls, and then took 20 s for a stopped sender (before pulses).
func TestStoppedPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("stops processes in the middle of a 1000 MiB message (-short)")
	}
	const documented = 5*time.Second + time.Second/2
	bin := filepath.Join(binaries(t), "bigsend")
	for _, tr := range []string{"tcp", "tls", "udp", "quic"} {
		for _, stopped := range []int{1, 0} {
			t.Run(fmt.Sprintf("transport=%s/stopped=%d", tr, stopped), func(t *testing.T) {
				code, stderr, took := runStopped(t, bin, tr, stopped)
				survivor := 1 - stopped
				t.Logf("rank %d failed %.1f s after rank %d stopped (documented bound %.2f s): %s",
					survivor, took.Seconds(), stopped, documented.Seconds(), strings.TrimSpace(stderr))
				require.Equal(t, 1, code, "the survivor (rank %d) must fail, not finish or hang; stderr:\n%s", survivor, stderr)
				require.Regexp(t, fmt.Sprintf(`comm: [a-z]+: rank %d: `, stopped), stderr, "the error names the stopped rank")
				require.Less(t, took, 3*documented, "detection far beyond the documented bound")
			})
		}
	}
}

// runStopped runs the two ranks over transport tr, stops rank stopped once
// both have formed the world and the message is under way, and waits (at
// most a minute) for the other. It returns the survivor's exit status,
// its stderr and how long after the stop it ended.
func runStopped(t *testing.T, bin, tr string, stopped int) (code int, stderr string, took time.Duration) {
	coord := freeAddr(t)
	procs := make([]*exec.Cmd, 2)
	errs := make([]*bytes.Buffer, 2)
	ready := make(chan int, 2)
	for r := range procs {
		cmd := exec.Command(bin, "-mib", "1000")
		cmd.Env = append(cleanEnv(), "HETCOMM_RANK="+fmt.Sprint(r), "HETCOMM_SIZE=2", "HETCOMM_COORD="+coord,
			"HETCOMM_SECRET=stopped-peer-test-secret-0123456789", "HETCOMM_TRANSPORT="+tr, "HETCOMM_PROBE=off", "HETCOMM_TIMEOUT=30s")
		errs[r] = &bytes.Buffer{}
		cmd.Stderr = errs[r]
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		procs[r] = cmd
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "ready" {
					ready <- r
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	})
	for range procs {
		select {
		case <-ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("the world did not form; stderr:\n%s\n%s", errs[0], errs[1])
		}
	}
	time.Sleep(300 * time.Millisecond) // the message is under way
	require.NoError(t, procs[stopped].Process.Signal(syscall.SIGSTOP))
	start := time.Now()
	survivor := procs[1-stopped]
	done := make(chan error, 1)
	go func() { done <- survivor.Wait() }()
	select {
	case err := <-done:
		took = time.Since(start)
		code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	case <-time.After(time.Minute):
		t.Fatalf("rank %d still runs a minute after rank %d stopped: a hang", 1-stopped, stopped)
	}
	return code, errs[1-stopped].String(), took
}
