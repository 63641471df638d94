package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	t.Setenv("HETRUN_TEST_VAR", "from hetrun")
	spec, prog, _, code := parseArgs([]string{"-np", "3", "--transport", "QUIC", "-x", "A=1", "-x", "HETRUN_TEST_VAR", "--op-timeout", "5m", "./prog", "arg"})
	require.Equal(t, -1, code)
	require.Equal(t, "./prog", prog)
	require.Equal(t, 3, spec.N, "-np is -n")
	require.Equal(t, "quic", spec.Transport)
	require.Equal(t, []string{"arg"}, spec.Args)
	require.Contains(t, spec.Env, "A=1")
	require.Contains(t, spec.Env, "HETRUN_TEST_VAR=from hetrun", "-x KEY passes hetrun's value on")
	require.Contains(t, spec.Env, "HETCOMM_OP_TIMEOUT=5m0s")

	for name, args := range map[string][]string{
		"bad transport":  {"--transport", "carrier-pigeon", "./prog"},
		"mem transport":  {"--transport", "mem", "./prog"},
		"unset -x":       {"-x", "HETRUN_SURELY_UNSET_VARIABLE", "./prog"},
		"no ranks":       {"-n", "0", "./prog"},
		"no program":     {"-n", "2"},
		"bad rail rule":  {"--rail-policy", "sometimes", "./prog"},
		"unknown flag":   {"--frobnicate", "./prog"},
		"hosts and file": {"--hosts", "a", "--hostfile", "f", "./prog"},
		"op timeout":     {"--op-timeout", "-1s", "./prog"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, code := parseArgs(args)
			require.Equal(t, 2, code, "bad usage is found by hetrun, with status 2")
		})
	}
	_, _, _, code = parseArgs([]string{"-h"})
	require.Equal(t, 0, code)
}
