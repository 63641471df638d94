package live

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/hetcomm/hetcomm/comm"
)

// emulationFile resolves -emulate: a model JSON or a netlab topology, which
// the ranks read themselves (comm.LoadEmulation, HETCOMM_EMULATE). It
// checks the file and returns its absolute path, its number of ranks, and
// the emulated network's model written as a model file in dir (for
// HETCOMM_MODEL, so that the ranks plan with what they emulate).
func emulationFile(path, dir string) (abs string, size int, model string, err error) {
	m, err := comm.LoadEmulation(path)
	if err != nil {
		return "", 0, "", err
	}
	if abs, err = filepath.Abs(path); err != nil {
		return "", 0, "", err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", 0, "", err
	}
	model = filepath.Join(dir, "emulated-model.json")
	return abs, m.Size(), model, os.WriteFile(model, b, 0o644)
}
