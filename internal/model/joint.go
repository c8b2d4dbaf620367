package model

// The joint configuration of a move from node set A to node set B
// (docs/reconfiguration.md, the library's joint.go): a client on A alone
// (ConfA), in joint configuration (ConfJoint: a quorum of A and a quorum of
// B for every round) or on B alone (ConfB). Clients with a Conf keep
// configuration records on their nodes as the library does (records.go):
// a record round before an obtain whose last record is stale, and a
// recorder that records every MaxTTL/4; each round's decisions (what to
// write where, the conflict, the move floor) are internal/joint's Decide,
// the function the library calls. The runbook's three phases are the
// order in which these clients may run: ConfA and ConfJoint clients from
// the start (step 1 rolls every service to joint), a ConfB client's first
// attempt only after step 2: every ConfA client done, and redlock
// doctor's rule (joint.StepOf) on the nodes' records says step 3 is safe,
// unless Mut.SkipStep2. A client's token is raised to the move floor its
// records gave it (Mut.NoMoveFloor drops it).

import (
	"math/bits"

	"github.com/redlock-go/redlock/internal/joint"
)

// Node configurations of a client (ClientSpec.Conf).
const (
	ConfA     = 'a'
	ConfJoint = 'j'
	ConfB     = 'b'
)

// set is the set of nodes client ci talks to.
func (m *Model) set(ci int) uint64 {
	c := &m.Cfg
	switch c.Clients[ci].Conf {
	case ConfA:
		return c.SetA
	case ConfB:
		return c.SetB
	case ConfJoint:
		return c.SetA | c.SetB
	}
	return 1<<c.Nodes - 1
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
	switch c.Clients[ci].Conf {
	case ConfA:
		return in(c.SetA)
	case ConfB:
		return in(c.SetB)
	case ConfJoint:
		return (c.Mut.JointDropA || in(c.SetA)) && (c.Mut.JointDropB || in(c.SetB))
	}
	return bits.OnesCount64(yes) >= m.quorum(ci)
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

// mayStart: a ConfB client starts its first attempt only after step 2 of
// the runbook: every ConfA client is done (closed), and redlock doctor's
// rule, read from every node's records now, says step 3 is safe (or that
// the move is done).
func (m *Model) mayStart(s *State, ci int) bool {
	c := &m.Cfg
	cl := &s.Clients[ci]
	if c.Clients[ci].Conf != ConfB || c.Mut.SkipStep2 || cl.AcqLeft < c.Clients[ci].Acquires {
		return true
	}
	for i, cs := range c.Clients {
		if cs.Conf == ConfA && s.Clients[i].Phase != Done {
			return false
		}
	}
	recs := make([]*joint.Records, c.Nodes)
	for ni := range c.Nodes {
		recs[ni] = m.nodeRecords(s, ni)
	}
	st := joint.StepOf(recs, c.SetA, c.SetB, joint.SetName{FP: fpA}, joint.SetName{FP: fpB}, m.jointMut()).Step
	return st == joint.StepThree || st == joint.StepDone
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
