package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// guardedClient returns a Client with the restart guard on and the given
// max TTL over the servers.
func guardedClient(t *testing.T, maxTTL time.Duration, servers ...*redistest.Server) *redlock.Client {
	t.Helper()
	return guardedClientWith(t, maxTTL, servers)
}

// guardedClientWith is guardedClient with more options.
func guardedClientWith(t *testing.T, maxTTL time.Duration, servers []*redistest.Server, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	var nodes []redis.UniversalClient
	for _, s := range servers {
		rc := s.Client()
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithMaxTTL(maxTTL), redlock.WithNodeTimeout(250 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func recoveryOf(t *testing.T, rep doctorReport) check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Check == "recovery" {
			return c
		}
	}
	t.Fatalf("no check \"recovery\" in %+v", rep.Checks)
	return check{}
}

// A Client with a larger max TTL puts a node into a longer recovery for
// every Client: doctor reads the node's epoch record, fails the node with
// the record's max TTL (not --max-ttl) and names the way out; the way out,
// followed, ends the recovery at the epoch's start plus --max-ttl.
func TestDoctorFailsARecoveryWindowLongerThanMaxTTL(t *testing.T) {
	servers := redistest.Start(t, 1)
	nodes := "--nodes=" + nodesFlag(servers...)
	ctx := context.Background()

	r := runCLI(t, "doctor", "--json", "--max-ttl", "2s", "--ttl", "1s", nodes)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor: %v (%v)", r, err)
	}
	// A node younger than --max-ttl does not vote yet (warn), an older one
	// does (ok): either way, it has no record.
	if c := recoveryOf(t, rep); c.Verdict == verdictFail || !strings.Contains(c.Detail, "no epoch record") {
		t.Fatalf("recovery on a node without a record: %+v", c)
	}

	big := guardedClient(t, time.Hour, servers...)
	if _, err := big.TryObtain(ctx, "x", time.Second); !errors.Is(err, redlock.ErrNodeRecovering) {
		t.Fatalf("TryObtain of the Client with the large max TTL: %v", err)
	}
	r = runCLI(t, "doctor", "--json", "--max-ttl", "2s", "--ttl", "1s", nodes)
	rep = doctorReport{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor: %v (%v)", r, err)
	}
	c := recoveryOf(t, rep)
	// The only node refuses every lock: no quorum votes.
	if r.code != exitUnavailable || rep.Verdict != verdictNoQuorum || c.Verdict != verdictFail || c.Remedy == 0 {
		t.Fatalf("doctor after a 1h max TTL was recorded: exit %d, verdict %s, recovery %+v", r.code, rep.Verdict, c)
	}
	said := c.Detail + " " + rep.Remedies[c.Remedy-1]
	for _, want := range []string{"holds a max TTL of 1h0m0s", "longer than --max-ttl 2s", "Way out", "A recovery window longer than the max TTL", "EVAL", "'{redlock:}:epoch' 2000", "host 127.0.0.1:"} {
		if !strings.Contains(said, want) {
			t.Errorf("recovery detail and remedy %q do not say %q", said, want)
		}
	}
	for _, ch := range rep.Checks {
		if ch.Check == "persistence" && strings.Contains(ch.Detail, "keeps it out of locking for --max-ttl") {
			t.Errorf("persistence says the guard keeps the node out for --max-ttl, which the record contradicts: %q", ch.Detail)
		}
	}

	// The Client with the large max TTL is gone, and it first locked after
	// the epoch began: the way out is safe. Follow it.
	_ = big.Close()
	rc := servers[0].Client()
	defer rc.Close()
	end, err := rc.Eval(ctx, lowerEpochScript, []string{"{redlock:}:epoch"}, 2000).Int64()
	if err != nil || end <= 0 {
		t.Fatalf("the way out: %v, %v", end, err)
	}
	small := guardedClient(t, 2*time.Second, servers...)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := small.Obtain(wctx, "x", time.Second)
	if err != nil {
		t.Fatalf("Obtain with --max-ttl after the way out: %v", err)
	}
	_ = l.Release(ctx)
	r = runCLI(t, "doctor", "--json", "--max-ttl", "2s", "--ttl", "1s", nodes)
	rep = doctorReport{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor: %v (%v)", r, err)
	}
	if c := recoveryOf(t, rep); c.Verdict != verdictOK || !strings.Contains(c.Detail, "voting") {
		t.Fatalf("recovery after the way out: %+v", c)
	}

	// A record raised by an older version beyond WithMaxTTL's bound, as in
	// issue #38: still failed, with the record's value.
	if err := rc.HSet(ctx, "{redlock:}:epoch", "maxttl", (100000 * time.Hour).Milliseconds(),
		"until", time.Now().Add(99999*time.Hour).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "doctor", "--max-ttl", "1m", "--ttl", "1s", nodes)
	if r.code != exitUnavailable || !strings.Contains(r.stdout, "holds a max TTL of 100000h0m0s, longer than --max-ttl 1m0s") {
		t.Fatalf("doctor with a record of 100000h: %v", r)
	}
	if r := runCLI(t, "doctor", "--max-ttl", "100000h", nodes); r.code != exitUsage || !strings.Contains(r.stderr, "above 1h0m0s") {
		t.Fatalf("doctor --max-ttl 100000h: %v", r)
	}
}

