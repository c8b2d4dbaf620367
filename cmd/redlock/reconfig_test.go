package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
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

// TestDoctorMoveKnowsNodesNotSpellings is issue 44's finding E for the
// doctor, and its reading of an earlier release's records. A Client on
// the current set {0,1,2} reaches it as localhost:PORT; the doctor and a
// joint Client are given 127.0.0.1:PORT. Once the joint Client recorded,
// the doctor must say to wait for the Client of the current set alone,
// not that step 3 is safe. An earlier release named a set by its
// addresses: its Client's record (written here as that release's
// record.lua wrote it, with script.Record and the fingerprint of the
// addresses, since the release itself cannot run in this test) also
// keeps the doctor at step 2, waiting for a Client of the current set.
func TestDoctorMoveKnowsNodesNotSpellings(t *testing.T) {
	servers := redistest.Start(t, 4)
	cur, next := nodesFlag(servers[0], servers[1], servers[2]), nodesFlag(servers[1], servers[2], servers[3])
	var rcs, local []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		l := redis.NewClient(&redis.Options{Addr: "localhost:" + strconv.Itoa(s.Port())})
		t.Cleanup(func() { _ = c.Close(); _ = l.Close() })
		rcs, local = append(rcs, c), append(local, l)
	}
	ctx := context.Background()
	const maxTTL = 2 * time.Second
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL), redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(300 * time.Millisecond)}
	svc, err := redlock.New(local[:3], opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.TryObtain(ctx, "job", time.Second, redlock.WithAutoRefresh()); err != nil {
		t.Fatal(err)
	}
	jc, err := redlock.New(rcs[:3], append(opts, redlock.WithNextNodes(goredis.New(rcs[1]), goredis.New(rcs[2]), goredis.New(rcs[3])))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = jc.Close() })
	if l, err := jc.TryObtain(ctx, "other", time.Second); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Release(ctx)
	}
	time.Sleep(maxTTL / 2) // two rounds of the joint Client's recorder
	if c := moveStep(t, cur, next); !strings.Contains(c.Detail, "a Client of the current set alone was seen") {
		t.Errorf("a Client of the current set under localhost: %+v, want a wait for it", c)
	}
	// An earlier release's Client of the current set: its record's field
	// is c: and the fingerprint of the addresses as it was given them.
	var addrs []string
	for _, s := range servers[:3] {
		addrs = append(addrs, s.Addr())
	}
	legacy := keys.ConfigSingle(keys.Fingerprint(addrs))
	key := keys.Layout{Prefix: "redlock:"}.Configs()
	for _, rc := range rcs[:3] {
		if _, err := script.Record(ctx, goredis.New(rc), key, keys.Layout{Prefix: "redlock:"}.NodeEpoch(), script.Guard{Mode: '0'}, []script.RecordField{{Name: legacy, TTL: 10 * time.Minute}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The localhost Client's records expire once it stops; the legacy
	// record lives 10 minutes: the doctor waits for it.
	_ = svc.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c := moveStep(t, cur, next)
		if strings.HasPrefix(c.Detail, "next: step 3 is safe") {
			t.Fatalf("step 3 beside an earlier release's Client of the current set: %+v", c)
		}
		if strings.Contains(c.Detail, "a Client of the current set alone was seen, and may hold locks for another 9m") {
			break // the legacy record's 10 minutes, not the localhost Client's 3 s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the doctor does not wait for the earlier release's Client: %+v", c)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
