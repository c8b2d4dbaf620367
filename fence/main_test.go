package fence_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs a holder process of TestStalledHolderProcess when the
// test binary is started as one, and checks that no test leaks a
// goroutine.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	goleak.VerifyTestMain(m)
}
