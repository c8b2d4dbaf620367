// Package linuxonly compiles on Linux and darwin alone: syscall.Kill is
// not declared for Windows. crosscheck's test checks that it says so.
package linuxonly

import "syscall"

// Stop sends SIGTERM to pid.
func Stop(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }
