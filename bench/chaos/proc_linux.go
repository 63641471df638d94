package chaos

import "syscall"

// procAttr puts a rank in its own process group, and kills it if this
// process dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
