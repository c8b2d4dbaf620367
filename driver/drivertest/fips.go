package drivertest

import (
	"context"
	"crypto/fips140"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// fipsChildEnv carries the nodes' addresses to the test process that
// FIPS140Only starts; set, the test runs the cycle itself.
const fipsChildEnv = "REDLOCK_DRIVERTEST_FIPS140_NODES"

// FIPS140Only runs a lock cycle over d's nodes in a FIPS 140-only process
// (GODEBUG=fips140=only, where crypto/sha1 and other non-approved
// algorithms panic): it starts three redis-servers, runs the test binary
// again with only this test selected and that GODEBUG, and fails with the
// child's output unless the child passed. The child checks that the mode
// is enforced, then obtains, refreshes and releases a plain lock (after a
// SCRIPT FLUSH and FUNCTION FLUSH too, to take the EVAL fallback and
// the library's load), a writer and a reader of a
// read-write lock and a semaphore's permit, on the three nodes.
//
// Call it from a test of the driver's package:
//
//	func TestConformanceFIPS140Only(t *testing.T) { drivertest.FIPS140Only(t, d) }
//
// The test binary's TestMain, if any, must run the tests (m.Run) in the
// child as in the parent.
func FIPS140Only(t *testing.T, d Driver) {
	if d.Standalone == nil {
		t.Fatal("drivertest: Driver.Standalone is required")
	}
	if addrs := os.Getenv(fipsChildEnv); addrs != "" {
		fipsCycle(t, d, strings.Split(addrs, ","))
		return
	}
	servers := redistest.Start(t, 3)
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	// Select this test alone, each level of its name matched whole.
	levels := strings.Split(t.Name(), "/")
	for i, l := range levels {
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*patience)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+strings.Join(levels, "/"), "-test.count=1", "-test.v")
	godebug := "fips140=only"
	if g := os.Getenv("GODEBUG"); g != "" {
		godebug = g + "," + godebug
	}
	cmd.Env = append(os.Environ(), "GODEBUG="+godebug, fipsChildEnv+"="+strings.Join(addrs, ","))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a FIPS 140-only process (GODEBUG=%s): %v\n%s", d.Name, godebug, err, out)
	}
}

// fipsCycle is FIPS140Only's child.
func fipsCycle(t *testing.T, d Driver, addrs []string) {
	if !fips140.Enforced() {
		t.Fatalf("FIPS 140-3 mode is not enforced: GODEBUG=%q", os.Getenv("GODEBUG"))
	}
	nodes := make([]driver.Node, len(addrs))
	for i, a := range addrs {
		nodes[i] = d.Standalone(t, a)
	}
	// The child checks the FIPS 140-only mode, not speed: a node
	// timeout of 2 s keeps a loaded machine's slow reply (the lanes of
	// make test, beside the other suites) from failing a quorum.
	c := newClient(t, nodes, redlock.WithNodeTimeout(2*time.Second))
	ctx := ctxFor(t, 6*patience)
	cycle := func(what string, l redlock.Locker) {
		t.Helper()
		lock, err := l.Obtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("%s: Obtain: %v", what, err)
		}
		if lock.Token() <= 0 {
			t.Errorf("%s: token %d, want a positive fencing token", what, lock.Token())
		}
		if err := lock.Refresh(ctx, time.Minute); err != nil {
			t.Errorf("%s: Refresh: %v", what, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Errorf("%s: Release: %v", what, err)
		}
	}
	cycle("plain lock", c.Mutex(unique("fips")))
	// Without the scripts and the library on the nodes, the scripts fall
	// back to EVAL and the acquire loads the library again.
	for _, n := range nodes {
		for _, what := range []string{"SCRIPT", "FUNCTION"} {
			if _, err := n.Do(ctx, what, "FLUSH"); err != nil {
				t.Fatalf("%s FLUSH: %v", what, err)
			}
		}
	}
	cycle("plain lock after SCRIPT FLUSH and FUNCTION FLUSH", c.Mutex(unique("fips")))
	r, w := c.RWMutex(unique("fips-rw"))
	cycle("writer", w)
	cycle("reader", r)
	cycle("semaphore", c.Semaphore(unique("fips-sem"), 2))
}
