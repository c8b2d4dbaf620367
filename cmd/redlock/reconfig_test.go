package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/redistest"
)

// moveStep runs doctor on a move and returns its "move" check.
func moveStep(t *testing.T, cur, next string) check {
	t.Helper()
	rep, r := doctor(t, "--nodes", cur, "--next-nodes", next)
	for _, c := range rep.Checks {
		if c.Check == "move" {
			return c
		}
	}
	t.Fatalf("no move check: %v", r)
	return check{}
}

// TestDoctorMove follows a move from servers {0,1,2} to {1,2,3} through
// the runbook, as doctor reports it from the records of library Clients:
// nothing recorded, step 1 (a Client on the current set alone), step 2
// (beside a joint Client), step 3 (the current-set Client closed and its
// records expired), and a failure when a Client on the next set alone
// records beside one on the current set alone. run and inspect take
// --next-nodes too.
func TestDoctorMove(t *testing.T) {
	servers := redistest.Start(t, 4)
	cur, next := nodesFlag(servers[0], servers[1], servers[2]), nodesFlag(servers[1], servers[2], servers[3])
	var rcs []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		rcs = append(rcs, c)
	}
	ctx := context.Background()
	const maxTTL = 3 * time.Second
	newC := func(nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
		c, err := redlock.New(nodes, append([]redlock.Option{redlock.WithMaxTTL(maxTTL), redlock.WithRestartGuard(redlock.GuardOff),
			redlock.WithNodeTimeout(time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		l, err := c.TryObtain(ctx, "move", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		return c
	}
	if c := moveStep(t, cur, next); c.Verdict != verdictWarn || !strings.Contains(c.Detail, "no Client recorded") {
		t.Errorf("before any Client: %+v", c)
	}
	old := newC(rcs[:3])
	if c := moveStep(t, cur, next); !strings.Contains(c.Detail, "next: step 1") {
		t.Errorf("a Client on the current set alone: %+v", c)
	}
	newC(rcs[:3], redlock.WithNextNodes(goredis.New(rcs[1]), goredis.New(rcs[2]), goredis.New(rcs[3])))
	if c := moveStep(t, cur, next); !strings.Contains(c.Detail, "next: step 2") {
		t.Errorf("beside a joint Client: %+v", c)
	}
	// run and inspect in joint configuration.
	if r := runCLI(t, "run", "--nodes", cur, "--next-nodes", next, "--ttl", "2s", "--max-ttl", "3s", "--restart-guard", "off", "move", "--", "true"); r.code != exitOK {
		t.Errorf("run --next-nodes: %v", r)
	}
	if r := runCLI(t, "inspect", "--nodes", cur, "--next-nodes", next, "move"); r.code != exitOK || !strings.Contains(r.stdout, "free on every node that answered (4 of 4)") {
		t.Errorf("inspect --next-nodes: %v", r)
	}
	_ = old.Close()
	time.Sleep(maxTTL + maxTTL/2 + 200*time.Millisecond)
	if c := moveStep(t, cur, next); c.Verdict != verdictOK || !strings.Contains(c.Detail, "step 3 is safe") {
		t.Errorf("after step 2: %+v", c)
	}
	// Step 2 cut short: Clients of both sets alone.
	newC(rcs[:3])
	c, err := redlock.New(rcs[1:], redlock.WithMaxTTL(maxTTL), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.TryObtain(ctx, "move", 2*time.Second) // refused: it records all the same
	if c := moveStep(t, cur, next); c.Verdict != verdictFail {
		t.Errorf("Clients of both sets alone: %+v", c)
	}
}

// TestDoctorMoveNeedsFreshFloor: step 3 is safe only while every node of
// the next set holds a move floor raised by a joint Client's round that
// started within the last max TTL / 2 (issue 33: a grant of a Client of
// the current set alone after the last joint round is covered by no
// floor, and its records would still be live then). With a joint Client
// running, doctor says step 3; once it closed and its last round is older
// than that, doctor says to wait, though its joint record still lives; a
// joint Client recording again makes step 3 safe again.
func TestDoctorMoveNeedsFreshFloor(t *testing.T) {
	servers := redistest.Start(t, 4)
	cur, next := nodesFlag(servers[0], servers[1], servers[2]), nodesFlag(servers[1], servers[2], servers[3])
	var rcs []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		rcs = append(rcs, c)
	}
	ctx := context.Background()
	const maxTTL = 4 * time.Second
	joint := func() *redlock.Client {
		c, err := redlock.New(rcs[:3], redlock.WithMaxTTL(maxTTL), redlock.WithRestartGuard(redlock.GuardOff),
			redlock.WithNodeTimeout(time.Second), redlock.WithNextNodes(goredis.New(rcs[1]), goredis.New(rcs[2]), goredis.New(rcs[3])))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		l, err := c.TryObtain(ctx, "move", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		return c
	}
	stepThree := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c := moveStep(t, cur, next)
			if c.Verdict == verdictOK && strings.Contains(c.Detail, "step 3 is safe") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v, want step 3", what, c)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	j := joint()
	stepThree("a joint Client running")
	_ = j.Close()
	// Its last round's floor is no longer fresh after max TTL / 2; its
	// joint record lives max TTL × 1.5 from that round.
	time.Sleep(maxTTL/2 + 500*time.Millisecond)
	if c := moveStep(t, cur, next); !strings.Contains(c.Detail, "lack a move floor") || strings.Contains(c.Detail, "step 3 is safe") {
		t.Errorf("the joint Client closed %v ago: %+v, want a wait for the floor", maxTTL/2+500*time.Millisecond, c)
	}
	joint()
	stepThree("a joint Client again")
}
