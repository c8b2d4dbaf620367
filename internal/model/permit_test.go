package model

import (
	"testing"
)

// semBase: three nodes, a semaphore of two permits (quorum 3 of 3), three
// clients with one permit each: a majority would admit all three.
func semBase() Config {
	return Config{Nodes: 3, Permits: 2,
		Clients: []ClientSpec{{Kind: Permit, Acquires: 1}, {Kind: Permit, Acquires: 1}, {Kind: Permit, Acquires: 1}},
		TTL:     3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 14, Offsets: []int64{0, 1, -1}, Global: true}
}

// semRefresh: three nodes, one permit (quorum 2), a holder that refreshes
// while another client tries again: expiries meet acquires and re-seeds.
// (PermitReseedIgnoresCapacity needs a narrower order than a random
// search finds quickly: TestPermitReseedSchedule replays it.)
func semRefresh() Config {
	return Config{Nodes: 3, Permits: 1,
		Clients: []ClientSpec{{Kind: Permit, Acquires: 1, Refresh: 2}, {Kind: Permit, Acquires: 2, Release: true}},
		TTL:     3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 18, Global: true}
}

// semFaults: five nodes, two permits (quorum 4), refreshes and releases,
// a restart without data and one with, a lagging failover.
func semFaults() Config {
	return Config{Nodes: 5, Permits: 2,
		Clients: []ClientSpec{{Kind: Permit, Acquires: 2, Refresh: 1, Release: true}, {Kind: Permit, Acquires: 2, Release: true}, {Kind: Permit, Acquires: 2}},
		TTL:     3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 30, Offsets: []int64{0, 1, -1, 0, 1},
		Faults: Faults{Restarts: 1, DataRestarts: 1, Promotions: 1, RestartTime: 2, FailoverTime: 3, ReplicaOffsets: []int64{-1, 0, 1},
			AssumeBand: true, LossGap: 10}, Global: true}
}

// The semaphore's mutants are each found; the semaphore as implemented
// passes every search: never more than k valid permits, and a permit whose
// acquire began after another's grant has a higher token.
func TestPermitMutants(t *testing.T) {
	checkMutants(t, permitSearches(), permitMutants())
}

// permitSearches is TestPermitMutants' searches, by name.
func permitSearches() map[string]search {
	return map[string]search{
		"semBase":    {name: "semBase", cfg: semBase, random: 20000, steps: 200},
		"semRefresh": {name: "semRefresh", cfg: semRefresh, random: 20000, steps: 300},
		"semFaults":  {name: "semFaults", cfg: semFaults, random: 5000, steps: 500},
	}
}

// permitMutants is TestPermitMutants' mutants.
func permitMutants() []mutant {
	return []mutant{
		{name: "PermitMajority", mut: Mutations{PermitMutations: PermitMutations{PermitMajority: true}}, search: "semBase", seeds: []uint64{1270283819319042918}},
		{name: "PermitCapacityOffByOne", mut: Mutations{PermitMutations: PermitMutations{PermitCapacityOffByOne: true}}, search: "semBase", seeds: []uint64{4247307932018606231}},
		{name: "PermitPruneEarly", mut: Mutations{PermitMutations: PermitMutations{PermitPruneEarly: true}}, search: "semRefresh", seeds: []uint64{981170563297185361}},
		{name: "NoSecondRound", mut: Mutations{GuardMutations: GuardMutations{NoSecondRound: true}}, search: "semRefresh", seeds: []uint64{4017401499879095359}},
	}
}

// reseedConfig is the configuration of the re-seed schedule: one permit
// on three nodes (quorum 2), a holder that refreshes once, a second client.
func reseedConfig() Config {
	return Config{Nodes: 3, Permits: 1, Clients: []ClientSpec{{Kind: Permit, Acquires: 1, Refresh: 1}, {Kind: Permit, Acquires: 1}},
		TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 16, Offsets: []int64{0, 0, 0}, Global: true}
}

// reseedSchedule: A takes the permit on n1 and n2; B's acquire takes n3,
// where A's acquire comes second and is refused. A's refresh is confirmed
// by n1 and by a re-seed on n3, over B's permit. When A's permit from the
// acquire expires on n2, B's still open round takes n2 too: B is granted
// while A's refreshed permit is valid. A re-seed that counts the node's
// permits refuses on n3, and A's refresh fails instead.
func reseedSchedule() []Step {
	A, B := 0, 1
	cl := func(c int) Step { return Step{Kind: StepClient, Client: c} }
	pd := func(c, n int) []Step {
		return []Step{{Kind: StepProcess, Client: c, Node: n}, {Kind: StepDeliver, Client: c, Node: n}}
	}
	tick := Step{Kind: StepTick}
	var s []Step
	add := func(steps ...Step) { s = append(s, steps...) }
	add(cl(A))
	add(pd(A, 0)...)
	add(pd(A, 1)...)
	add(cl(A), tick) // A granted at t=10, valid until 13
	add(cl(B))       // t=11: B's round, valid until 14
	add(pd(B, 2)...)
	add(pd(A, 2)...) // A's acquire on n3: full
	add(tick, cl(A)) // t=12: A refreshes
	add(pd(A, 0)...)
	add(pd(A, 2)...) // the re-seed on n3
	add(cl(A), tick) // A valid until 15; t=13
	add(pd(B, 1)...) // A's permit from the acquire has expired on n2
	add(cl(B), cl(B))
	add(pd(B, 2)...)
	add(pd(B, 1)...)
	add(cl(B))
	return s
}

// TestPermitReseedSchedule replays the re-seed schedule: two permits of one
// valid at once when the re-seed ignores the node's capacity, nothing when
// it counts. A's refresh is a Client's before issue 44, which re-seeds
// whatever the counter (ReseedIgnoresToken): this version's finds A's
// token below n3's counter, seeded from its clock after A's, and does not
// re-seed; but the counter of a node can be behind a token drawn on other
// nodes, and then only the count of the node's permits keeps it to k.
func TestPermitReseedSchedule(t *testing.T) {
	cfg := reseedConfig()
	cfg.Mut.PermitReseedIgnoresCapacity = true
	cfg.Mut.ReseedIgnoresToken = true
	m := New(cfg)
	steps, v := m.Replay(reseedSchedule())
	if v == nil || v.Prop != "exclusion" {
		t.Fatalf("re-seed over capacity: %v, want two permits of one valid", v)
	}
	t.Logf("%s", m.Explain(steps, v))
	cfg.Mut.PermitReseedIgnoresCapacity = false
	if _, v := New(cfg).Replay(reseedSchedule()); v != nil {
		t.Fatalf("the re-seed that counts, of a Client before issue 44: %v", v)
	}
	if _, v := New(reseedConfig()).Replay(reseedSchedule()); v != nil {
		t.Fatalf("the re-seed as implemented: %v", v)
	}
}
