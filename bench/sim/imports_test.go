package sim

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPureImports keeps the simulations pure: neither this package nor
// any package of the module it depends on may import the runtime's I/O
// packages or start processes.
func TestPureImports(t *testing.T) {
	const module = "github.com/hetcomm/hetcomm"
	forbidden := []string{module + "/comm", module + "/transport", module + "/netprobe", "os/exec"}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	seen := map[string]bool{}
	var walk func(path string, chain []string)
	walk = func(path string, chain []string) {
		if seen[path] {
			return
		}
		seen[path] = true
		chain = append(chain, path)
		for _, f := range forbidden {
			require.False(t, path == f || strings.HasPrefix(path, f+"/"), "imports %s: %s", f, strings.Join(chain, " -> "))
		}
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			return // the standard library and other modules: only the direct import is checked
		}
		pkg, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), 0)
		require.NoError(t, err, path)
		for _, imp := range pkg.Imports {
			walk(imp, chain)
		}
	}
	walk(module+"/bench/sim", nil)
	require.Contains(t, seen, module+"/collective", "the walk reached the planners")
}
