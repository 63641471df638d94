package comm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hetcomm/hetcomm/bootstrap"
	"github.com/hetcomm/hetcomm/collective"
	"github.com/hetcomm/hetcomm/internal/commtest"
	"github.com/stretchr/testify/require"
)

// A topology of three hosts on one switch: h1 sends at 80 Mbit/s, h2
// receives at 40, and h1-h3 has 5 ms of latency each way.
const emulatedTopology = `{
  "name": "emu3",
  "bridges": [{"name": "lan"}],
  "hosts": [
    {"name": "h1", "nics": [{"bridge": "lan", "rate_out": 80, "rate_in": 400}]},
    {"name": "h2", "nics": [{"bridge": "lan", "rate_out": 400, "rate_in": 40}]},
    {"name": "h3", "nics": [{"bridge": "lan", "rate_out": 400, "rate_in": 400}]}
  ],
  "pairs": [{"a": "h1", "b": "h3", "latency_ms": 5}]
}`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

func TestLoadEmulation(t *testing.T) {
	m, err := LoadEmulation(writeFile(t, "topo.json", emulatedTopology))
	require.NoError(t, err)
	require.Equal(t, 3, m.Size())
	require.InDelta(t, 40e6/8, m.Bandwidth[0][1], 1, "h1->h2: h2's ingress")
	require.InDelta(t, 80e6/8, m.Bandwidth[0][2], 1, "h1->h3: h1's egress")
	require.InDelta(t, 400e6/8, m.Bandwidth[2][0], 1)
	require.InDelta(t, 0.005, m.Latency[0][2], 1e-12)
	require.InDelta(t, 0.005, m.Latency[2][0], 1e-12)
	require.Zero(t, m.Latency[0][1])

	// A model file is read as one.
	mp := writeFile(t, "model.json", `{"latency": [[0, 0.001], [0.001, 0]], "bandwidth": [[0, 1e6], [2e6, 0]]}`)
	m, err = LoadEmulation(mp)
	require.NoError(t, err)
	require.Equal(t, 2e6, m.Bandwidth[1][0])

	for name, text := range map[string]string{
		"a misspelt field":   `{"name": "x", "bridges": [{"name": "lan"}], "hosts": [{"name": "a", "nics": [{"bridge": "lan", "rate_out": 10, "rate_in": 10}]}], "pairz": []}`,
		"hosts apart":        `{"name": "x", "bridges": [{"name": "l1"}, {"name": "l2"}], "hosts": [{"name": "a", "nics": [{"bridge": "l1", "rate_out": 10, "rate_in": 10}]}, {"name": "b", "nics": [{"bridge": "l2", "rate_out": 10, "rate_in": 10}]}]}`,
		"not JSON":           `{"hosts": [`,
		"a model of nothing": `{"latency": [[0, 1]], "bandwidth": [[0]]}`,
	} {
		p := writeFile(t, "bad.json", text)
		_, err := LoadEmulation(p)
		require.Error(t, err, name)
		require.ErrorContains(t, err, p, name)
	}
	_, err = LoadEmulation(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "missing.json")
}

// Ranks started with HETCOMM_EMULATE naming a topology shape their links
// to it: 400 KB from rank 0 to rank 1 (h2 receives at 5 MB/s) cannot take
// less than about 80 ms, and a topology of another size is refused.
func TestEmulateTopology(t *testing.T) {
	topo := writeFile(t, "topo.json", emulatedTopology)
	comms := startWorld(t, 3, "mem", func(c *Config) { c.Bootstrap.Emulate = topo })
	ctx := context.Background()
	msg := make([]byte, 400_000)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	var took time.Duration
	errs := commtest.Errors(comms, func(r int, c *Comm) error {
		switch r {
		case 0:
			return c.Send(ctx, 1, 0, msg)
		case 1:
			start := time.Now()
			got, _, err := c.Recv(ctx, 0, 0)
			took = time.Since(start)
			if err == nil && !bytes.Equal(got, msg) {
				return fmt.Errorf("rank 1 got %d bytes, not the %d sent", len(got), len(msg))
			}
			return err
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	// The shaper's bucket lets a burst through at first; the rest is paced.
	require.Greater(t, took, 40*time.Millisecond, "400 KB at 5 MB/s came in %v", took)
	// A model probed on the emulated links is cached apart from the bare ones'.
	require.Contains(t, comms[0].w.probeKey().Transport, "+emulated:")
	require.NotContains(t, startWorld(t, 2, "mem", nil)[0].w.probeKey().Transport, "emulated")

	w := newWorld(&bootstrap.Bootstrap{Size: 2, Emulate: topo}, Config{})
	require.ErrorContains(t, w.emulate(), "describes 3 ranks, the world has 2")
}

// The ranks of one process read a model file once; each gets its own
// copy, and a file that changed is read again.
func TestLoadModelOnce(t *testing.T) {
	m := collective.NewUniformModel(2, 1e-3, 1e6)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	path := writeFile(t, "model.json", string(b))
	a, err := LoadModel(path)
	require.NoError(t, err)
	a.Bandwidth[0][1] = 1 // a rank changing its copy...
	c, err := LoadModel(path)
	require.NoError(t, err)
	require.Equal(t, 1e6, c.Bandwidth[0][1]) // ...changes no other rank's
	require.NotSame(t, a, c)

	m.Bandwidth[0][1] = 2e6
	b, err = json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(b, ' ', ' '), 0o644)) // another size, whatever the clock
	c, err = LoadModel(path)
	require.NoError(t, err)
	require.Equal(t, 2e6, c.Bandwidth[0][1])

	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o644))
	_, err = LoadModel(path)
	require.ErrorContains(t, err, path)
}
