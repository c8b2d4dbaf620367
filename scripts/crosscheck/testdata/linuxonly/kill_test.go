package linuxonly

import (
	"syscall"
	"testing"
)

// A test file too: its SysProcAttr field exists on Linux alone.
func TestAttr(t *testing.T) { _ = syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
