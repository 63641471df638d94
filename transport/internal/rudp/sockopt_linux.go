package rudp

import (
	"net"
	"syscall"
)

// setSocketBuffers asks for size-byte socket buffers; as root it bypasses
// net.core.rmem_max/wmem_max with SO_RCVBUFFORCE/SO_SNDBUFFORCE.
func setSocketBuffers(uc *net.UDPConn, size int) {
	if size <= 0 {
		return
	}
	_ = uc.SetReadBuffer(size)
	_ = uc.SetWriteBuffer(size)
	rc, err := uc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, size)
		_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, size)
	})
}
