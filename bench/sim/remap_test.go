package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hetcomm/hetcomm/bench"
)

func TestSimRemapQuick(t *testing.T) {
	e, ok := Lookup("remap")
	require.True(t, ok, "remap is registered")
	cfg := SimConfig{Seed: 5, Quick: true}
	res, err := e.Run(cfg)
	require.NoError(t, err)
	names := map[string]*bench.Table{}
	for _, tab := range res.Tables {
		names[tab.Name] = tab
	}
	for _, fig := range []string{"fig5a_ps_subtasks", "fig5b_cs_subtasks", "fig6a_cd_subtasks", "fig6b_cd_machines", "fig7a_cd_ratio",
		"fig7b_cd_perblock", "fig8a_cd_uniform", "fig8b_cd_skewed", "fig9a_remap_time_subtasks", "fig9b_remap_time_machines", "fig10_cd_gs"} {
		require.Contains(t, names, fig)
		require.Contains(t, res.Plots, fig+".png")
		require.NotEmpty(t, names[fig].Rows, fig)
	}
	// Completion times are positive, the ideal's gain is large under
	// Erlang(2) (it knows every run-time value), remapping times are
	// measured.
	for _, row := range names["fig6a_cd_subtasks"].Rows {
		for _, c := range []int{2, 3, 4, 7} {
			require.Positive(t, row[c].(float64))
		}
		require.Greater(t, row[6].(float64), 20.0, "ideal gain %v", row)
	}
	for _, row := range names["fig9a_remap_time_subtasks"].Rows {
		require.Positive(t, row[3].(float64))
	}
	require.Len(t, names["fig7a_cd_ratio"].Rows, 3)
	require.Equal(t, "low 1-10", names["fig7a_cd_ratio"].Rows[0][0])
	require.Contains(t, res.Summary, "CD 3-4% better than GS")
	require.Contains(t, res.Summary, "grows with the subtasks")

	// Reproducible for a seed, except the timings.
	again, err := e.Run(cfg)
	require.NoError(t, err)
	for i, tab := range res.Tables {
		if strings.HasPrefix(tab.Name, "fig9") {
			continue
		}
		require.Equal(t, tab, again.Tables[i], tab.Name)
	}
}

func TestSimRemapCommand(t *testing.T) {
	stdout, _ := runSimCommand(t, "remap", 2, "fig6a_cd_subtasks.csv", "fig6a_cd_subtasks.json", "fig6a_cd_subtasks.png", "fig9b_remap_time_machines.png", "fig10_cd_gs.csv")
	require.Contains(t, stdout, "## fig10_cd_gs")
	require.Contains(t, stdout, "Hybrid remapper, 2 random problems per point")
}
