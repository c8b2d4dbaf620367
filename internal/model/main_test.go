package model

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain collects garbage less often than Go's default (GOGC=400
// unless GOGC is set): the searches allocate a state per step and keep
// little (the visited set and the path), and at the default about a
// quarter of make model's CPU went to the collector (GOGC=400 cut its
// CPU by a fifth, 2026-11-30). Their peak heap stays under a gigabyte.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
