package model

import (
	"flag"
	"fmt"
	"testing"
	"time"
)

// The clients of unified(), by index.
const (
	uS  = iota // the scheduler: A alone, a writer's hold, hands it off
	uW1        // a worker that only resumes S's forms, reaching A's nodes under other addresses; its lock expires
	uW2        // a second worker given the same forms, from t=20 (a form delivered again, late)
	uP         // a scheduler of a permit of a semaphore of two
	uWP        // a worker that resumes P's forms, each delivered to it twice, under other addresses
	uR         // a rival on A alone, a plain lock
	uJ1        // joint(A, B), a reentrant owner, lingering until step 3
	uB         // B alone, a reader
	uJ2        // joint(B, C), a plain lock, lingering until move 2's step 3
	uC         // C alone, a permit
)

// unified is issue 45's one model, in which every feature meets every
// fault: five nodes, A = {2, 3, 4}, B = {0, 1, 2} (two of three nodes
// replaced), C = {0, 1, 3} (node 2 replaced by node 3, which left in the
// first move, with its data); clients of
// every configuration and every kind of hold; handoffs whose forms reach
// workers that only resume, one form delivered twice to two workers and
// one twice to one worker; two workers that reach A's nodes under other
// addresses; and every fault: a restart without data, one with it, one
// from an older snapshot, a failover to a lagging replica, a request run
// twice, an operator who starts a client before step 2 of its move is
// over, an address re-pointed after the first contact (identity.go), and
// throughout, delayed and reordered messages, partitions,
// paused clients and clock offsets. The workers are the services the
// operator forgot (runbook.go): the doctor alone tells when they are gone.
func unified() Config {
	return Config{Nodes: 5, TTL: 8, MaxTTL: 8, NodeTimeout: 2, Delta: 1, FenceTTL: 80, Horizon: 64,
		Offsets: []int64{0, 1, -1, 0, 1}, Global: true, Permits: 2,
		NodeSets: NodeSets{SetA: 0b11100, SetB: 0b00111, SetC: 0b01011},
		Faults: Faults{Restarts: 1, DataRestarts: 1, SnapRestarts: 1, Promotions: 1, RestartTime: 2, FailoverTime: 3,
			ReplicaOffsets: []int64{-1, 0, 1}, AssumeBand: true, LossGap: 10, Dups: 1, EarlyStarts: 1, Repoints: 1},
		Clients: []ClientSpec{
			uS:  {Conf: ConfA, Kind: Exclusive, Acquires: 1, Refresh: 1, Handoff: true},
			uW1: {Conf: ConfA, Resume: 1 + uS, Refresh: 8, KeepAlive: true, Forgotten: true, Spelling: 1},
			uW2: {Conf: ConfA, Resume: 1 + uS, Refresh: 8, KeepAlive: true, Release: true, Forgotten: true, After: 20},
			uP:  {Conf: ConfA, Kind: Permit, Acquires: 1, Refresh: 1, Handoff: true},
			uWP: {Conf: ConfA, Resume: 1 + uP, Twice: true, Refresh: 1, KeepAlive: true, Release: true, Forgotten: true, Spelling: 1},
			uR:  {Conf: ConfA, Kind: Plain, Acquires: 2, Refresh: 1, Release: true},
			uJ1: {Conf: ConfJoint, Kind: Reentrant, Owner: 1, Acquires: 1, Release: true, Linger: true},
			uB:  {Conf: ConfB, Kind: Shared, Acquires: 1, Release: true},
			uJ2: {Conf: ConfJointBC, Kind: Plain, Acquires: 1, Release: true, Linger: true},
			uC:  {Conf: ConfC, Kind: Permit, Acquires: 1},
		},
	}
}

// TestUnifiedProbe plays the unified model's searches for a while and
// reports (a development aid, with -probe).
func TestUnifiedProbe(t *testing.T) {
	if *probe == "" {
		t.Skip("with -probe only")
	}
	cfg := unified()
	cfg.Mut = unifiedMutants()[*probe]
	m := New(cfg)
	m.NoShrink = *probeNoShrink
	m.Swarm = true
	if *probeGateR {
		m.Check = func(s *State) *Violation {
			if m.gateOpen(s, 1) {
				for _, g := range s.Grants {
					if g.Client == uR && g.End > s.T && g.At <= s.T {
						return &Violation{"probe", fmt.Sprintf("step 2 over while R's grant of t=%d is valid until %d", g.At, g.End)}
					}
				}
			}
			return nil
		}
	}
	reach := map[string]int{}
	if *probeWhy {
		m.Check = func(s *State) *Violation {
			valid := false
			for _, g := range s.Grants {
				if g.Origin > 0 && g.At <= s.T && s.T < g.End {
					valid = true
				}
			}
			for i, cs := range m.Cfg.Clients {
				if cs.Conf == ConfA && !cs.Forgotten && s.Clients[i].Phase != Done {
					valid = false
				}
			}
			if valid {
				r := m.doctor(s, m.Cfg.SetA, m.Cfg.SetB)
				reach[fmt.Sprintf("why step %d other %s", r.Step, r.Other)]++
			}
			return nil
		}
	}
	m.Observe = func(s *State) { observe(m, s, reach) }
	ce, st := m.Random(*probeSeed, *probeN, 8000, time.Now().Add(10*time.Minute))
	t.Logf("%+v", st)
	t.Logf("reached: %v", reach)
	if ce != nil {
		t.Logf("%s", ce)
	}
}

