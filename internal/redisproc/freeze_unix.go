//go:build unix

package redisproc

import (
	"os"
	"syscall"
)

const canFreeze = true

// signalFreeze sends SIGSTOP (pause) or SIGCONT.
func signalFreeze(p *os.Process, pause bool) error {
	if pause {
		return p.Signal(syscall.SIGSTOP)
	}
	return p.Signal(syscall.SIGCONT)
}
