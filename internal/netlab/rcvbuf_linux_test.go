//go:build linux

package netlab

import (
	"net"
	"syscall"
)

// bigReadBuffer gives a UDP socket a receive buffer of size bytes, past
// net.core.rmem_max (the helpers run as root): a helper that a busy
// machine starves must not drop datagrams of its own, which would count
// as the lab's loss.
func bigReadBuffer(pc net.PacketConn, size int) {
	uc, ok := pc.(*net.UDPConn)
	if !ok {
		return
	}
	_ = uc.SetReadBuffer(size)
	if rc, err := uc.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size)
		})
	}
}
