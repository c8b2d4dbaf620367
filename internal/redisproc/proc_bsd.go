//go:build unix && !linux

package redisproc

import "syscall"

// sysProcAttr puts a server in its own process group. There is no parent
// death signal outside Linux: a server outlives a process killed before it
// could Stop it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
