package main

import (
	"context"
	"crypto/fips140"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// envFIPSNodes makes TestFIPS140Only the child that runs the commands, in a
// process started with GODEBUG=fips140=only; it holds the --nodes value.
const envFIPSNodes = "REDLOCK_TEST_FIPS_NODES"

// TestFIPS140Only runs the program in a FIPS 140-only process: a package
// that computes SHA-1 at start-up (redis.NewScript) panics there before
// main runs. The child takes a lock with run and reads it with inspect.
func TestFIPS140Only(t *testing.T) {
	if nodes := os.Getenv(envFIPSNodes); nodes != "" {
		if !fips140.Enforced() {
			t.Fatalf("FIPS 140-3 mode is not enforced: GODEBUG=%q", os.Getenv("GODEBUG"))
		}
		if r := runCLI(t, "run", "--nodes", nodes, noGuard, wait, "fips", "--", "true"); r.code != 0 {
			t.Fatalf("run in a FIPS 140-only process:\n%v", r)
		}
		if r := runCLI(t, "inspect", "--nodes", nodes, "fips"); r.code != 0 {
			t.Fatalf("inspect in a FIPS 140-only process:\n%v", r)
		}
		return
	}
	servers := redistest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFIPS140Only$", "-test.count=1", "-test.v")
	godebug := "fips140=only"
	if g := os.Getenv("GODEBUG"); g != "" {
		godebug = g + "," + godebug
	}
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug, envFIPSNodes+"="+nodesFlag(servers...))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFIPS140Only") {
		t.Fatalf("redlock in a FIPS 140-only process (GODEBUG=%s): %v\n%s", godebug, err, out)
	}
}
