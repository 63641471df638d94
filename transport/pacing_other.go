//go:build !linux

package transport

import (
	"fmt"
	"net"
)

// kernelPacing: only Linux offers SO_MAX_PACING_RATE.
const kernelPacing = false

func setMaxPacingRate(*net.TCPConn, uint64) error {
	return fmt.Errorf("%w: no kernel pacing on this system", ErrNoPacing)
}

func maxSegment(*net.TCPConn) int { return 1448 }

func maxPacingRate(*net.TCPConn) (uint64, error) {
	return 0, fmt.Errorf("%w: no kernel pacing on this system", ErrNoPacing)
}
