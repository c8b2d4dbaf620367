package model

import (
	"flag"
	"testing"
	"time"
)

var long = flag.Bool("long", false, "run the long explorations")

// base is the CI configuration of finding 1: three nodes, two clients with
// one acquire each, TTL 3 ticks, node timeout 2, delta 1.
func base() Config {
	return Config{Nodes: 3, Clients: []ClientSpec{{Acquires: 1}, {Acquires: 1}}, TTL: 3, MaxTTL: 4,
		NodeTimeout: 2, Delta: 1, Horizon: 16, Offsets: []int64{0, 1, -1}, Global: true}
}

// faults: more clients and operations, restarts, a lagging failover,
// offsets within bounds; (a) and (b) asserted.
func faults() Config {
	return Config{Nodes: 3, Clients: []ClientSpec{{Acquires: 2, Refresh: 1, Release: true}, {Acquires: 2, Release: true}, {Acquires: 1}},
		TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 30, Offsets: []int64{0, 1, -1},
		Restarts: 1, DataRestarts: 1, Promotions: 1, RestartTime: 2, FailoverTime: 3, ReplicaOffsets: []int64{-1, 0, 1},
		AssumeBand: true, LossGap: 10, Global: true}
}

// finding1 is the schedule of review finding 1, as found by the search.
func finding1() []Step {
	A, B := 0, 1
	cl := func(c int) Step { return Step{Kind: StepClient, Client: c} }
	pr := func(c, n int) Step { return Step{Kind: StepProcess, Client: c, Node: n} }
	dl := func(c, n int) Step { return Step{Kind: StepDeliver, Client: c, Node: n} }
	tick := Step{Kind: StepTick}
	return []Step{cl(A), pr(A, 0), dl(A, 0), pr(A, 1), dl(A, 1), cl(A), cl(A), tick, tick, cl(B), pr(B, 2), dl(B, 2),
		pr(A, 2), pr(A, 2), pr(A, 1), dl(A, 2), dl(A, 2), dl(A, 1), cl(A), tick, tick, pr(B, 0), dl(B, 0), cl(B), cl(B),
		pr(B, 0), dl(B, 0), pr(B, 2), dl(B, 2), cl(B)}
}

// TestFinding1Schedule replays finding 1's message order: a token
// inversion with the old second-round rule, nothing with the fix.
func TestFinding1Schedule(t *testing.T) {
	cfg := base()
	cfg.Mut.FenceCountsAnyNode = true
	m := New(cfg)
	steps, v := m.Replay(finding1())
	if v == nil || v.Prop != "token" {
		t.Fatalf("old rule: %v, want a token inversion", v)
	}
	t.Logf("%s", m.Explain(steps, v))
	if _, v := New(base()).Replay(finding1()); v != nil {
		t.Fatalf("fixed rule: %v", v)
	}
}

type search struct {
	name      string
	cfg       func() Config
	random    int // schedules (0: exhaustive)
	steps     int
	maxStates int
	// prefix, when set, begins every schedule: a targeted search of the
	// continuations of a known start (RandomFrom), for counterexamples
	// that searches from the initial state do not reach in budget.
	prefix []Step
}

func (s search) run(t *testing.T, mut Mutations) (*Counterexample, Stats) {
	cfg := s.cfg()
	cfg.Mut = mut
	m := New(cfg)
	budget := 60 * time.Second
	n, states := s.random, s.maxStates
	if *long {
		n, states, budget = n*20, states*20, 20*time.Minute
	}
	if s.random > 0 {
		return m.RandomFrom(s.prefix, 1, n, s.steps, time.Now().Add(budget))
	}
	return m.Exhaustive(states, time.Now().Add(budget))
}

