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
	for _, mode := range [][]string{nil, {"--in-process"}} {
		// A TTL of 2s leaves in-process nodes their 1s per-node timeout
		// (under the race detector they need it).
		args := append([]string{"demo", "--stock", "20", "--buyers", "40", "--ttl", "2s", "--wait", "20s"}, mode...)
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
