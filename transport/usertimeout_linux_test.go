package transport

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestUserTimeoutSet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	tuneTCP(c, &Config{UserTimeout: 1500 * time.Millisecond})
	raw, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var got int
	var gerr error
	require.NoError(t, raw.Control(func(fd uintptr) {
		got, gerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	}))
	require.NoError(t, gerr)
	require.Equal(t, 1500, got)
}