// Each mutant is found by its search; the protocol as implemented passes
// every search.
func TestMutants(t *testing.T) {
	// Finding 2's premise: a promoted replica whose clock is far behind
	// (15 ticks, below max TTL 20) the old master's; the failover (2
	// ticks) is slower than delta but not than delta plus that offset, so
	// only (e) is asserted. The horizon ends before the replica's clock
	// reaches the copied check: from then on, a first request within
	// delta of it is trusted by the fixed script too (the documented
	// assumption, failover > delta + offset, excludes that; the search
	// with horizon 25 finds it).
	behind := func() Config {
		return Config{Nodes: 3, Clients: []ClientSpec{{Acquires: 2, Release: true}, {Acquires: 2, Release: true}}, TTL: 3, MaxTTL: 20,
			NodeTimeout: 2, Delta: 1, Horizon: 23, Promotions: 1, FailoverTime: 2, ReplicaOffsets: []int64{-15}}
	}
	// Finding 3: clients trusting persistence, a failover within the
	// documented bounds.
	promote := func() Config {
		c := faults()
		c.Restarts, c.DataRestarts = 0, 0
		for i := range c.Clients {
			c.Clients[i].Mode = 'p'
		}
		return c
	}
	// Finding 4: clients with different max TTLs and guard modes, a
	// restart that kept the data; only (e) is asserted.
	mixed := func() Config {
		return Config{Nodes: 3, Clients: []ClientSpec{{Acquires: 2, MaxTTL: 8}, {Acquires: 2, Mode: 'p'}},
			TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 25, DataRestarts: 1, Restarts: 1, RestartTime: 2, LossGap: 12}
	}
	restarts := func() Config {
		c := faults()
		c.Promotions = 0
		return c
	}
	// The lock family (family.go, docs/lock-family.md). famRW: a reader,
	// an exclusive writer and a reentrant owner that refreshes.
	famRW := func() Config {
		return Config{Nodes: 3, Clients: []ClientSpec{
			{Kind: Shared, Acquires: 2, Release: true},
			{Kind: Exclusive, Acquires: 2, Release: true},
			{Kind: Reentrant, Owner: 1, Acquires: 2, Refresh: 1},
		}, TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 30, Offsets: []int64{0, 1, -1}, Global: true}
	}
	// famTokens: two clients of one owner (one refreshes) and an exclusive
	// writer, the stale-seal counterexample's configuration.
	famTokens := func() Config { c, _ := staleSeal(); return c }
	// famFinding1: finding 1's configuration with exclusive holds.
	famFinding1 := func() Config {
		c := base()
		for i := range c.Clients {
			c.Clients[i].Kind = Exclusive
		}
		return c
	}
	_, staleSteps := staleSeal()
	searches := map[string]search{
		"base":      {name: "base", cfg: base, random: 40000, steps: 200},
		"faults":    {name: "faults", cfg: faults, random: 20000, steps: 400},
		"restarts":  {name: "restarts", cfg: restarts, random: 20000, steps: 400},
		"behind":    {name: "behind", cfg: behind, random: 5000, steps: 300},
		"promote":   {name: "promote", cfg: promote, random: 5000, steps: 400},
		"mixed":     {name: "mixed", cfg: mixed, random: 5000, steps: 300},
		"famRW":     {name: "famRW", cfg: famRW, random: 10000, steps: 400},
		"famTokens": {name: "famTokens", cfg: famTokens, random: 10000, steps: 400},
		// Targeted: every schedule begins as the stale-seal
		// counterexample does, up to B's seal being sent (19 steps, all
		// at t=10: A granted, B won with a seal to send); what follows is
		// random. From the initial state, 200000 random schedules did not
		// find SealRecordsUnrecorded, and exhaustive searches of this
		// configuration stopped unfinished at about a million states.
		"famStale": {name: "famStale", cfg: famTokens, random: 20000, steps: 400, prefix: staleSteps[:19]},
		// Targeted: finding 1's start, up to B's acquire being sent at
		// t=12 while A's seal is in flight (10 steps); from an earlier
		// point, 200000 random schedules did not find SealCountsAnyNode.
		"famFinding1": {name: "famFinding1", cfg: famFinding1, random: 30000, steps: 200, prefix: finding1()[:10]},
	}
	checkMutants(t, searches, []mutant{
		{"NoSecondRound", Mutations{NoSecondRound: true}, "base"},
		{"NoClockSeed", Mutations{NoClockSeed: true}, "restarts"},
		{"NoRecoveryWindow", Mutations{NoRecoveryWindow: true}, "restarts"},
		{"TrustWithoutLowerBound", Mutations{TrustWithoutLowerBound: true}, "behind"},
		{"PersistenceWaivesPromotion", Mutations{PersistenceWaivesPromotion: true}, "promote"},
		{"PerRequestMaxTTL", Mutations{PerRequestMaxTTL: true}, "mixed"},
		{"OkKeyReplicated", Mutations{OkKeyReplicated: true}, "behind"},
		{"ReaderJoinsWriter", Mutations{ReaderJoinsWriter: true}, "famRW"},
		{"Rule1AnyExisted", Mutations{Rule1AnyExisted: true}, "famRW"},
		{"SealOverwrites", Mutations{SealOverwrites: true}, "famTokens"},
		{"SealRecordsUnrecorded", Mutations{SealRecordsUnrecorded: true}, "famStale"},
		{"Rule2ExistedCounter", Mutations{Rule2ExistedCounter: true}, "famStale"},
		{"ReseedRecordsToken", Mutations{ReseedRecordsToken: true}, "famStale"},
		{"SealCountsAnyNode", Mutations{SealCountsAnyNode: true}, "famFinding1"},
	})
}

// mutant is a deliberate bug of the protocol and the search that must
// find it.
type mutant struct {
	name   string
	mut    Mutations
	search string
}

// checkMutants runs each mutant's search, which must find a counterexample,
// and every search on the protocol as implemented, which must find none.
func checkMutants(t *testing.T, searches map[string]search, mutants []mutant) {
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			ce, st := searches[m.search].run(t, m.mut)
			if ce == nil {
				t.Fatalf("search %s found nothing (%+v)", m.search, st)
			}
			t.Logf("search %s: %+v\n%s", m.search, st, ce)
		})
	}
	for name, s := range searches {
		t.Run("fixed/"+name, func(t *testing.T) {
			t.Parallel()
			ce, st := s.run(t, Mutations{})
			if ce != nil {
				t.Fatalf("the protocol breaks:\n%s", ce)
			}
			t.Logf("search %s: %+v", name, st)
		})
	}
}

// TestExhaustiveFinding1 searches every schedule of the base configuration
// up to t=14 (four ticks): with the old second-round rule it finds the token
// inversion of finding 1; with the fix, nothing. It visits about nine
// million states (90 s without -race), so it runs only with -long.
func TestExhaustiveFinding1(t *testing.T) {
	if !*long {
		t.Skip("with -long only: about 90 s and 9M states per run")
	}
	for _, mut := range []bool{true, false} {
		cfg := base()
		cfg.Horizon = 14
		cfg.Mut.FenceCountsAnyNode = mut
		ce, st := New(cfg).Exhaustive(40_000_000, time.Now().Add(30*time.Minute))
		t.Logf("FenceCountsAnyNode=%v: %+v", mut, st)
		switch {
		case st.Truncated:
			t.Fatalf("search truncated: %+v", st)
		case mut && ce == nil:
			t.Fatal("old rule: no counterexample")
		case !mut && ce != nil:
			t.Fatalf("fixed rule breaks:\n%s", ce)
		case ce != nil:
			t.Logf("%s", ce)
		}
	}
}
