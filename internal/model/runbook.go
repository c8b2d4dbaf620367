package model

// The operator's runbook of the moves (docs/reconfiguration.md, "The
// operator's runbook"), as the order in which clients may start, and its
// one mistake the explorer may make (StepEarly).
//
// Move 1 (A to B) begins with step 1 done: the clients of joint(A, B) run
// from the start, beside the clients of A alone that the rollout has not
// reached yet. Step 2 ends, and a client of B alone or of joint(B, C) may
// make its first attempt, when redlock doctor's rule (joint.StepOf, read
// on every node's records at that moment, with the fingerprints the
// doctor computes from the nodes' identities then) says step 3 is safe,
// and every client of A alone that the operator knows of is done. A client
// of A alone that the operator forgot (ClientSpec.Forgotten: a worker that
// only resumes, a service that reaches the nodes under other addresses)
// is known to the runbook only through the doctor: the operator waits
// only until it runs (it made its first attempt, before which it
// records), or is done. A client that has never contacted the nodes is
// invisible to any record, which docs/reconfiguration.md says ("It is
// evidence, not a lock"). Move 2 (B to C) is the same: its clients of
// joint(B, C) start after move 1's step 2, and a client of C alone after
// the doctor of move 2 says step 3 and every client of A alone, joint(A,
// B) and B alone that the operator knows of is done.
//
// A joint client with ClientSpec.Linger stays open (recording) after its
// attempts, as a service in joint configuration does, until step 3 of its
// move has begun (a client gated by it started); the doctor's step 3
// needs a joint client's fresh move floor.
//
// StepEarly is the operator who cuts step 2 short: it starts a gated
// client before its gate opens (Faults.EarlyStarts). The configuration
// records then promise only what docs/reconfiguration.md promises: the
// early client refuses while its records show a live client it must not
// lock beside, linked to its sets by a move (joint.Decide's conflict). So
// a grant of an early client is checked for exclusion only against the
// clients whose evidence its last record before the attempt showed
// (Life.Saw), and for token order not at all.

import (
	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
)

// gate is the step of the runbook a configuration waits for: 0 none, 1
// step 2 of move 1, 2 step 2 of move 2.
func gate(conf byte) int {
	switch conf {
	case ConfB, ConfJointBC:
		return 1
	case ConfC:
		return 2
	}
	return 0
}

// mayStart reports whether client ci may make an attempt: a client that
// has started already, or whose gate is open.
func (m *Model) mayStart(s *State, ci int) bool {
	c := &m.Cfg
	cl := &s.Clients[ci]
	if cl.Started || cl.Early {
		return true
	}
	if s.T < c.Clients[ci].After {
		return false
	}
	g := gate(c.Clients[ci].Conf)
	return g == 0 || c.Mut.SkipStep2 || m.gateOpen(s, g)
}

// gateOpen reports whether step 2 of move g (1: A to B, 2: B to C) is
// over: the clients before it that the operator knows of are done, those
// it forgot run or are done, and the doctor says step 3 (or done).
func (m *Model) gateOpen(s *State, g int) bool {
	if s.Gates[g] == 0 {
		s.Gates[g] = 2
		if m.gateOpenNow(s, g) {
			s.Gates[g] = 1
			if s.Opened[g] == 0 {
				s.Opened[g] = s.T
			}
		}
	}
	return s.Gates[g] == 1
}

func (m *Model) gateOpenNow(s *State, g int) bool {
	c := &m.Cfg
	for i, cs := range c.Clients {
		before := cs.Conf == ConfA || (g == 2 && (cs.Conf == ConfJoint || cs.Conf == ConfB))
		cl := &s.Clients[i]
		switch {
		case !before || cl.Phase == Done:
		case cs.Forgotten && cl.Started:
		default:
			return false
		}
	}
	d := &s.Docs[g]
	if !d.ok || d.t != s.T || d.version != int64(s.Version) {
		from, to := c.SetA, c.SetB
		if g == 2 {
			from, to = c.SetB, c.SetC
		}
		*d = docCache{t: s.T, version: int64(s.Version), step: int(m.doctor(s, from, to).Step), ok: true}
	}
	st := joint.Step(d.step)
	return st == joint.StepThree || st == joint.StepDone
}

