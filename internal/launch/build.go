package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// IsGoPackage reports whether arg names a Go package to build rather than
// an executable: a directory holding .go files, or an import path that is
// not an existing file.
func IsGoPackage(arg string) bool {
	st, err := os.Stat(arg)
	if err == nil {
		if !st.IsDir() {
			return false
		}
		matches, _ := filepath.Glob(filepath.Join(arg, "*.go"))
		return len(matches) > 0
	}
	// Not a path here: an import path such as example.com/x/cmd/y.
	return strings.Contains(arg, "/") && !strings.HasPrefix(arg, "/") && !strings.HasPrefix(arg, ".")
}

// BuildPackage builds the Go package pkg once into dir and returns the
// executable's path.
func BuildPackage(ctx context.Context, pkg, dir string) (string, error) {
	name := filepath.Base(strings.TrimRight(pkg, "/"))
	if name == "." || name == "" || name == string(filepath.Separator) {
		wd, _ := os.Getwd()
		name = filepath.Base(wd)
	}
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("launch: building %s: %w", pkg, err)
	}
	return out, nil
}

// ParseHostfile reads a host file: one host per line, optionally followed
// by "slots=N" (the host is then listed N times); '#' starts a comment.
func ParseHostfile(data string) ([]string, error) {
	var hosts []string
	for n, line := range strings.Split(data, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		slots := 1
		for _, opt := range f[1:] {
			v, ok := strings.CutPrefix(opt, "slots=")
			if !ok {
				return nil, fmt.Errorf("launch: hostfile line %d: unknown option %q (want slots=N)", n+1, opt)
			}
			if _, err := fmt.Sscanf(v, "%d", &slots); err != nil || slots < 1 || slots > 4096 {
				return nil, fmt.Errorf("launch: hostfile line %d: bad slots %q", n+1, v)
			}
		}
		for i := 0; i < slots; i++ {
			hosts = append(hosts, f[0])
		}
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("launch: hostfile lists no hosts")
	}
	return hosts, nil
}