var (
	probe         = flag.String("probe", "", "TestUnifiedProbe: the mutant to play (fixed: none)")
	probeSeed     = flag.Uint64("probeseed", 1, "TestUnifiedProbe: the seed")
	probeN        = flag.Int("proben", 1000, "TestUnifiedProbe: schedules")
	probeNoShrink = flag.Bool("probenoshrink", false, "TestUnifiedProbe: report without shrinking")
	probeGateR    = flag.Bool("probegater", false, "TestUnifiedProbe: report step 2 over while R holds")
	probeWhy      = flag.Bool("probewhy", false, "TestUnifiedProbe: count the doctor's readings while a resumed lock is valid")
)

// unifiedMutants are issue 44's findings A to F restored, and the vote
// counted by address (VoteByAddress), by name.
func unifiedMutants() map[string]Mutations {
	return map[string]Mutations{
		"fixed":            {},
		"ClaimUnguarded":   {HandoffMutations: HandoffMutations{ClaimUnguarded: true}},
		"ClaimRawCounter":  {HandoffMutations: HandoffMutations{ClaimRawCounter: true}},
		"JointNoFloor":     {JointMutations: JointMutations{JointNoFloor: true}},
		"JointNoConflict":  {JointMutations: JointMutations{JointNoConflict: true}},
		"BySpelling":       {JointMutations: JointMutations{BySpelling: true}},
		"ResumeUnrecorded": {HandoffMutations: HandoffMutations{ResumeUnrecorded: true}},
		"VoteByAddress":    {JointMutations: JointMutations{VoteByAddress: true}},
	}
}

// observe counts what a schedule of unified() reached.
func observe(m *Model, s *State, reach map[string]int) {
	reach["schedules"]++
	reach["t>=30"] += int(b2i(s.T >= 30))
	reach["t=horizon"] += int(b2i(s.T >= 64))
	for i, cl := range s.Clients {
		if cl.Started {
			reach[fmt.Sprintf("started c%d", i)]++
		}
		if cl.Early {
			reach[fmt.Sprintf("early c%d", i)]++
		}
	}
	granted := map[int]bool{}
	for _, g := range s.Grants {
		if !granted[g.Client] {
			reach[fmt.Sprintf("granted c%d", g.Client)]++
		}
		granted[g.Client] = true
		if g.Origin > 0 {
			reach["resumed"]++
		}
	}
	reach["handed off"] += len(s.Forms)
	if o := s.Opened[1]; o != 0 {
		reach["gate 1 open"]++
		for _, g := range s.Grants {
			if g.Origin > 0 && g.End > o {
				reach["gate 1 open, a resumed lock valid"]++
				break
			}
		}
		for _, g := range s.Grants {
			if g.Client == uR && g.End > o {
				reach["gate 1 open, R's lock valid"]++
				break
			}
		}
	}
	if s.Opened[2] != 0 {
		reach["gate 2 open"]++
	}
	if !s.Clients[uJ2].Early {
		for _, g := range s.Grants {
			if g.Client != uJ2 {
				continue
			}
			reach["J2 granted"]++
			var top int64
			bFirst := false
			for _, e := range s.Grants {
				if e.At < g.At && m.Cfg.Clients[e.Client].Conf == ConfA && e.Token > top {
					top = e.Token
				}
				if e.At < g.At && e.Client == uB {
					bFirst = true
				}
			}
			reach[fmt.Sprintf("J2-top=%d,Bfirst=%v", (g.Token-top)/1024, bFirst)]++
		}
	}
	var end int64
	for _, g := range s.Grants {
		if g.Origin > 0 {
			end = max(end, g.End)
		}
	}
	if end > 0 && s.Opened[1] != 0 {
		reach[fmt.Sprintf("gap %d", (s.Opened[1]-end)/4*4)]++
	}
	if end > 0 {
		reach[fmt.Sprintf("resumed end %d", end/4*4)]++
	}
	if s.Opened[1] != 0 {
		reach[fmt.Sprintf("opened %d", s.Opened[1]/4*4)]++
	}
	for i, f := range s.Faults {
		if f > 0 {
			reach[fmt.Sprintf("fault %d", i)]++
		}
	}
}

