package model

import "testing"

// jointSearches are the searches of a move from node set A to node set B
// (joint.go, docs/reconfiguration.md): clients on A alone, in joint
// configuration and on B alone, following the runbook's three phases
// (a client on B alone starts after step 2). The guard is off and clocks
// agree, which keeps the state space small: the guard and clock offsets
// are the restart guard's searches' concern, and the move changes neither.
func jointSearches() map[string]search {
	move := func(nodes int, a, b uint64, clients ...ClientSpec) func() Config {
		return func() Config {
			for i := range clients {
				clients[i].Mode = '0'
			}
			// FenceTTL: a move floor runs ahead of its node's time by up
			// to the evidence's life, 1.5 max TTL, which Lemma 1 needs
			// the counters to outlive (the library's is ten max TTLs).
			return Config{Nodes: nodes, Clients: clients, TTL: 3, MaxTTL: 4, FenceTTL: 8, NodeTimeout: 2, Delta: 1, Horizon: 30,
				Global: true, NodeSets: NodeSets{SetA: a, SetB: b}}
		}
	}
	all := func() []ClientSpec {
		return []ClientSpec{
			{Conf: ConfA, Acquires: 2, Release: true},
			{Conf: ConfJoint, Acquires: 2, Refresh: 1, Release: true},
			{Conf: ConfB, Acquires: 2, Release: true},
		}
	}
	return map[string]search{
		// Replace one node of three: {0,1,2} to {0,1,3}.
		"jointReplace": {name: "jointReplace", cfg: move(4, 0b0111, 0b1011, all()...), random: 20000, steps: 300},
		// Grow one node to three, and move one node to another host.
		"jointGrow": {name: "jointGrow", cfg: move(3, 0b001, 0b111, all()...), random: 10000, steps: 300},
		"jointMove": {name: "jointMove", cfg: move(2, 0b01, 0b10, all()...), random: 10000, steps: 300},
		// Shrink three nodes to one: a quorum of B ({0}) and a quorum of A
		// ({1,2}) share no node, so a token of B alone after one of A
		// alone rests on the move floor; two holders on A alone leave
		// node 0 an older counter. The joint client of step 1 locks once
		// and keeps recording until it is done.
		"jointShrink": {name: "jointShrink", cfg: move(3, 0b111, 0b001,
			ClientSpec{Conf: ConfA, Acquires: 2, Release: true},
			ClientSpec{Conf: ConfA, Acquires: 1, Release: true},
			ClientSpec{Conf: ConfJoint, Acquires: 1, Release: true},
			ClientSpec{Conf: ConfB, Acquires: 1}), random: 20000, steps: 300},
		// The same with counters that outlive the move (FenceTTL ten
		// max TTLs, as the library's): issue 33's finding 1 needs node
		// 0's counter from before the floor still there when the client
		// on B alone locks.
		"jointShrinkLong": {name: "jointShrinkLong", cfg: func() Config {
			cfg := move(3, 0b111, 0b001,
				ClientSpec{Conf: ConfJoint, Acquires: 1, Release: true},
				ClientSpec{Conf: ConfA, Acquires: 2, Release: true},
				ClientSpec{Conf: ConfB, Acquires: 1})()
			cfg.FenceTTL = 10 * cfg.MaxTTL
			return cfg
		}, random: 20000, steps: 300},
		// A joint client beside a client of each set alone, for the
		// mutants that drop one quorum of the joint rule.
		"jointWithA": {name: "jointWithA", cfg: move(4, 0b0111, 0b1011,
			ClientSpec{Conf: ConfA, Acquires: 2, Release: true},
			ClientSpec{Conf: ConfJoint, Acquires: 2, Release: true}), random: 10000, steps: 200},
		"jointWithB": {name: "jointWithB", cfg: move(4, 0b0111, 0b1011,
			ClientSpec{Conf: ConfJoint, Acquires: 2, Release: true},
			ClientSpec{Conf: ConfB, Acquires: 2, Release: true}), random: 10000, steps: 200},
	}
}

// jointMutants: skipping step 2 of the runbook, a joint rule without the
// quorum of A or of B, and a move without its floor.
func jointMutants() []mutant {
	return []mutant{
		{name: "SkipStep2", mut: Mutations{JointMutations: JointMutations{SkipStep2: true}}, search: "jointReplace"},
		{name: "SkipStep2/move", mut: Mutations{JointMutations: JointMutations{SkipStep2: true}}, search: "jointMove"},
		{name: "JointDropA", mut: Mutations{JointMutations: JointMutations{JointDropA: true}}, search: "jointWithA"},
		{name: "JointDropB", mut: Mutations{JointMutations: JointMutations{JointDropB: true}}, search: "jointWithB"},
		{name: "NoMoveFloor", mut: Mutations{JointMutations: JointMutations{NoMoveFloor: true}}, search: "jointShrinkLong", budget: 60000, seeds: []uint64{1}},
		// Issue 33's finding 1: the floor written once by the joint
		// client, before the grants of a client on A alone.
		{name: "FirstWriterFloor", mut: Mutations{JointMutations: JointMutations{FirstWriterFloor: true}}, search: "jointShrinkLong", budget: 60000, seeds: []uint64{3}},
	}
}

// TestJointMutants: every mutant of the move is found by its search, and
// the runbook as documented passes every search (make model runs them in
// full, from a fresh seed).
func TestJointMutants(t *testing.T) {
	checkMutants(t, jointSearches(), jointMutants())
}
