//go:build !linux

package launch

import "syscall"

// procAttr makes a rank (or its agent) lead its own process group, so
// that a signal reaches everything it started. (Only Linux offers
// Pdeathsig.)
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
