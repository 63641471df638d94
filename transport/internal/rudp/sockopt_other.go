//go:build !linux

package rudp

import "net"

func setSocketBuffers(uc *net.UDPConn, size int) {
	if size <= 0 {
		return
	}
	_ = uc.SetReadBuffer(size)
	_ = uc.SetWriteBuffer(size)
}
