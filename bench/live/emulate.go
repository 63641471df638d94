package live

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/netlab"
)

// TopologyModel turns a netlab topology into the model its shaping allows:
// for each ordered pair of hosts (in the file's order) the rate tbf and htb
// let through (min of the sender's out-rate, the receiver's in-rate, a pair
// rate and, across clusters, the backbone) and the latency_ms of its pairs.
// hetcomm's user-space emulation (HETCOMM_EMULATE) reproduces it without
// root, latencies included.
func TopologyModel(t *netlab.Topology) (*collective.Model, error) {
	n := len(t.Hosts)
	m := &collective.Model{Latency: collective.Matrix(n, 0), Bandwidth: collective.Matrix(n, 0)}
	lat := t.LatencyMatrix()
	for i, a := range t.Hosts {
		for j, b := range t.Hosts {
			if i == j {
				continue
			}
			mbit, err := t.ExpectedRate(a.Name, b.Name)
			if err != nil {
				return nil, err
			}
			m.Bandwidth[i][j] = mbit * 1e6 / 8
			if lat != nil {
				m.Latency[i][j] = lat[i][j] / 1e3
			}
		}
	}
	return m, m.Validate()
}

// emulationFile resolves -emulate: a model JSON is used as is; a netlab
// topology is converted (TopologyModel) into a model file in dir. It
// returns the model file's absolute path and its number of ranks.
func emulationFile(path, dir string) (string, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, err
	}
	var probe struct {
		Hosts json.RawMessage `json:"hosts"`
	}
	_ = json.Unmarshal(b, &probe)
	if probe.Hosts == nil {
		var m collective.Model
		if err := json.Unmarshal(b, &m); err != nil {
			return "", 0, fmt.Errorf("%s: %w", path, err)
		}
		if err := m.Validate(); err != nil {
			return "", 0, fmt.Errorf("%s: %w", path, err)
		}
		abs, err := filepath.Abs(path)
		return abs, m.Size(), err
	}
	t, err := netlab.Load(path)
	if err != nil {
		return "", 0, err
	}
	m, err := TopologyModel(t)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	out := filepath.Join(dir, "emulated-model.json")
	mb, err := json.Marshal(m)
	if err != nil {
		return "", 0, err
	}
	return out, m.Size(), os.WriteFile(out, mb, 0o644)
}