// After kill -9 and a restart of an AOF node, its epoch record names the
// old process: inspect must not say "voting", for the next acquire starts a
// new epoch and recovers (issue #38, item 3).
func TestInspectRestartedAOFNodeIsNotVoting(t *testing.T) {
	servers := redistest.Start(t, 1, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	nodes := "--nodes=" + nodesFlag(servers...)
	ctx := context.Background()
	// Records off: a Client's recorder passes the restart guard every max
	// TTL / 4, which starts a restarted node's new epoch before any
	// acquire does; this test reads the record as it is before that.
	c := guardedClientWith(t, time.Second, servers, redlock.WithConfigRecords(false))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := c.Obtain(wctx, "x", 800*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	time.Sleep(1200 * time.Millisecond) // past the first epoch's recovery
	epoch := func() string {
		t.Helper()
		r := runCLI(t, "inspect", "--json", nodes, "x")
		var rep inspectReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Nodes) != 1 {
			t.Fatalf("inspect: %v (%v)", r, err)
		}
		return rep.Nodes[0].Epoch
	}
	if e := epoch(); e != "voting" {
		t.Fatalf("epoch before the restart: %q, want voting", e)
	}
	if err := servers[0].Restart(); err != nil { // SIGKILL, then the same dir: the AOF is reloaded
		t.Fatal(err)
	}
	rc := servers[0].Client()
	defer rc.Close()
	if n, err := rc.Exists(ctx, "{redlock:}:epoch").Result(); err != nil || n != 1 {
		t.Fatalf("the epoch record did not survive the restart (AOF): %d, %v", n, err)
	}
	if e := epoch(); e == "voting" || !strings.Contains(e, "restarted") {
		t.Fatalf("epoch of a restarted node before its next acquire: %q, want restarted, not voting", e)
	}
	// And what inspect says holds: the next acquire finds it recovering.
	_, err = c.TryObtain(ctx, "x", 800*time.Millisecond)
	if !errors.Is(err, redlock.ErrNodeRecovering) {
		t.Fatalf("TryObtain after the restart: %v, want ErrNodeRecovering", err)
	}
	if e := epoch(); !strings.HasPrefix(e, "recovering") {
		t.Fatalf("epoch after the next acquire: %q, want recovering", e)
	}
}

// recoveryCheck's verdicts on records as doctor reads them.
func TestRecoveryCheckVerdicts(t *testing.T) {
	cfg := doctorConfig{prefix: "redlock:", guard: guardFlags{maxTTL: time.Minute, mode: guardOn}}
	now := time.Now().UnixMilli()
	probe := func(r epochRecord) nodeProbe {
		r.key, r.present, r.now = "{redlock:}:epoch", true, now
		if r.run == "" {
			r.run = "aaaa"
		}
		if r.runID == "" {
			r.runID = "aaaa"
		}
		return nodeProbe{spec: &nodeSpec{label: "n"}, epoch: nodeEpoch{read: true, rec: r}}
	}
	h := time.Hour.Milliseconds()
	for _, tc := range []struct {
		name    string
		p       nodeProbe
		verdict string
		says    string
	}{
		{"no record, a fresh node", nodeProbe{spec: &nodeSpec{label: "n"}, epoch: nodeEpoch{read: true, rec: epochRecord{now: now}}}, verdictWarn, "refuses every lock until"},
		{"voting", probe(epochRecord{base: now - 2*h, maxTTL: 60000, until: now - 2*h + 60000, kind: "restart"}), verdictOK, "voting"},
		{"recovering within --max-ttl", probe(epochRecord{base: now, maxTTL: 60000, until: now + 60000, kind: "restart"}), verdictWarn, "recovering after a restart"},
		{"recovering beyond --max-ttl", probe(epochRecord{base: now - h, maxTTL: 7 * 24 * h, until: now + 6*24*h, kind: "new"}), verdictFail, "holds a max TTL of 168h0m0s, longer than --max-ttl 1m0s"},
		{"ended, but beyond --max-ttl", probe(epochRecord{base: now - 2*h, maxTTL: h, until: now - h, kind: "new"}), verdictWarn, "its window has ended"},
		{"restarted since the record", probe(epochRecord{base: now - 2*h, maxTTL: 7 * 24 * h, until: now + 5*24*h, kind: "new", runID: "bbbb"}), verdictWarn, "its next guarded request (an acquire, or a Client's configuration record, every max TTL / 4) starts a new epoch"},
	} {
		v, d := recoveryCheck(cfg, tc.p)
		if v != tc.verdict || !strings.Contains(d, tc.says) {
			t.Errorf("%s: %s %q, want %s saying %q", tc.name, v, d, tc.verdict, tc.says)
		}
	}
	off := cfg
	off.guard.mode = guardOff
	if v, _ := recoveryCheck(off, probe(epochRecord{maxTTL: 7 * 24 * h, until: now + h})); v != verdictSkip {
		t.Errorf("guard off: %s, want skip", v)
	}
}

// TestVoteTime: when a node votes, by today's restart guard
// (internal/script/epoch.lua), from its record, uptime and history (C2 of
// issue 49).
func TestVoteTime(t *testing.T) {
	on := guardFlags{maxTTL: time.Minute, mode: guardOn}
	persistent := guardFlags{maxTTL: time.Minute, mode: guardPersistent}
	now := int64(1_800_000_000_000)
	m := time.Minute.Milliseconds()
	rec := func(r epochRecord) epochRecord {
		r.present, r.now, r.runID = true, now, "aaaa"
		if r.run == "" {
			r.run = "aaaa"
		}
		return r
	}
	none := epochRecord{now: now, runID: "aaaa"}
	for _, tc := range []struct {
		name    string
		guard   guardFlags
		r       epochRecord
		uptime  time.Duration
		replica bool
		now     bool
		at      int64 // node ms, when not now
		after   bool  // counted from the next acquire
	}{
		{"guard off", guardFlags{maxTTL: time.Minute, mode: guardOff}, none, 0, false, true, 0, false},
		{"fresh, no record", on, none, 10 * time.Second, false, false, now - 9000 + m, false},
		{"up longer than the max TTL, no record", on, none, 2 * time.Minute, false, true, 0, false},
		{"up 1 s: started at most now", on, none, time.Second, false, false, now + m, false},
		{"a promoted replica, no record", on, none, time.Hour, true, false, now + m, true},
		{"restarted with its data", on, rec(epochRecord{run: "bbbb", base: now - 3*m, maxTTL: m, until: now - 2*m, kind: "new"}), time.Second, false, false, now + m, true},
		{"restarted, persistence trusted", persistent, rec(epochRecord{run: "bbbb", base: now - 3*m, maxTTL: m, until: now - 2*m, kind: "new"}), time.Second, false, true, 0, false},
		{"restarted replica, persistence trusted", persistent, rec(epochRecord{run: "bbbb", base: now - 3*m, maxTTL: m, until: now - 2*m, kind: "new"}), time.Second, true, false, now + m, true},
		{"recovering", on, rec(epochRecord{base: now - 20000, maxTTL: m, until: now - 20000 + m, kind: "restart"}), time.Hour, false, false, now - 20000 + m, false},
		{"recovering, a smaller max TTL recorded", on, rec(epochRecord{base: now - 20000, maxTTL: 30000, until: now + 10000, kind: "restart"}), time.Hour, false, false, now - 20000 + m, false},
		{"recovering after a restart, persistence trusted", persistent, rec(epochRecord{base: now - 20000, maxTTL: m, until: now - 20000 + m, kind: "restart"}), time.Hour, false, true, 0, false},
		{"voting", on, rec(epochRecord{base: now - 2*m, maxTTL: m, until: now - m, kind: "new"}), time.Hour, false, true, 0, false},
	} {
		v := voteTime(tc.guard, tc.r, tc.uptime, tc.replica)
		if v.now != tc.now || (!tc.now && v.at != tc.at) || (v.afterAcquire > 0) != tc.after || v.why == "" {
			t.Errorf("%s: %+v, want now %v, at %d, after an acquire %v", tc.name, v, tc.now, tc.at, tc.after)
		}
	}
}
