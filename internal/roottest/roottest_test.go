package roottest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	have := func(tools ...string) func(string) error {
		return func(tool string) error {
			for _, h := range tools {
				if h == tool {
					return nil
				}
			}
			return errors.New("not found")
		}
	}
	all := have("ip", "tc", "nft", "unshare")
	netlab := []string{"ip", "tc", "nft", "unshare"}
	for _, tc := range []struct {
		name, env, goos string
		euid            int
		look            func(string) error
		skip, fail      string
	}{
		{"unset skips, even as root", "", "linux", 0, all,
			"root test (builds namespaces): set HETCOMM_ROOT_TESTS=1 to run it, as root on Linux with ip, tc, nft, unshare installed (.ci/run does)", ""},
		{"0 skips", "0", "linux", 1000, all, "set HETCOMM_ROOT_TESTS=1 to run it", ""},
		{"1 as root with the tools runs", "1", "linux", 0, all, "", ""},
		{"1 without nft fails naming it", "1", "linux", 0, have("ip", "tc", "unshare"), "",
			"HETCOMM_ROOT_TESTS=1, but this root test (builds namespaces) needs nft (Debian package nftables), not found in PATH (.ci/run installs the tools)"},
		{"1 without anything names every tool", "1", "linux", 0, have(), "", "needs ip (Debian package iproute2), tc (Debian package iproute2), nft (Debian package nftables), unshare (Debian package util-linux)"},
		{"1 as a user fails", "1", "linux", 1000, all, "", "HETCOMM_ROOT_TESTS=1, but this root test (builds namespaces) needs root (effective uid 1000)"},
		{"1 elsewhere fails", "1", "darwin", 0, all, "", "needs Linux, not darwin"},
		{"another value fails", "yes", "linux", 0, all, "", `HETCOMM_ROOT_TESTS="yes": want 1 (run the root tests) or 0 (skip them)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			skip, fail := check(tc.env, tc.goos, tc.euid, tc.look, "builds namespaces", netlab)
			if tc.skip == "" {
				require.Empty(t, skip)
			} else {
				require.Contains(t, skip, tc.skip)
			}
			if tc.fail == "" {
				require.Empty(t, fail)
			} else {
				require.Contains(t, fail, tc.fail)
			}
		})
	}
}

// TestRequireSkipsWithoutTheVariable: with the variable empty, as in a
// plain `go test`, Require skips whatever the user and the tools.
func TestRequireSkipsWithoutTheVariable(t *testing.T) {
	t.Setenv(Env, "")
	ran := false
	t.Run("gated", func(t *testing.T) {
		Require(t, "builds namespaces", "ip")
		ran = true
	})
	require.False(t, ran, "Require let a root test run without %s=1", Env)
}
