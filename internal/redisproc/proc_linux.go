package redisproc

import "syscall"

// sysProcAttr puts a server in its own process group and has Linux kill it
// when this process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
