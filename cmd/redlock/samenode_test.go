package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestRunRefusesOneServerTwice: run with one redis-server given under
// 127.0.0.1 and localhost exits 2 with the library's error naming both
// nodes, and never runs the command; distinct servers run it (issue 38,
// item 5).
func TestRunRefusesOneServerTwice(t *testing.T) {
	servers := redistest.Start(t, 3)
	port := strconv.Itoa(servers[0].Port())
	nodes := "redis://127.0.0.1:" + port + ",redis://localhost:" + port + "," + nodesFlag(servers[1])
	r := runCLI(t, "run", "--restart-guard", "off", "--nodes", nodes, "dup", "--", "sh", "-c", "echo ran")
	if r.code != exitUsage || strings.Contains(r.stdout, "ran") ||
		!strings.Contains(r.stderr, "nodes 0 (127.0.0.1:"+port+") and 1 (localhost:"+port+") are one redis-server process (run_id ") {
		t.Errorf("one server as nodes 0 and 1: %v", r)
	}
	// The same server once, beside two others, under localhost: fine.
	ok := "redis://localhost:" + port + "," + nodesFlag(servers[1], servers[2])
	if r := runCLI(t, "run", "--restart-guard", "off", "--nodes", ok, "dup", "--", "sh", "-c", "echo ran"); r.code != exitOK || !strings.Contains(r.stdout, "ran") {
		t.Errorf("distinct servers: %v", r)
	}
}
