package model

// The joint configuration of a move from node set A to node set B
// (docs/reconfiguration.md, the library's joint.go): a client on A alone
// (ConfA), in joint configuration (ConfJoint: a quorum of A and a quorum of
// B for every round) or on B alone (ConfB). The runbook's three phases are
// the order in which these clients may run: ConfA and ConfJoint clients
// from the start (step 1 rolls every service to joint), ConfB clients only
// after step 2 (every ConfA client done, and MaxTTL since the last step of
// any), unless Mut.SkipStep2. The first ConfB client to start sets the move
// floor, which every ConfB token is raised to (Mut.NoMoveFloor drops it).

import (
	"math/bits"
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
// the runbook: every ConfA client is done, and MaxTTL has passed since the
// last step of any.
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
	return s.T >= s.ALast+c.MaxTTL
}

// startB sets the move floor when the first ConfB client starts (after
// step 2): the largest node time of B × TokenSeed, as a record written
// then on every node of B would give.
func (m *Model) startB(s *State, ci int) *Violation {
	c := &m.Cfg
	if c.Clients[ci].Conf != ConfB || c.Mut.SkipStep2 || s.Floor != 0 {
		return nil
	}
	var hi int64
	first := true
	for ni := range c.Nodes {
		if c.SetB&(1<<ni) != 0 {
			if now := s.T + s.Nodes[ni].Offset; first || now > hi {
				hi, first = now, false
			}
		}
	}
	s.Floor = hi * TokenSeed
	return nil
}

// moveFloor raises a ConfB client's token to the move floor, and reports
// whether it did (the second round must then confirm it).
func (m *Model) moveFloor(s *State, ci int) bool {
	cl := &s.Clients[ci]
	if m.Cfg.Clients[ci].Conf != ConfB || m.Cfg.Mut.NoMoveFloor || cl.Token >= s.Floor {
		return false
	}
	cl.Token = s.Floor
	return true
}
