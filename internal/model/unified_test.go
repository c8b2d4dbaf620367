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
	uW1        // a worker that only resumes S's forms (A alone, forgotten)
	uW2        // a second worker given the same forms: a form delivered twice
	uP         // a scheduler of a permit of a semaphore of two
	uWP        // a worker that resumes P's forms, each delivered to it twice
	uR         // a client on A alone reaching the nodes under other addresses (forgotten)
	uJ1        // joint(A, B), a reentrant owner, lingering until step 3
	uB         // B alone, a reader
	uJ2        // joint(B, C), a plain lock, lingering until move 2's step 3
	uC         // C alone, a permit
)

// unified is issue 45's one model, in which every feature meets every
// fault: five nodes, A = {0..4}, B = {0, 1, 2} (a shrink), C = {0, 1, 3}
// (node 2 replaced by node 3, which left in the first move); clients of
// every configuration, every kind of hold, handoffs whose forms reach two
// workers that only resume, a service that reaches A's nodes under other
// addresses; and every fault: a restart without data, a restart from an
// older snapshot, a failover to a lagging replica, a request run twice,
// an operator who starts a client before step 2 of its move is over, and
// throughout, delayed and reordered messages, paused clients and clock
// offsets.
func unified() Config {
	return Config{Nodes: 5, TTL: 8, MaxTTL: 8, NodeTimeout: 2, Delta: 1, FenceTTL: 32, Horizon: 64,
		Offsets: []int64{0, 1, -1, 0, 1}, Global: true, Permits: 2,
		NodeSets: NodeSets{SetA: 0b11111, SetB: 0b00111, SetC: 0b01011},
		Faults: Faults{Restarts: 1, SnapRestarts: 1, Promotions: 1, RestartTime: 2, FailoverTime: 3,
			ReplicaOffsets: []int64{-1, 0, 1}, AssumeBand: true, LossGap: 10, Dups: 1, EarlyStarts: 1},
		Clients: []ClientSpec{
			uS:  {Conf: ConfA, Kind: Exclusive, Acquires: 1, Refresh: 1, Handoff: true},
			uW1: {Conf: ConfA, Resume: 1 + uS, Refresh: 3, Release: true, Forgotten: true},
			uW2: {Conf: ConfA, Resume: 1 + uS, Refresh: 3, Release: true, Forgotten: true},
			uP:  {Conf: ConfA, Kind: Permit, Acquires: 1, Refresh: 1, Handoff: true},
			uWP: {Conf: ConfA, Resume: 1 + uP, Twice: true, Refresh: 1, Release: true, Forgotten: true},
			uR:  {Conf: ConfA, Kind: Plain, Acquires: 2, Refresh: 1, Release: true, Spelling: 1, Forgotten: true},
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
	reach := map[string]int{}
	m.Observe = func(s *State) { observe(s, reach) }
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
)

// unifiedMutants are issue 44's findings A to F restored, by name.
func unifiedMutants() map[string]Mutations {
	return map[string]Mutations{
		"fixed":            {},
		"ClaimUnguarded":   {HandoffMutations: HandoffMutations{ClaimUnguarded: true}},
		"ClaimRawCounter":  {HandoffMutations: HandoffMutations{ClaimRawCounter: true}},
		"JointNoFloor":     {JointMutations: JointMutations{JointNoFloor: true}},
		"JointNoConflict":  {JointMutations: JointMutations{JointNoConflict: true}},
		"BySpelling":       {JointMutations: JointMutations{BySpelling: true}},
		"ResumeUnrecorded": {HandoffMutations: HandoffMutations{ResumeUnrecorded: true}},
	}
}

// observe counts what a schedule of unified() reached.
func observe(s *State, reach map[string]int) {
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
	for i, f := range s.Faults {
		if f > 0 {
			reach[fmt.Sprintf("fault %d", i)]++
		}
	}
}
