//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package main

import (
	"os"
	"syscall"
)

// Without Unix process groups (Windows), redlock run controls the command's
// own process only: what it starts is not signalled with it, signals other
// than a kill end it at once (Windows delivers no SIGTERM), and the command
// is not killed if redlock itself is killed.

// jobAttr sets nothing.
func jobAttr(bool, *os.File) *syscall.SysProcAttr { return nil }

// job is the command's process.
type job struct{ p *os.Process }

func newJob(p *os.Process) job { return job{p: p} }

// signal forwards a signal redlock received, or kills the command where
// the signal cannot be sent.
func (j job) signal(sig os.Signal) {
	if j.p.Signal(sig) != nil {
		_ = j.p.Kill()
	}
}

// terminate asks the command to stop (SIGTERM), or kills it where it
// cannot be asked.
func (j job) terminate() { j.signal(syscall.SIGTERM) }

// kill kills the command.
func (j job) kill() { _ = j.p.Kill() }

// gone is true: only the command was started, and it has been waited for.
func (j job) gone() bool { return true }
