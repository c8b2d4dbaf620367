//go:build !linux

package redlocksql_test

import "os/exec"

// diesWithParent does nothing outside Linux: the test's cleanups stop the
// server.
func diesWithParent(*exec.Cmd) {}
