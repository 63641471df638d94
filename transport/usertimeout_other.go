//go:build !linux

package transport

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available.
func setUserTimeout(*net.TCPConn, time.Duration) {}
