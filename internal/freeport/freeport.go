// Package freeport picks TCP ports for a coordinator to listen on.
//
// Asking the kernel for a free port (listening on port 0), closing it and
// handing the number to a coordinator that listens on it later races with
// every connection the host opens meanwhile: the kernel gives out the same
// ephemeral ports as the local end of outgoing connections. A port below
// the ephemeral range is only ever taken by an explicit bind, so a port
// that was free a moment ago stays free unless another program picks the
// same number.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Range is where ports are picked: the 12,768 ports below Linux's default
// ephemeral range (32768-60999), or below the host's own range when it
// starts lower.
func Range() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph < hi {
				hi = eph
				lo = min(lo, hi/2)
			}
		}
	}
	return max(lo, 1024), hi
}

// Random returns a random port of Range, for a host this process cannot
// test.
func Random() int {
	lo, hi := Range()
	if hi <= lo {
		return 20000 + rand.IntN(10000)
	}
	return lo + rand.IntN(hi-lo)
}

// On returns host:port for a port of Range that host (an address of this
// machine) could listen on a moment ago.
func On(host string) (string, error) {
	var last error
	for range 50 {
		addr := net.JoinHostPort(host, strconv.Itoa(Random()))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			last = err
			continue
		}
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free port on %s: %w", host, last)
}

// Loopback is On("127.0.0.1").
func Loopback() (string, error) { return On("127.0.0.1") }
