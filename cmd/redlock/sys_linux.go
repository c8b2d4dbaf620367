package main

import "syscall"

// ioctlGetTermios is the ioctl that reads a terminal's attributes.
const ioctlGetTermios = syscall.TCGETS

// setParentDeath has Linux kill the command when redlock dies.
func setParentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
