//go:build !linux

package transport

import "net"

// rcvLowat: only Linux's TCP wakes readers by a low-water mark the way
// the frame reader wants.
func rcvLowat(*net.TCPConn) func(int) { return nil }