// unifiedSearches is the unified model's search: random schedules from
// the initial state, each injecting its own subset of the faults.
func unifiedSearches() map[string]search {
	return map[string]search{
		"unified": {name: "unified", cfg: unified, random: 15000, steps: 8000, swarm: true, deadline: 30 * time.Minute},
	}
}

// unifiedMutantTable is issue 44's findings A to F restored, each with the
// unified search (TestUnifiedMutants).
func unifiedMutantTable() []mutant {
	var out []mutant
	for _, name := range []string{"ClaimUnguarded", "ClaimRawCounter", "JointNoFloor", "JointNoConflict", "BySpelling", "ResumeUnrecorded", "VoteByAddress"} {
		out = append(out, mutant{name: name, mut: unifiedMutants()[name], search: "unified"})
	}
	return out
}

// unifiedSeeds are the seeds from which TestUnifiedMutants plays the
// protocol as implemented (fixedSeeds), and each mutant's replay seeds:
// seeds from which the unified search finds it within three schedules
// (replaySeed of a measured search: within four schedules; docs/safety.md's table).
var unifiedSeeds = map[string][]uint64{
	"ClaimUnguarded":   {17179869248},
	"JointNoFloor":     {64424510296},
	"JointNoConflict":  {8589934604},
	"BySpelling":       {12884901892},
	"ResumeUnrecorded": {55834574848},
	"VoteByAddress":    {4294967332},
}

// unifiedUnfound are the mutants that the unified search does not find
// within its budget from the fixed seeds (docs/safety.md, "The unified
// model"), each with the reason: TestUnifiedMutants reports them as
// skipped, not passed.
var unifiedUnfound = map[string]string{
	"ClaimRawCounter": "found from 0 of 20 fixed seeds with 10,000 schedules each, and by our reading harmless " +
		"beside finding A's fix: its floor differs from the raw counter only on a node whose epoch began after the " +
		"form's token, where the guard lets a claim pass only once every key restored by the fault has expired, and " +
		"the only key written there after the fault, the handing-off Client's re-seed, comes before the handoff, so " +
		"no second claim gathers a quorum (instrumented once, 20,000 schedules met 3 claims where the two disagree, " +
		"none followed by a violation; docs/safety.md, \"The unified model\"). Finding B's real-node tests and " +
		"TestClaimModelTellsBrokenTwins cover it",
}

// TestUnifiedMutants: issue 44's findings A to F, each restored as a
// mutant, are found by the unified search, from the initial state of the
// one configuration in which every feature meets every fault; the
// protocol as implemented passes the same search. Every seed is fixed, so
// that a run cannot flake: each mutant replays the seeds from which the
// search found it (the measurement of its detection rate, TestSearchPower
// with -powerfixed, is in docs/safety.md), and the protocol plays the
// search's budget from the first fixed seed (without -race; under it, a
// hundredth).
func TestUnifiedMutants(t *testing.T) {
	s := unifiedSearches()["unified"]
	for _, mt := range unifiedMutantTable() {
		seeds := unifiedSeeds[mt.name]
		if why, ok := unifiedUnfound[mt.name]; ok {
			t.Run(mt.name, func(t *testing.T) { t.Skip(why) })
			continue
		}
		if len(seeds) == 0 {
			t.Errorf("mutant %s: no replay seed", mt.name)
		}
		for _, sd := range seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", mt.name, sd), func(t *testing.T) {
				t.Parallel()
				ce, st := s.run(mt.mut, sd, 4)
				if ce == nil {
					t.Fatalf("the unified search from seed %d found nothing in 4 schedules (%+v)", sd, st)
				}
				t.Logf("%+v\n%s", st, ce)
			})
		}
	}
	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		n := s.random
		if raceDetector {
			n /= 100
		}
		seed := fixedSeeds(1)[0]
		ce, st := s.run(Mutations{}, seed, n)
		if ce != nil {
			t.Fatalf("the protocol breaks (the unified search from seed %d):\n%s", seed, ce)
		}
		if st.Schedules < n {
			t.Fatalf("the unified search stopped short of its budget: %+v", st)
		}
		t.Logf("%+v", st)
	})
}
