package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestDoctorDistinctSaysWhatWasCompared runs doctor on nodes of which some
// or all do not answer: the distinct check says which nodes it compared and
// that the rest is unknown, never that every node is a different process.
func TestDoctorDistinctSaysWhatWasCompared(t *testing.T) {
	servers := redistest.Start(t, 2)
	down := "redis://" + closedAddr(t)
	distinct := func(rep doctorReport) check {
		for _, c := range rep.Checks {
			if c.Check == "distinct" {
				return c
			}
		}
		t.Fatalf("no distinct check: %+v", rep)
		return check{}
	}
	for _, tc := range []struct {
		name, nodes, verdict, detail string
	}{
		{"all down", down + "," + "redis://" + closedAddr(t) + ",redis://" + closedAddr(t), verdictSkip, "no node answered: nothing compared"},
		{"one down", nodesFlag(servers...) + "," + down, verdictWarn, "nodes 0, 1 are different redis-server processes (run_id); unknown for node 2"},
		{"one answered", nodesFlag(servers[0]) + "," + down + ",redis://" + closedAddr(t), verdictWarn, "only node 0 answered: nothing compared; unknown whether nodes 1, 2 are"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, r := doctor(t, "--timeout", "300ms", "--nodes", tc.nodes)
			c := distinct(rep)
			if c.Verdict != tc.verdict || !strings.Contains(c.Detail, tc.detail) {
				t.Errorf("distinct: %+v, want %s %q\n%v", c, tc.verdict, tc.detail, r)
			}
			if strings.Contains(r.stdout, "every node is a different") {
				t.Errorf("claims every node was compared:\n%v", r)
			}
		})
	}
	// With every node answering, the check says so.
	rep, r := doctor(t, "--nodes", nodesFlag(servers...))
	if c := distinct(rep); c.Verdict != verdictOK || c.Detail != "every node is a different redis-server process (run_id)" {
		t.Errorf("all answered: %+v\n%v", c, r)
	}
}

// TestInspectJSONUnknownNode freezes a node: inspect --json reports it as
// not answered, with held and pttl_ms null, not as free.
func TestInspectJSONUnknownNode(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("no SIGSTOP on this system")
	}
	servers := redistest.Start(t, 3)
	holdLock(t, "frozen", 20*time.Second, servers...)
	if err := servers[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = servers[2].Resume() }()
	r := runCLI(t, "inspect", "--json", "--timeout", "300ms", "--nodes", nodesFlag(servers...), "frozen")
	var rep struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil || len(rep.Nodes) != 3 {
		t.Fatalf("inspect: %v (%v)", r, err)
	}
	for i, n := range rep.Nodes {
		if i < 2 {
			if n["answered"] != true || n["held"] != true || n["pttl_ms"] == nil {
				t.Errorf("node %d answered and holds the lock: %v", i, n)
			}
			continue
		}
		for _, k := range []string{"answered", "held", "pttl_ms", "error"} {
			if _, ok := n[k]; !ok {
				t.Errorf("frozen node: no %q: %v", k, n)
			}
		}
		if n["answered"] != false || n["held"] != nil || n["pttl_ms"] != nil || n["error"] == "" {
			t.Errorf("frozen node: want answered false, held and pttl_ms null, an error: %v", n)
		}
	}
}
