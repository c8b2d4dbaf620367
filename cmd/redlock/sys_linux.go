package main

import "syscall"

// ioctlGetTermios is the ioctl that reads a terminal's attributes.
const ioctlGetTermios = syscall.TCGETS

// setParentDeath has Linux kill the command when redlock dies.
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }

// adoptOrphans makes redlock the parent of the command's descendants whose
// parent exits (PR_SET_CHILD_SUBREAPER), so that redlock reaps them when
// they exit: under an init that does not reap (a container's), an exited
// orphan would stay a zombie of the group, and run would hold the lock for
// it forever.
func adoptOrphans() {
	const prSetChildSubreaper = 36 // linux/prctl.h
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
