package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
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

// inspectJSON runs inspect --json with args and decodes its report.
func inspectJSON(t *testing.T, args ...string) inspectReport {
	t.Helper()
	r := runCLI(t, append([]string{"inspect", "--json"}, args...)...)
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != exitOK || err != nil {
		t.Fatalf("inspect %q: %v (%v)", args, r, err)
	}
	return rep
}

// TestInspectFamily shows readers, a waiting writer and a reentrant owner's
// holds on three nodes.
func TestInspectFamily(t *testing.T) {
	servers := redistest.Start(t, 3)
	nodes := "--nodes=" + nodesFlag(servers...)
	holdLockWith(t, "data", 10*time.Second, reader, servers...)
	holdLockWith(t, "data", 10*time.Second, reader, servers...)
	// The second reader's vote may land on the last node after Obtain.
	var rep inspectReport
	waitFor(t, "two readers on every node", func() bool {
		rep = inspectJSON(t, nodes, "data")
		for _, n := range rep.Nodes {
			if n.Holds != 2 {
				return false
			}
		}
		return true
	})
	if rep.State != "held" || rep.Kind != "read" || rep.HeldOn != 3 || rep.Owner != "" {
		t.Errorf("two readers: %+v", rep)
	}
	for _, n := range rep.Nodes {
		if !n.Held || n.Kind != "read" || n.PTTL <= 0 || n.PTTL > 10000 || n.Owner != "" || n.WriterWaits || n.Error != "" {
			t.Errorf("two readers, node %s: %+v", n.Node, n)
		}
	}

	// A writer refused by the readers, and still waiting, marks that it
	// waits. (A writer that gives up takes its mark back.)
	c := newLibClient(t, servers...)
	wctx, stopWriter := context.WithCancel(context.Background())
	writer := make(chan error, 1)
	go func() {
		_, w := c.RWMutex("data")
		_, err := w.Obtain(wctx, 10*time.Second)
		writer <- err
	}()
	waitFor(t, "the writer's mark on a quorum", func() bool {
		rep = inspectJSON(t, nodes, "data")
		k := 0
		for _, n := range rep.Nodes {
			if n.WriterWaits {
				k++
			}
		}
		return k >= 2
	})
	r := runCLI(t, "inspect", nodes, "data")
	for _, want := range []string{"held by readers on 3 of 3 nodes", "a writer waits", "KIND", "HOLDS", "WWAIT", " read "} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("table of readers: want %q: %v", want, r)
		}
	}
	stopWriter()
	if err := <-writer; !errors.Is(err, redlock.ErrHeld) {
		t.Errorf("a writer over readers: %v, want ErrHeld", err)
	}

	// A reentrant owner with two holds: its kind, holds and recorded token;
	// its ID only with --show-owner.
	l := holdLockWith(t, "job", 10*time.Second, owner("job-7"), servers...)
	holdLockWith(t, "job", 10*time.Second, owner("job-7"), servers...)
	waitFor(t, "two holds on every node", func() bool {
		rep = inspectJSON(t, nodes, "job")
		for _, n := range rep.Nodes {
			if n.Holds != 2 {
				return false
			}
		}
		return true
	})
	if rep.State != "held" || rep.Kind != "write" || rep.Owner != fingerprint("job-7") {
		t.Errorf("reentrant owner: %+v", rep)
	}
	// A quorum records the lock's token; a node whose vote came after the
	// decision may record its own counter on a name's first use
	// (docs/lock-family.md).
	recorded := 0
	for _, n := range rep.Nodes {
		if n.Kind != "write" || n.Token == "" || n.OwnerID != "" {
			t.Errorf("reentrant owner, node %s: %+v, want a token and no owner ID", n.Node, n)
		}
		if n.Token == strconv.FormatInt(l.Token(), 10) {
			recorded++
		}
	}
	if recorded < 2 {
		t.Errorf("%d nodes record the owner's token %d, want a quorum: %+v", recorded, l.Token(), rep.Nodes)
	}
	r = runCLI(t, "inspect", nodes, "job")
	if !strings.Contains(r.stdout, "held by writer (or reentrant owner) "+fingerprint("job-7")+" on 3 of 3 nodes") || strings.Contains(r.stdout, "job-7") {
		t.Errorf("table of a reentrant owner, without its ID: %v", r)
	}
	rep = inspectJSON(t, "--show-owner", nodes, "job")
	for _, n := range rep.Nodes {
		if n.OwnerID != "job-7" {
			t.Errorf("--show-owner, node %s: %+v", n.Node, n)
		}
	}
	if r := runCLI(t, "inspect", "--show-owner", nodes, "job"); !strings.Contains(r.stdout, "OWNER ID") || !strings.Contains(r.stdout, "job-7") {
		t.Errorf("table with --show-owner: %v", r)
	}
}

// TestInspectFamilyExpiredHolds counts only the holds whose expiry is after
// the node's time, under --prefix.
func TestInspectFamilyExpiredHolds(t *testing.T) {
	servers := redistest.Start(t, 1)
	rc := servers[0].Client()
	defer rc.Close()
	ctx := context.Background()
	now, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	rc.HSet(ctx, "{app:report}", "mode", "r", "h:gone", ms-1000, "h:a", ms+60_000, "h:b", ms+30_000)
	rc.PExpire(ctx, "{app:report}", time.Minute)
	rc.HSet(ctx, "{app:old}", "mode", "w", "o", "x", "t", "5", "h:gone", ms-1000)
	rc.PExpire(ctx, "{app:old}", time.Minute)
	rc.HSet(ctx, "{app:exports}", "mode", "s", "k", "3", "h:gone", ms-1000, "h:a", ms+60_000)
	rc.PExpire(ctx, "{app:exports}", time.Minute)

	rep := inspectJSON(t, "--prefix", "app:", "--nodes", nodesFlag(servers...), "report")
	if n := rep.Nodes[0]; rep.State != "held" || !n.Held || n.Kind != "read" || n.Holds != 2 || n.PTTL <= 0 {
		t.Errorf("readers with an expired hold: %+v", rep)
	}
	rep = inspectJSON(t, "--prefix", "app:", "--nodes", nodesFlag(servers...), "old")
	if n := rep.Nodes[0]; rep.State != "free" || n.Held || n.Kind != "write" || n.Holds != 0 || n.Token != "5" {
		t.Errorf("a writer whose only hold expired: %+v", rep)
	}
	rep = inspectJSON(t, "--prefix", "app:", "--nodes", nodesFlag(servers...), "exports")
	if n := rep.Nodes[0]; !n.Held || n.Kind != "permit" || n.Holds != 1 || n.Permits != "3" {
		t.Errorf("a semaphore with one live permit of three: %+v", n)
	}
}

// newLibClient is a library client on servers, closed when the test ends.
func newLibClient(t *testing.T, servers ...*redistest.Server) *redlock.Client {
	t.Helper()
	nodes := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		rc := s.Client()
		t.Cleanup(func() { _ = rc.Close() })
		nodes[i] = rc
	}
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
