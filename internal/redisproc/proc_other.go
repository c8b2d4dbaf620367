//go:build !unix

package redisproc

import (
	"os"
	"syscall"
)

// sysProcAttr has nothing to set where there are no Unix process groups.
func sysProcAttr() *syscall.SysProcAttr { return nil }

const canFreeze = false

// signalFreeze cannot freeze a process without SIGSTOP.
func signalFreeze(*os.Process, bool) error { return ErrFreezeUnsupported }
