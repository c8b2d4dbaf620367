package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/redistest"
)

// The demo on both kinds of local node: real redis-server processes (with
// the restart guard and a killed and a frozen node) and in-process servers.
// Small numbers keep it quick; what matters is that nothing is oversold.
func TestDemo(t *testing.T) {
	// In-process servers run Lua slowly (far more so under -race): their
	// TTL of 2 s gives them a per-node timeout of 1 s.
	for _, mode := range [][]string{{"--ttl", "1s"}, {"--ttl", "2s", "--in-process"}} {
		args := append([]string{"demo", "--stock", "20", "--buyers", "40", "--wait", "20s"}, mode...)
		r := runCLI(t, args...)
		if r.code != exitOK {
			t.Fatalf("demo %v: %v", mode, r)
		}
		for _, want := range []string{`sold\s+20 of 20`, `oversold\s+0\b`, `failed\s+0 buyers`} {
			if !regexp.MustCompile(want).MatchString(r.stdout) {
				t.Errorf("demo %v: output lacks %q:\n%s", mode, want, r.stdout)
			}
		}
	}
}

// With --nodes the demo runs against the given deployment, and injects no
// fault into nodes it does not own.
func TestDemoOnGivenNodes(t *testing.T) {
	servers := redistest.Start(t, 3)
	r := runCLI(t, "demo", "--nodes", nodesFlag(servers...), "--restart-guard=off",
		"--stock", "10", "--buyers", "20", "--ttl", "1s", "--wait", "20s")
	if r.code != exitOK {
		t.Fatalf("demo --nodes: %v", r)
	}
	if !strings.Contains(r.stdout, "Using the 3 given nodes") || strings.Contains(r.stdout, "killed node") {
		t.Errorf("demo --nodes should use the given nodes and inject no fault:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`oversold\s+0\b`).MatchString(r.stdout) {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// --compare runs the sale with one lock and with segments on the same
// nodes, and prints both side by side: both sell everything, neither
// oversells.
func TestDemoCompare(t *testing.T) {
	r := runCLI(t, "demo", "--compare", "--local", "3", "--segments", "4", "--stock", "20", "--buyers", "40",
		"--ttl", "1s", "--wait", "20s", "--think", "1ms")
	if r.code != exitOK {
		t.Fatalf("demo --compare: %v", r)
	}
	for _, want := range []string{
		`one lock\s+4 segments`,
		`sold\s+20 of 20\s+20 of 20`,
		`oversold\s+0\s+0\n`,
		`failed\s+0 buyers\s+0 buyers`,
		`throughput\s+\d+ sales/s\s+\d+ sales/s`,
		`acquire p99\s+\S+\s+\S+`,
		`4 segments sold [0-9.]+ times as fast as one lock`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "killed node") {
		t.Errorf("--compare injected a fault:\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--segments", "0"}, {"--segments", "30", "--stock", "20"}, {"--compare", "--unsafe"}, {"--think", "-1s"}} {
		if r := runCLI(t, append([]string{"demo"}, bad...)...); r.code != exitUsage {
			t.Errorf("demo %v: exit %d, want %d (usage)", bad, r.code, exitUsage)
		}
	}
}
