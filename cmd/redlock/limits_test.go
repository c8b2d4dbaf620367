//go:build unix

// Some of these tests run shell commands (true, sleep) under redlock run.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestFlagLimits: bounds that flags must respect, and defaults that fit
// the user's other flags.
func TestFlagLimits(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	t.Setenv(envNodes, "")

	// --drift NaN is refused like Inf.
	for _, d := range []string{"NaN", "nan", "Inf", "-1"} {
		if r := runCLI(t, "doctor", nodes, "--drift", d); r.code != exitUsage || !strings.Contains(r.stderr, "outside [0, 0.5)") {
			t.Errorf("doctor --drift %s: want exit %d, outside [0, 0.5): %v", d, exitUsage, r)
		}
	}

	// A --max-ttl below a command's default --ttl lowers the default.
	if r := runCLI(t, "doctor", nodes, "--max-ttl", "5s"); r.code == exitUsage || !strings.Contains(r.stdout, "TTL 5s") {
		t.Errorf("doctor --max-ttl 5s: want --ttl 5s by default: %v", r)
	}
	if r := runCLI(t, "run", nodes, noGuard, wait, "--max-ttl", "5s", "job", "--", "true"); r.code != exitOK {
		t.Errorf("run --max-ttl 5s: %v", r)
	}
	// Given, --ttl is still checked against it.
	if r := runCLI(t, "doctor", nodes, "--max-ttl", "5s", "--ttl", "10s"); r.code != exitUsage || !strings.Contains(r.stderr, "above --max-ttl") {
		t.Errorf("doctor --max-ttl 5s --ttl 10s: %v", r)
	}
	for _, c := range []string{"run", "doctor", "bench"} {
		if r := runCLI(t, c, "--help"); !strings.Contains(r.stdout, "or --max-ttl if that is shorter") {
			t.Errorf("%s --help does not say how --ttl's default fits --max-ttl:\n%s", c, r.stdout)
		}
	}
}

// TestRunMinimumTTL: run refuses a --ttl it cannot keep alive, and keeps
// a lock of the minimum TTL alive while a command runs for several TTLs.
func TestRunMinimumTTL(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := "--nodes=" + nodesFlag(servers...)
	for _, ttl := range []string{"10ms", "200ms", (minRunTTL - time.Millisecond).String()} {
		r := runCLI(t, "run", nodes, noGuard, "--ttl", ttl, "job", "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "below the minimum "+minRunTTL.String()+" of run") {
			t.Errorf("run --ttl %s: want exit %d, below the minimum: %v", ttl, exitUsage, r)
		}
	}
	if minRunTTL < limits.MinTTL {
		t.Errorf("run's minimum %v is below the library's %v", minRunTTL, limits.MinTTL)
	}
	if r := runCLI(t, "run", "--help"); !strings.Contains(r.stdout, "--ttl is at least "+minRunTTL.String()) {
		t.Errorf("run --help does not give the minimum:\n%s", r.stdout)
	}
	r := runCLI(t, "run", nodes, noGuard, wait, "--ttl", minRunTTL.String(), "job", "--", "sleep", "1.5")
	if r.code != exitOK {
		t.Errorf("run --ttl %v -- sleep 1.5: %v", minRunTTL, r)
	}
}

// TestBenchSVGPathCheckedFirst: bench refuses a chart path it cannot
// write before it runs a scenario, and leaves no file behind.
func TestBenchSVGPathCheckedFirst(t *testing.T) {
	servers := redistest.Start(t, 1)
	dir := t.TempDir()
	bad := filepath.Join(dir, "nonexistent", "x.svg")
	// A minute per scenario: had it run, the test would time out.
	r := runCLI(t, "bench", "--nodes", nodesFlag(servers...), noGuard, "--duration", "1m", "--svg", bad)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--svg "+bad+": no such file or directory") {
		t.Errorf("bench --svg into a missing directory: want exit %d before the benchmark: %v", exitUsage, r)
	}
	if strings.Contains(r.stdout, "TTL") {
		t.Errorf("the benchmark started:\n%v", r)
	}

	good := filepath.Join(dir, "latency.svg")
	r = runCLI(t, "bench", "--nodes", nodesFlag(servers...), noGuard, "--duration", "200ms", "--scenarios", "uncontended", "--svg", good)
	if r.code != exitOK {
		t.Fatalf("bench --svg: %v", r)
	}
	b, err := os.ReadFile(good)
	if err != nil || checkSVG(t, b) != 1 {
		t.Errorf("chart: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left in the chart's directory: %v", ents)
	}
}
