package model

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver/goredis"
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

// staleSealHeld is a second schedule of the same bug (from the branch
// model-family), which a seal recording only where its own hold is present
// would not prevent: B's seal reaches n1 on time, A's refresh extends n1 on
// time (the hash there lives on), C is granted on n2 and n3; at n3, A's
// late refresh re-seeds, B's late acquire adds B's hold (a re-entry, not
// counted), and B's late seal, under the old rule, records 11265 there.
// B's next acquire would find t=11265 on n1 and n3: rule 1, after C's
// 11266. Under the rule of seal.lua (a seal raises only a recorded t > 0)
// n3's re-seeded hash keeps no token, and B's re-entry opens a new tenure.
func staleSealHeld() (Config, []Step) {
	cfg, _ := staleSeal()
	A, B, C := 0, 1, 2
	cl := func(c int) Step { return Step{Kind: StepClient, Client: c} }
	tick := Step{Kind: StepTick}
	var s []Step
	add := func(x ...Step) { s = append(s, x...) }
	pd := func(c int, nodes ...int) {
		for _, n := range nodes {
			add(Step{Kind: StepProcess, Client: c, Node: n}, Step{Kind: StepDeliver, Client: c, Node: n})
		}
	}
	add(cl(A))
	pd(A, 0, 2)
	add(cl(A), cl(A))
	pd(A, 0, 2)
	add(cl(A)) // granted 10241
	add(cl(B))
	pd(B, 0, 1)
	add(cl(B), cl(B)) // rule 2: seal 11265
	pd(B, 0)          // on time at n1
	add(tick)
	add(cl(A)) // refresh at t=11
	pd(A, 0)   // n1 extends
	add(tick)
	add(cl(B)) // B's seal round fails at t=12
	add(tick)
	add(cl(A), cl(A), cl(A))
	add(cl(C))
	pd(C, 1, 2)
	add(cl(C), cl(C))
	pd(C, 1, 2)
	add(cl(C), cl(C)) // granted 11266, releases
	pd(C, 1, 2)
	pd(A, 2)    // the late refresh re-seeds n3
	pd(B, 2, 2) // B's late acquire, then its late seal
	add(cl(B))
	pd(B, 0, 2)
	add(cl(B)) // rule 1
	return cfg, s
}

// TestFamilyStaleSealSchedule replays staleSeal and staleSealHeld: with
// the seal rule of seal.lua, no property breaks; with the old rule (the
// SealRecordsUnrecorded mutant), both grant B's re-entry a token below
// C's, granted before it. A's late refresh re-seeds as a Client before
// issue 44 sends it, whatever the counter (ReseedIgnoresToken): during an
// upgrade, the seal's rule must hold against it. This version's refresh
// does not re-seed there (C's vote and release put the counter past A's
// token), and then even the old rule breaks nothing.
func TestFamilyStaleSealSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func() (Config, []Step)
	}{{"staleSeal", staleSeal}, {"staleSealHeld", staleSealHeld}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, s := tc.f()
			// The schedules decide B's first round at its first quorum,
			// as the client did before its wait for agreeing votes (family.enough).
			cfg.Mut.DecideAtQuorum = true
			cfg.Mut.ReseedIgnoresToken = true
			m := New(cfg)
			if steps, v := m.Replay(s); v != nil {
				t.Fatalf("%s", m.Explain(steps, v))
			}
			cfg.Mut.SealRecordsUnrecorded = true
			m = New(cfg)
			steps, v := m.Replay(s)
			if v == nil || v.Prop != "token" {
				t.Fatalf("old seal rule: %v, want a token inversion", v)
			}
			t.Logf("old seal rule:\n%s", m.Explain(steps, v))
			cfg.Mut.ReseedIgnoresToken = false
			m = New(cfg)
			if steps, v := m.Replay(s); v != nil {
				t.Fatalf("old seal rule, this version's refresh: %s", m.Explain(steps, v))
			}
		})
	}
}

// sealBench is three real redis-servers for the stale-seal replays, with
// the script calls of a family lock on one name; the model's clock
// offsets are played by counters set apart (n2 ahead, n3 behind).
type sealBench struct {
	t     *testing.T
	ctx   context.Context
	nodes []redis.UniversalClient
	k     script.Keys
	g     script.Guard
}

const sealTTL = 200 * time.Millisecond

