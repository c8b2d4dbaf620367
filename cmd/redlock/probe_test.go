package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestProbe: redlock probe's exit status on a recovering node and on a
// voting one, before and after a restart with the data (issue 48, K2): a
// node restarted from its AOF recovers until its process start plus the
// max TTL, and the probe says so; it takes no lock.
func TestProbe(t *testing.T) {
	servers := redistest.Start(t, 1, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	probe := []string{"probe", "--max-ttl", "2s", "--timeout", "2s", "--nodes", nodesFlag(servers...)}
	// untilVoting runs the probe until it exits 0, and fails the test
	// when it exits with anything but 0 or 69 "recovering".
	untilVoting := func(what string) time.Time {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := runCLI(t, probe...)
			if r.code == exitOK {
				if !strings.Contains(r.stdout, "voting") {
					t.Fatalf("%s: exit 0 saying %q, want voting", what, r.stdout)
				}
				return time.Now()
			}
			if r.code != exitUnavailable || !strings.Contains(r.stderr, "recovering") {
				t.Fatalf("%s: %+v, want exit 0, or 69 recovering", what, r)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: still recovering: %+v", what, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	started := time.Now()
	if r := runCLI(t, probe...); r.code != exitUnavailable || !strings.Contains(r.stderr, "not voting: recovering under the restart guard") {
		t.Fatalf("probe of a node started just now: %+v, want exit 69, recovering", r)
	}
	untilVoting("after the start")
	if r := runCLI(t, probe...); r.code != exitOK {
		t.Fatalf("probe of a voting node: %+v, want exit 0", r)
	}

	before := time.Now()
	if err := servers[0].Restart(); err != nil { // SIGKILL, then the AOF is reloaded
		t.Fatal(err)
	}
	if r := runCLI(t, probe...); r.code != exitUnavailable || !strings.Contains(r.stderr, "recovering") {
		t.Fatalf("probe right after a restart with the data: %+v, want exit 69, recovering", r)
	}
	voting := untilVoting("after the restart")
	if voting.Before(before.Add(2 * time.Second)) {
		t.Fatalf("the probe passed %v after the restart, before the max TTL 2s", voting.Sub(before))
	}
	t.Logf("voting %v after the start, %v after the restart (max TTL 2s)", time.Since(started).Round(time.Millisecond), voting.Sub(before).Round(time.Millisecond))

	// The probe took no lock and kept no configuration record: the
	// node holds the epoch record (and its fast path's key) alone.
	rc := servers[0].Client()
	defer rc.Close()
	got, err := rc.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got {
		if !slices.Contains([]string{"{redlock:}:epoch", "{redlock:}:epoch:ok"}, k) {
			t.Errorf("the probe left key %q", k)
		}
	}
}

// TestProbeUsage: what the probe refuses.
func TestProbeUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"probe", "--nodes", "redis-cluster://127.0.0.1:1"}, "Redis Cluster"},
		{[]string{"probe", "--restart-guard", "off", "--nodes", "redis://127.0.0.1:1"}, "nothing to probe"},
		{[]string{"probe", "--max-ttl", "2h", "--nodes", "redis://127.0.0.1:1"}, "above"},
		{[]string{"probe", "--nodes", "redis://127.0.0.1:1", "extra"}, "unexpected argument"},
	} {
		if r := runCLI(t, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%v: %+v, want exit 2 saying %q", tc.args, r, tc.says)
		}
	}
	// A node that does not answer does not vote.
	if r := runCLI(t, "probe", "--timeout", "200ms", "--nodes", "redis://127.0.0.1:1"); r.code != exitUnavailable || !strings.Contains(r.stderr, "not voting") {
		t.Errorf("probe of a node that is down: %+v, want exit 69, not voting", r)
	}
}
