package model

// Moves of the node set (docs/reconfiguration.md, the library's joint.go):
// set A to set B, then B to C. A client is on one set alone (ConfA, ConfB,
// ConfC) or in joint configuration (ConfJoint: A to B; ConfJointBC: B to
// C, a quorum of each set for every round). Clients with a Conf keep
// configuration records on their nodes as the library does
// (joint_records.go): a record round before an obtain or a resume whose
// last record is stale, and a recorder that records every MaxTTL/4; each
// round's decisions (what to write where, the conflict, the move floor)
// are internal/joint's Decide, the function the library calls.
//
// The runbook is the order in which these clients may start (runbook.go):
// the clients of A alone and of joint(A, B) from the start (step 1 of the
// first move rolled every service to joint; a client of A alone is one the
// rollout has not reached yet); a client of B alone or of joint(B, C)
// makes its first attempt only after step 2 of the first move (redlock
// doctor's rule, joint.StepOf, on the nodes' records says step 3 is safe,
// and every client of A alone that the operator knows of is done); a
// client of C alone only after step 2 of the second move. A client's token
// is raised to the move floor its records gave it (Mut.NoMoveFloor drops
// it).

import (
	"math/bits"
)

// Node configurations of a client (ClientSpec.Conf).
const (
	ConfA       = 'a' // set A alone
	ConfJoint   = 'j' // joint(A, B)
	ConfB       = 'b' // set B alone
	ConfJointBC = 'k' // joint(B, C)
	ConfC       = 'c' // set C alone
)

// NodeSets are the node sets of the moves (masks of node indexes): A to B,
// then B to C (SetC 0: one move).
type NodeSets struct {
	SetA, SetB, SetC uint64
}

// setsOf are the current and next sets of a configuration (next 0: on one
// set alone), and all the nodes for a client without one.
func (c *Config) setsOf(conf byte) (cur, next uint64) {
	switch conf {
	case ConfA:
		return c.SetA, 0
	case ConfJoint:
		return c.SetA, c.SetB
	case ConfB:
		return c.SetB, 0
	case ConfJointBC:
		return c.SetB, c.SetC
	case ConfC:
		return c.SetC, 0
	}
	return 1<<c.Nodes - 1, 0
}

// set is the set of nodes client ci talks to.
func (m *Model) set(ci int) uint64 {
	cur, next := m.Cfg.setsOf(m.Cfg.Clients[ci].Conf)
	return cur | next
}

// member reports whether client ci talks to node ni.
func (m *Model) member(ci, ni int) bool { return m.set(ci)&(1<<ni) != 0 }

// quorumOf is the quorum of client ci's kind in a set of n nodes.
func (m *Model) quorumOf(ci, n int) int {
	if m.permit(ci) && !m.Cfg.Mut.PermitMajority {
		return PermitQuorum(n, m.Cfg.Permits)
	}
	return n/2 + 1
}

// met is client ci's quorum rule: its kind's quorum of its nodes, or in
// joint configuration of each set (the library's quorum.Rule).
func (m *Model) met(ci int, yes uint64) bool {
	c := &m.Cfg
	in := func(set uint64) bool {
		return bits.OnesCount64(yes&set) >= m.quorumOf(ci, bits.OnesCount64(set))
	}
	if c.Clients[ci].Conf == 0 {
		return bits.OnesCount64(yes) >= m.quorum(ci)
	}
	cur, next := c.setsOf(c.Clients[ci].Conf)
	if next == 0 {
		return in(cur)
	}
	return (c.Mut.JointDropA || in(cur)) && (c.Mut.JointDropB || in(next))
}

// masks returns the yes and pending votes of the current round.
func (m *Model) masks(c *Client) (yes, pending uint64) {
	for i, v := range c.Votes {
		switch v {
		case Yes:
			yes |= 1 << i
		case Pending:
			pending |= 1 << i
		}
	}
	return
}

// moveFloor raises a client's token to the move floor its records gave it
// (joint.Decide: a client on one set, or a joint client on its current
// set), and reports whether it did (the second round must then confirm
// it): the library's engine.moveFloor.
func (m *Model) moveFloor(s *State, ci int) bool {
	cl := &s.Clients[ci]
	floor := cl.Rec.Floor * TokenSeed
	if m.Cfg.Clients[ci].Conf == 0 || m.Cfg.Mut.NoMoveFloor || cl.Token >= floor {
		return false
	}
	cl.Token = floor
	return true
}
