//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package main

import "syscall"

// ioctlGetTermios is the ioctl that reads a terminal's attributes.
const ioctlGetTermios = syscall.TIOCGETA

// setParentDeath does nothing: there is no parent death signal outside
// Linux, so a command whose redlock was killed by SIGKILL keeps running
// without the lock being kept alive.
func setParentDeath(*syscall.SysProcAttr) {}

// adoptOrphans does nothing: outside Linux the orphans of the command are
// adopted by init (launchd), which reaps them.
func adoptOrphans() {}
