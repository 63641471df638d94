//go:build !linux

package netlab

import "net"

// bigReadBuffer asks for a receive buffer of size bytes (see the Linux
// version).
func bigReadBuffer(pc net.PacketConn, size int) {
	if uc, ok := pc.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(size)
	}
}
