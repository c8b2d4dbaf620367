package main

import (
	"os"
	"strconv"
)

// envGuardian, set in its environment, makes the redlock binary the
// guardian of a run (guardian_unix.go) instead of the command line tool.
const envGuardian = "REDLOCK_GUARDIAN"

// isGuardian reports whether this process is a guardian: envGuardian
// holds its parent's pid, which a variable left in a user's environment
// would not.
func isGuardian() (run string, ok bool) {
	run = os.Getenv(envGuardian)
	return run, run != "" && run == strconv.Itoa(os.Getppid())
}
