package main

import (
	"io"
	"os"
	"syscall"
)

// isTerminal reports whether w is a console.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var mode uint32
	return syscall.GetConsoleMode(syscall.Handle(f.Fd()), &mode) == nil
}

// foregroundTerminal is false: Windows has no terminal process groups to
// hand over, and a child shares redlock's console.
func foregroundTerminal(*os.File) bool { return false }

// takeTerminal has nothing to take back on Windows.
func takeTerminal(*os.File) {}
