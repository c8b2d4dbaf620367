//go:build !unix

package redisproc

import "os"

// processAlive cannot probe a process without signals; Stop waited for it.
func processAlive(*os.Process) bool { return false }
