// Package portable compiles on every system: crosscheck's test loads it
// beside testdata/linuxonly.
package portable

import "os"

// Pid is the process's id.
func Pid() int { return os.Getpid() }