// doctor is redlock doctor's reading of the move from set a to set b now:
// every node of both answers but a node that is down, and the sets'
// fingerprints are those of the nodes' identities now (a node without
// one: its address), with their aliases by address (the doctor's
// spelling, 0).
func (m *Model) doctor(s *State, a, b uint64) joint.Reading {
	var recs []*joint.Records
	var ma, mb uint64
	for ni := range m.Cfg.Nodes {
		if (a|b)&(1<<ni) == 0 {
			continue
		}
		bit := uint64(1) << len(recs)
		if a&(1<<ni) != 0 {
			ma |= bit
		}
		if b&(1<<ni) != 0 {
			mb |= bit
		}
		var rc *joint.Records
		if s.T >= s.Nodes[ni].DownUntil {
			rc = m.nodeRecords(s, ni)
		}
		recs = append(recs, rc)
	}
	na, nb := m.doctorName(s, a), m.doctorName(s, b)
	return joint.StepOf(recs, ma, mb, na, nb, m.jointMut())
}

// lingers reports whether client ci, done with its attempts, stays open:
// a joint client with Linger until step 3 of its move has begun.
func (m *Model) lingers(s *State, ci int) bool {
	cs := &m.Cfg.Clients[ci]
	if !cs.Linger {
		return false
	}
	g := 1
	if cs.Conf == ConfJointBC {
		g = 2
	}
	for i, o := range m.Cfg.Clients {
		if gate(o.Conf) == g && s.Clients[i].Started && !s.Clients[i].Early {
			return false
		}
	}
	return true
}

// earlyCan reports whether the operator can start client ci early: a
// gated client that has not started, whose gate is closed, and that could
// start now but for it.
func (m *Model) earlyCan(s *State, ci int) bool {
	cl := &s.Clients[ci]
	cs := &m.Cfg.Clients[ci]
	if s.Faults[faultEarly] >= m.Cfg.EarlyStarts || gate(cs.Conf) == 0 || cl.Started || cl.Early || cl.Phase != Idle {
		return false
	}
	return cl.Rec.Phase == recIdle && !m.mayStart(s, ci) && m.hasWork(s, ci)
}

// shareSet reports whether clients a and b share a node set: then every
// quorum of one meets every quorum of the other, whatever the runbook.
func (m *Model) shareSet(a, b int) bool {
	c := &m.Cfg
	ac, an := c.setsOf(c.Clients[a].Conf)
	bc, bn := c.setsOf(c.Clients[b].Conf)
	share := func(x uint64) bool { return x != 0 && (x == bc || x == bn) }
	return share(ac) || share(an)
}

// names are a client's names of its sets, its fingerprints and aliases.
func (n Names) names() []string {
	var out []string
	for _, x := range []string{n.Cur, n.Next, n.CurAlias, n.NextAlias} {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// evidence are the record fields that show client n's configuration: its
// own fields, and a joint client's relays of it.
func (n Names) evidence() []string {
	if n.Next != "" {
		out := []string{keys.ConfigJoint(n.Cur, n.Next)}
		if n.CurAlias != "" {
			out = append(out, keys.ConfigJoint(n.CurAlias, n.NextAlias))
		}
		return out
	}
	var out []string
	for _, x := range []string{n.Cur, n.CurAlias} {
		if x != "" {
			out = append(out, keys.ConfigSingle(x), keys.ConfigSeen(x))
		}
	}
	return out
}

// saw are the clients (bits) whose evidence a record round of client ci
// showed in recs, beside a live move record (a joint client's j:X:Y) of
// which one set is named as ci names one of its own and the other as that
// client names one of its: what the conflict rule (docs/
// reconfiguration.md) refuses on, read independently of joint.Decide.
// Clients that share a set with ci are left out: their quorums meet.
func (m *Model) saw(s *State, ci int, recs []*joint.Records) uint64 {
	live := map[string]bool{}
	for _, rc := range recs {
		if rc != nil {
			for f := range rc.Fields {
				live[f] = true
			}
		}
	}
	mine := s.Clients[ci].Names.names()
	var out uint64
	for k := range s.Clients {
		n := s.Clients[k].Names
		if k == ci || n.Cur == "" || m.shareSet(ci, k) {
			continue
		}
		shown, linked := false, false
		for _, f := range n.evidence() {
			shown = shown || live[f]
		}
		for _, x := range mine {
			for _, y := range n.names() {
				linked = linked || live[keys.ConfigJoint(x, y)] || live[keys.ConfigJoint(y, x)]
			}
		}
		if shown && linked {
			out |= 1 << k
		}
	}
	return out
}
