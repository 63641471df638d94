package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The launcher links the launch contract (bootstrap) and the links it
// needs, not the runtime: not comm, its planners or its probe, and not
// quic-go, which lives in transport/quic so that only programs that may
// use it link it.
func TestLauncherDependencies(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no go tool found to run go list")
		}
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	const mod = "github.com/hetcomm/hetcomm/"
	forbidden := []string{mod + "comm", mod + "collective", mod + "netprobe", mod + "transport/quic", "github.com/quic-go/"}
	found := map[string]bool{}
	for _, d := range deps {
		found[d] = true
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f) && strings.HasSuffix(f, "/") {
				t.Errorf("hetrun depends on %s", d)
			}
		}
	}
	if !found[mod+"bootstrap"] {
		t.Errorf("hetrun does not depend on bootstrap: go list said\n%s", out)
	}
}
