package transport

import (
	"math"
	"net"
	"syscall"
)

// kernelPacing: Linux paces a TCP socket itself once SO_MAX_PACING_RATE
// is set (kernel-internal pacing, since 4.13).
const kernelPacing = true

// soMaxPacingRate is SO_MAX_PACING_RATE (asm-generic/socket.h).
const soMaxPacingRate = 47

// setMaxPacingRate sets tc's SO_MAX_PACING_RATE to rate bytes per second
// on the wire; 0 removes the limit.
func setMaxPacingRate(tc *net.TCPConn, rate uint64) error {
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	v := uint32(math.MaxUint32) // ~0U: unlimited
	if rate > 0 && rate < math.MaxUint32 {
		v = uint32(rate)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soMaxPacingRate, int(int32(v)))
	}); err != nil {
		return err
	}
	return serr
}

// maxSegment returns tc's MSS (TCP_MAXSEG), or 1448 if it cannot tell.
func maxSegment(tc *net.TCPConn) int {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 1448
	}
	mss := 0
	_ = raw.Control(func(fd uintptr) {
		mss, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG)
	})
	if mss <= 0 {
		return 1448
	}
	return mss
}

// maxPacingRate reads tc's SO_MAX_PACING_RATE back (bytes per second on
// the wire; math.MaxUint32 means unlimited).
func maxPacingRate(tc *net.TCPConn) (uint64, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, soMaxPacingRate)
	}); err != nil {
		return 0, err
	}
	return uint64(uint32(v)), serr
}
