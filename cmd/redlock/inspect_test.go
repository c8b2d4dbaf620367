package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

func TestInspect(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := "--nodes=" + nodesFlag(servers...)

	r := runCLI(t, "inspect", "--json", nodes, "report")
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil {
		t.Fatalf("free lock: %v (%v)", r, err)
	}
	if rep.State != "free" || rep.Answered != 3 || rep.Quorum != 2 || rep.Key != "{redlock:report}" {
		t.Errorf("free lock: %+v", rep)
	}

	holdLock(t, "report", 10*time.Second, servers...)
	// The owner's value is the secret that releases the lock: not shown.
	rc := servers[0].Client()
	defer rc.Close()
	value, err := rc.Get(context.Background(), "{redlock:report}").Result()
	if err != nil {
		t.Fatal(err)
	}

	r = runCLI(t, "inspect", "--json", nodes, "report")
	rep = inspectReport{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil {
		t.Fatalf("held lock: %v (%v)", r, err)
	}
	if rep.State != "held" || rep.HeldOn != 3 || rep.Owner != fingerprint(value) {
		t.Errorf("held lock: %+v", rep)
	}
	for _, n := range rep.Nodes {
		if !n.Held || n.PTTL <= 0 || n.PTTL > 10000 || n.Owner != rep.Owner || n.Epoch != "no record" || n.Error != "" {
			t.Errorf("node %s: %+v", n.Node, n)
		}
	}
	r = runCLI(t, "inspect", nodes, "report")
	if r.code != exitOK || !strings.Contains(r.stdout, "held by owner "+fingerprint(value)+" on 3 of 3 nodes") {
		t.Errorf("table: %v", r)
	}
	if strings.Contains(r.stdout+r.stderr, value) {
		t.Error("inspect shows the owner's secret value")
	}

	// One node down: still a quorum. Two down: exit 69.
	_ = servers[2].Stop()
	r = runCLI(t, "inspect", "--timeout", "300ms", nodes, "report")
	if r.code != exitOK || !strings.Contains(r.stdout, "held by owner") {
		t.Errorf("one node down: %v", r)
	}
	_ = servers[1].Stop()
	r = runCLI(t, "inspect", "--timeout", "300ms", nodes, "report")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "only 1 of 3 nodes answered") {
		t.Errorf("two nodes down: %v", r)
	}
}

func TestInspectFenceAndOddKeys(t *testing.T) {
	servers := redistest.Start(t, 1)
	rc := servers[0].Client()
	defer rc.Close()
	ctx := context.Background()
	rc.Set(ctx, "{redlock:a}", "v", 0)
	rc.Set(ctx, "{redlock:a}:fence", "17", 0)
	rc.HSet(ctx, "{redlock:b}:fence", "v", "42")
	rc.RPush(ctx, "{redlock:c}", "x")

	get := func(name string) inspectNode {
		r := runCLI(t, "inspect", "--json", "--nodes", nodesFlag(servers...), name)
		var rep inspectReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Nodes) != 1 {
			t.Fatalf("inspect %s: %v (%v)", name, r, err)
		}
		return rep.Nodes[0]
	}
	if n := get("a"); !n.Held || n.PTTL != -1 || n.Fence != "17" {
		t.Errorf("key without expiry and a string counter: %+v", n)
	}
	if n := get("b"); n.Held || n.Fence != "42" {
		t.Errorf("free lock with a hash counter: %+v", n)
	}
	if n := get("c"); n.Error == "" || !strings.Contains(n.Error, "WRONGTYPE") {
		t.Errorf("key of another type: %+v", n)
	}
}

// TestInspectPrefix checks that --prefix chooses every key inspect reads:
// the lock, its fencing counter and the node's epoch record.
func TestInspectPrefix(t *testing.T) {
	servers := redistest.Start(t, 1)
	rc := servers[0].Client()
	defer rc.Close()
	ctx := context.Background()
	now, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	rc.Set(ctx, "{app:report}", "v", time.Minute)
	rc.Set(ctx, "{app:report}:fence", "7", 0)
	// The node recovers for the locks of prefix "app:"; the default
	// prefix's record says it votes.
	rc.HSet(ctx, "{app:}:epoch", "until", now.UnixMilli()+60_000)
	rc.HSet(ctx, "{redlock:}:epoch", "until", now.UnixMilli()-1)

	r := runCLI(t, "inspect", "--json", "--prefix", "app:", "--nodes", nodesFlag(servers...), "report")
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil || len(rep.Nodes) != 1 {
		t.Fatalf("inspect --prefix: %v (%v)", r, err)
	}
	n := rep.Nodes[0]
	if rep.Key != "{app:report}" || !n.Held || n.Fence != "7" || !strings.HasPrefix(n.Epoch, "recovering ") {
		t.Errorf("inspect --prefix app: read another prefix's keys: key %s, node %+v", rep.Key, n)
	}

	// A name the library refuses is refused here too.
	r = runCLI(t, "inspect", "--prefix", "}", "--nodes", nodesFlag(servers...), "x")
	if r.code != exitUsage || !strings.Contains(r.stderr, "starts with '}'") {
		t.Errorf("prefix starting with '}': %v", r)
	}
}