func newSealBench(t *testing.T) *sealBench {
	b := &sealBench{t: t, ctx: context.Background(), nodes: redistest.Clients(t, 3),
		k: script.Keys{Lock: "{f}", Fence: "{f}:fence", Epoch: "{f}:epoch"},
		g: script.Guard{MaxTTL: 250 * time.Millisecond, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Minute}}
	now, err := b.nodes[0].Time(b.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	base := (now.UnixMilli() + 60_000) * 1024
	for n, v := range []int64{base, base + 1024, base - 1024} {
		// The record first (a fresh server recovers), then the counter.
		b.acq(n, script.Hold{Mode: 'r', ID: "warm"})
		b.release(script.Hold{Mode: 'r', ID: "warm"}, 0, n)
		if err := b.nodes[n].Set(b.ctx, b.k.Fence, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// acq runs family.lua for h on node n, which must vote yes.
func (b *sealBench) acq(n int, h script.Hold) script.Acquired {
	b.t.Helper()
	for i := 0; ; i++ {
		a, err := script.FamilyAcquireCall(b.k, h, sealTTL, b.g).Acquire(b.ctx, goredis.New(b.nodes[n]), script.Ack{})
		if err != nil {
			b.t.Fatal(err)
		}
		if a.Status != script.Recovering || i == 100 {
			if a.Status != script.Taken {
				b.t.Fatalf("n%d refused %+v: %+v", n+1, h, a)
			}
			return a
		}
		time.Sleep(10 * time.Millisecond) // a fresh server recovers for max TTL
	}
}

func (b *sealBench) seal(token int64, owner string, ns ...int) {
	b.t.Helper()
	for _, n := range ns {
		if err := script.Seal(b.ctx, goredis.New(b.nodes[n]), b.k, token, owner, b.g); err != nil {
			b.t.Fatal(err)
		}
	}
}

// release runs familyrelease.lua for h, of token token (0: retire none),
// on nodes ns.
func (b *sealBench) release(h script.Hold, token int64, ns ...int) {
	b.t.Helper()
	rt := script.Retire{Fence: b.k.Fence, Token: token, Guard: b.g}
	for _, n := range ns {
		if _, err := script.FamilyReleaseCall(b.k.Lock, h, rt, "", false).Release(b.ctx, goredis.New(b.nodes[n])); err != nil {
			b.t.Fatal(err)
		}
	}
}

// refresh runs familyrefresh.lua for h of token token on nodes ns with
// ttl; it must give want.
func (b *sealBench) refresh(h script.Hold, token int64, ttl time.Duration, want script.RefreshResult, ns ...int) {
	b.t.Helper()
	for _, n := range ns {
		r, err := script.FamilyRefresh(b.k, &h, token, ttl).Run(b.ctx, goredis.New(b.nodes[n]), b.g)
		if err != nil || r != want {
			b.t.Fatalf("%s's refresh on n%d: %v %v, want %v", h.ID, n+1, r, err, want)
		}
	}
}

// rule applies the documented token rule (FamilyToken) to the replies.
func (b *sealBench) rule(as ...script.Acquired) (int64, bool) {
	var yes []FamVote
	for _, a := range as {
		yes = append(yes, FamVote{a.Token, a.Existed, a.Counter})
	}
	return FamilyToken(2, yes, Mutations{})
}

var (
	holdA  = script.Hold{Mode: 'w', Owner: "P1", ID: "a"}
	holdB  = script.Hold{Mode: 'w', Owner: "P1", ID: "b"}
	holdB2 = script.Hold{Mode: 'w', Owner: "P1", ID: "b2"}
	holdC  = script.Hold{Mode: 'w', Owner: "X", ID: "c"}
)

// grantC: C, another owner, is granted on nodes ns and releases.
func (b *sealBench) grantC(ns ...int) int64 {
	b.t.Helper()
	var as []script.Acquired
	for _, n := range ns {
		as = append(as, b.acq(n, holdC))
	}
	tC, sealC := b.rule(as...)
	if sealC {
		b.seal(tC, "X", ns...)
	}
	b.release(holdC, tC, ns...)
	return tC
}

// checkReentry: B's re-entry on n1 and n3 must not take rule 1 with a
// token at or below C's.
func (b *sealBench) checkReentry(tC int64) {
	b.t.Helper()
	tB2, sealB2 := b.rule(b.acq(0, holdB2), b.acq(2, holdB2))
	b.t.Logf("B's re-entry: token %d, seal %v", tB2, sealB2)
	if !sealB2 && tB2 <= tC {
		b.t.Errorf("B's re-entry is granted token %d by rule 1 after C's grant with token %d", tB2, tC)
	}
}

// TestFamilyStaleSealScripts plays staleSeal's script calls on three real
// redis-servers through internal/script, with the delayed requests sent
// late, and applies the documented token rule (FamilyToken) to the
// replies.
func TestFamilyStaleSealScripts(t *testing.T) {
	b := newSealBench(t)
	tA, sealA := b.rule(b.acq(0, holdA), b.acq(2, holdA))
	if !sealA {
		t.Fatalf("A: token %d without a seal", tA)
	}
	b.seal(tA, "P1", 0, 2) // A granted tA
	tB, sealB := b.rule(b.acq(0, holdB), b.acq(1, holdB))
	if !sealB {
		t.Fatalf("B: token %d without a seal", tB)
	}
	// B's seal and A's refresh are delayed; every hold expires.
	time.Sleep(sealTTL + 50*time.Millisecond)
	tC := b.grantC(0, 1)
	t.Logf("A granted %d; B sealing %d (delayed); C granted %d and released", tA, tB, tC)
	// The late requests: A's refresh re-seeds n1 and n3, then B's acquire
	// (n3) and seal (n1, n3) arrive. This version's refresh finds A's
	// token retired on n1 (C voted and released there); a Client's before
	// issue 44 re-seeds (a token above every counter), and the seal's rule
	// must hold against it.
	b.refresh(holdA, tA, sealTTL, script.Retired, 0)
	b.refresh(holdA, math.MaxInt64, sealTTL, script.Reseeded, 0, 2)
	b.acq(2, holdB)
	b.seal(tB, "P1", 0, 2)
	b.checkReentry(tC)
}

// TestFamilyStaleSealHeldScripts plays staleSealHeld's script calls on
// three real redis-servers: B's seal reaches n1 on time, A's refresh keeps
// n1's hash alive (here with a long TTL, so that the replay does not hang
// on the machine's timing), C is granted on n2 and n3, then A's late
// refresh re-seeds n3, B's late acquire re-enters there and B's late seal
// arrives.
func TestFamilyStaleSealHeldScripts(t *testing.T) {
	b := newSealBench(t)
	tA, sealA := b.rule(b.acq(0, holdA), b.acq(2, holdA))
	if !sealA {
		t.Fatalf("A: token %d without a seal", tA)
	}
	b.seal(tA, "P1", 0, 2) // A granted tA
	tB, sealB := b.rule(b.acq(0, holdB), b.acq(1, holdB))
	if !sealB {
		t.Fatalf("B: token %d without a seal", tB)
	}
	b.seal(tB, "P1", 0) // on time at n1 only
	b.refresh(holdA, tA, 10*time.Second, script.Extended, 0)
	// Every hold but A's on n1 expires.
	time.Sleep(sealTTL + 50*time.Millisecond)
	tC := b.grantC(1, 2)
	t.Logf("A granted %d; B sealing %d (on time at n1 only); C granted %d and released", tA, tB, tC)
	b.refresh(holdA, tA, sealTTL, script.Retired, 2)
	b.refresh(holdA, math.MaxInt64, sealTTL, script.Reseeded, 2) // a Client's before issue 44
	b.acq(2, holdB)
	b.seal(tB, "P1", 2)
	b.checkReentry(tC)
}

// TestFamilyConcurrentFirstAcquires shows, on three real redis-servers,
// what docs/lock-family.md says of two first acquires of one owner that
// run at once (neither holds yet): n1 runs A's acquire first and then B's,
// n2 runs B's first and then A's; each finds the other's hold on one node
// (a re-entry there) and issued a fresh counter on the other, so each
// takes rule 2 with its own token: the owner holds the lock twice, with
// two different tokens. The seals then record the larger one.
func TestFamilyConcurrentFirstAcquires(t *testing.T) {
	b := newSealBench(t)
	a1 := b.acq(0, holdA)
	b2 := b.acq(1, holdB)
	b1 := b.acq(0, holdB)
	a2 := b.acq(1, holdA)
	tA, sealA := b.rule(a1, a2)
	tB, sealB := b.rule(b1, b2)
	t.Logf("A: token %d (seal %v); B: token %d (seal %v)", tA, sealA, tB, sealB)
	if !sealA || !sealB || tA == tB {
		t.Fatalf("A: %d, seal %v; B: %d, seal %v: want two seals with different tokens", tA, sealA, tB, sealB)
	}
	b.seal(tA, "P1", 0, 1)
	b.seal(tB, "P1", 0, 1)
	// A re-entry now takes rule 1 with the larger.
	tC, sealC := b.rule(b.acq(0, holdB2), b.acq(1, holdB2))
	if sealC || tC != max(tA, tB) {
		t.Fatalf("re-entry after both seals: token %d, seal %v; want %d by rule 1", tC, sealC, max(tA, tB))
	}
}
