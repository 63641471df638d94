package launch

import "syscall"

// procAttr makes a rank (or its agent) lead its own process group, so
// that a signal reaches everything it started, and die with hetrun:
// Pdeathsig kills it when the launcher's thread that started it exits,
// also when hetrun itself is killed with SIGKILL.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
