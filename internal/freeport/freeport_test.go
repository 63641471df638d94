package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoopbackIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	lo, hi := Range()
	require.Less(t, lo, hi)
	seen := map[string]bool{}
	for range 20 {
		addr, err := Loopback()
		require.NoError(t, err)
		_, p, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		port, err := strconv.Atoi(p)
		require.NoError(t, err)
		require.GreaterOrEqual(t, port, lo)
		require.Less(t, port, hi)
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the port is free")
		l.Close()
		seen[addr] = true
	}
	require.Greater(t, len(seen), 1, "ports are picked at random")
}

// A port in use is never returned.
func TestOnSkipsPortsInUse(t *testing.T) {
	lo, _ := Range()
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[string]bool{}
	for p := lo; p < lo+200; p++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		if l, err := net.Listen("tcp", addr); err == nil {
			held = append(held, l)
			busy[addr] = true
		}
	}
	for range 200 {
		addr, err := Loopback()
		require.NoError(t, err)
		require.False(t, busy[addr], "%s is in use", addr)
	}
}
