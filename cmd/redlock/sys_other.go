//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd || windows)

package main

import (
	"io"
	"os"
)

// isTerminal is false where redlock does not know how to ask: output is
// then formatted for a file (no progress bar).
func isTerminal(io.Writer) bool { return false }

// foregroundTerminal is false: the command is not given the terminal.
func foregroundTerminal(*os.File) bool { return false }

// takeTerminal has nothing to take back.
func takeTerminal(*os.File) {}
