package model

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// staleSeal is the counterexample the model checker found in the lock
// family's token rule (see TestFamilyStaleSealSchedule): three nodes, TTL
// 3, node timeout 2; clients A and B share owner P1, C is an exclusive
// writer.
//
//	t=10  A: n1 10241, n3 9217 -> rule 2, seal 10241 on n1, n3: A granted 10241
//	t=10  B (owner P1): n1 re-entry (t=10241, counter 10241), n2 fresh 11265
//	      -> rule 2, token 11265, seal sent; it is delayed at n1 and n3
//	t=10  A sends a refresh; it is delayed at n1 and n3
//	t=12  B's seal round times out (not granted); A's refresh fails
//	t=13  every hold has expired. C: n1 10242, n2 11266 -> seal 11266 on n1,
//	      n2: C granted 11266; C releases
//	t=13  A's late refresh re-seeds n1 and n3: {w P1, no t, hold of A}
//	t=13  B's late seal reaches n1 and n3: t = max(0, 11265) = 11265 on both
//	t=13  B's next acquire: n1, n3 re-entries report t=11265 -> rule 1:
//	      granted 11265, after C's 11266
//
// A re-seed records no token, but the seal of an older acquire of the same
// owner writes its token into the re-seeded hash: the hash was created
// after C's hold left, yet its t is older than C's token, which the rule-1
// argument of docs/lock-family.md assumes cannot happen.
func staleSeal() (Config, []Step) {
	cfg := Config{Nodes: 3, Clients: []ClientSpec{
		{Kind: Reentrant, Owner: 1, Acquires: 1, Refresh: 1},
		{Kind: Reentrant, Owner: 1, Acquires: 2},
		{Kind: Exclusive, Acquires: 1, Release: true},
	}, TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 30, Offsets: []int64{0, 1, -1}, Global: true}
	A, B, C := 0, 1, 2
	cl := func(c int) Step { return Step{Kind: StepClient, Client: c} }
	tick := Step{Kind: StepTick}
	var s []Step
	add := func(x ...Step) { s = append(s, x...) }
	// pd: node n runs client c's next request, and c receives the reply.
	pd := func(c int, nodes ...int) {
		for _, n := range nodes {
			add(Step{Kind: StepProcess, Client: c, Node: n}, Step{Kind: StepDeliver, Client: c, Node: n})
		}
	}
	add(cl(A))
	pd(A, 0, 2)
	add(cl(A), cl(A)) // rule 2: seal
	pd(A, 0, 2)
	add(cl(A)) // granted
	add(cl(B))
	pd(B, 0, 1)
	add(cl(B), cl(B)) // rule 2: seal, delayed
	add(cl(A))        // refresh, delayed
	add(tick, tick)
	add(cl(A), cl(A), cl(A)) // A's refresh fails; A stops
	add(cl(B))               // B's seal round times out
	add(tick)
	add(cl(C))
	pd(C, 0, 1)
	add(cl(C), cl(C))
	pd(C, 0, 1)
	add(cl(C), cl(C)) // granted, releases
	pd(C, 0, 1)
	pd(A, 0, 2)    // the late refresh re-seeds
	pd(B, 0, 2, 2) // B's late seal (n3: its late acquire first)
	add(cl(B))
	pd(B, 0, 2)
	add(cl(B)) // rule 1
	return cfg, s
}

// TestFamilyStaleSealSchedule replays staleSeal: the token rule as
// documented grants B's re-entry a token below C's, granted before it.
func TestFamilyStaleSealSchedule(t *testing.T) {
	cfg, s := staleSeal()
	m := New(cfg)
	steps, v := m.Replay(s)
	if v != nil {
		t.Fatalf("%s", m.Explain(steps, v))
	}
}

