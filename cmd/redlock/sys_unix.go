//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ioctlGetTermios, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

// foregroundTerminal reports whether f is a terminal whose foreground
// process group is redlock's: run in an interactive shell, not in the
// background.
func foregroundTerminal(f *os.File) bool {
	var pgrp int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp)))
	return errno == 0 && int(pgrp) == syscall.Getpgrp()
}

// takeTerminal makes redlock's process group the foreground group of the
// terminal f again, after a child had it. A background process that does
// this gets SIGTTOU, which is ignored meanwhile.
func takeTerminal(f *os.File) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}

// jobAttr makes the command the leader of its own process group, so that
// the whole job can be signalled, and (Linux) kills it if redlock dies,
// since nothing would keep the lock alive then. With fg, the group gets
// the terminal tty: an interactive command must own the terminal, or
// reading it would stop it (SIGTTIN).
func jobAttr(fg bool, tty *os.File) *syscall.SysProcAttr {
	adoptOrphans()
	a := &syscall.SysProcAttr{Setpgid: true}
	setParentDeath(a)
	if fg {
		a.Foreground = true
		a.Ctty = int(tty.Fd())
	}
	return a
}

// job is the command's process group: the command and what it started.
type job struct{ pgid int }

func newJob(p *os.Process) job { return job{pgid: p.Pid} }

// signal forwards a signal redlock received to the whole group.
func (j job) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-j.pgid, s)
	}
}

// terminate asks the group to stop (SIGTERM).
func (j job) terminate() { _ = syscall.Kill(-j.pgid, syscall.SIGTERM) }

// kill kills the group (SIGKILL).
func (j job) kill() { _ = syscall.Kill(-j.pgid, syscall.SIGKILL) }

// gone reports whether no process of the group is left. It first reaps
// the group's processes that redlock adopted (adoptOrphans) and that have
// exited: a zombie still counts as a member. Call it only once the command
// itself has been waited for, or it could reap the command first.
func (j job) gone() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-j.pgid, &ws, syscall.WNOHANG, nil)
		if err != nil || pid <= 0 {
			break
		}
	}
	return errors.Is(syscall.Kill(-j.pgid, 0), syscall.ESRCH)
}
