//go:build unix

package redisproc

import (
	"os"
	"syscall"
)

// processAlive reports whether p still runs (signal 0 succeeds).
func processAlive(p *os.Process) bool { return p.Signal(syscall.Signal(0)) == nil }
