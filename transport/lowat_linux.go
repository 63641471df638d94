package transport

import (
	"net"
	"syscall"
)

// rcvLowat returns a function that sets tc's SO_RCVLOWAT (best effort):
// the kernel then wakes a reader parked on the socket only once that many
// bytes are queued (or the receive window is nearly closed, so a sender
// never stalls on it).
func rcvLowat(tc *net.TCPConn) func(int) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(n int) {
		_ = raw.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
		})
	}
}