// TestFamilyStaleSealScripts plays staleSeal's script calls on three real
// redis-servers through internal/script, with the delayed requests sent
// late, and applies the documented token rule (FamilyToken) to the
// replies.
func TestFamilyStaleSealScripts(t *testing.T) {
	ctx := context.Background()
	nodes := redistest.Clients(t, 3)
	k := script.Keys{Lock: "{f}", Fence: "{f}:fence", Epoch: "{f}:epoch"}
	g := script.Guard{MaxTTL: 250 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Minute}
	const ttl = 200 * time.Millisecond
	acq := func(n int, h script.Hold) script.Acquired {
		t.Helper()
		for i := 0; ; i++ {
			a, err := script.FamilyAcquireCall(k, h, ttl, g).Acquire(ctx, nodes[n], script.Ack{})
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != script.Recovering || i == 100 {
				if a.Status != script.Taken {
					t.Fatalf("n%d refused %+v: %+v", n+1, h, a)
				}
				return a
			}
			time.Sleep(10 * time.Millisecond) // a fresh server recovers for max TTL
		}
	}
	seal := func(token int64, owner string, ns ...int) {
		t.Helper()
		for _, n := range ns {
			if err := script.Seal(ctx, nodes[n], k, token, owner, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	rule := func(as ...script.Acquired) (int64, bool) {
		var yes []FamVote
		for _, a := range as {
			yes = append(yes, FamVote{a.Token, a.Existed, a.Counter})
		}
		return FamilyToken(2, yes, Mutations{})
	}
	A := script.Hold{Mode: 'w', Owner: "P1", ID: "a"}
	B := script.Hold{Mode: 'w', Owner: "P1", ID: "b"}
	B2 := script.Hold{Mode: 'w', Owner: "P1", ID: "b2"}
	C := script.Hold{Mode: 'w', Owner: "X", ID: "c"}
	// Counters apart, as the model's clock offsets make them: n2 ahead.
	now, err := nodes[0].Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	base := (now.UnixMilli() + 60_000) * 1024
	for n, v := range []int64{base, base + 1024, base - 1024} {
		// The record first (a fresh server recovers), then the counter.
		acq(n, script.Hold{Mode: 'r', ID: "warm"})
		if _, err := script.FamilyReleaseCall(k.Lock, script.Hold{Mode: 'r', ID: "warm"}, "", false).Release(ctx, nodes[n]); err != nil {
			t.Fatal(err)
		}
		if err := nodes[n].Set(ctx, k.Fence, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}

	tA, sealA := rule(acq(0, A), acq(2, A))
	if !sealA {
		t.Fatalf("A: token %d without a seal", tA)
	}
	seal(tA, "P1", 0, 2) // A granted tA
	tB, sealB := rule(acq(0, B), acq(1, B))
	if !sealB {
		t.Fatalf("B: token %d without a seal", tB)
	}
	// B's seal and A's refresh are delayed; every hold expires.
	time.Sleep(ttl + 50*time.Millisecond)
	tC, sealC := rule(acq(0, C), acq(1, C))
	if sealC {
		seal(tC, "X", 0, 1)
	}
	for _, n := range []int{0, 1} {
		if _, err := script.FamilyReleaseCall(k.Lock, C, "", false).Release(ctx, nodes[n]); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("A granted %d; B sealing %d (delayed); C granted %d and released", tA, tB, tC)
	// The late requests: A's refresh re-seeds n1 and n3, then B's acquire
	// (n3) and seal (n1, n3) arrive.
	for _, n := range []int{0, 2} {
		r, err := script.RefreshItem{Keys: k, TTL: ttl, Hold: &A}.Run(ctx, nodes[n], g)
		if err != nil || r != script.Reseeded {
			t.Fatalf("A's late refresh on n%d: %v %v", n+1, r, err)
		}
	}
	acq(2, B)
	seal(tB, "P1", 0, 2)
	tB2, sealB2 := rule(acq(0, B2), acq(2, B2))
	t.Logf("B's re-entry: token %d, seal %v", tB2, sealB2)
	if !sealB2 && tB2 <= tC {
		t.Errorf("B's re-entry is granted token %d by rule 1 after C's grant with token %d", tB2, tC)
	}
}
