package model

import (
	"fmt"
)

// Enabled lists the steps possible in s, in a fixed order.
func (m *Model) Enabled(s *State) []Step {
	c := &m.Cfg
	if st, ok := m.deliverFirst(s); ok {
		return []Step{st}
	}
	// Room for the steps of most states: growing the slice from nothing
	// was about a fifth of Enabled's time in make model's profile.
	out := make([]Step, 0, 16)
	busy := false
	for ci := range s.Clients {
		if m.clientCan(s, ci) {
			out = append(out, Step{Kind: StepClient, Client: ci})
		}
		if m.recordCan(s, ci) {
			out = append(out, Step{Kind: StepRecord, Client: ci})
		}
		if s.Clients[ci].Phase != Done {
			busy = true
		}
		if m.conn(ci) != ci {
			continue
		}
		for ni := range c.Nodes {
			cn := &s.Conns[ci*c.Nodes+ni]
			if len(cn.Req) > 0 && s.T >= s.Nodes[m.server(s, ci, ni)].DownUntil {
				out = append(out, Step{Kind: StepProcess, Client: ci, Node: ni})
			}
			if len(cn.Rep) > 0 {
				out = append(out, Step{Kind: StepDeliver, Client: ci, Node: ni})
			}
		}
	}
	if !busy {
		return nil // every client is done: no grant can follow
	}
	if s.T < c.Horizon && !m.recordDue(s) {
		out = append(out, Step{Kind: StepTick})
	}
	out = m.nodeFaults(s, out)
	return m.moreFaults(s, out)
}

// deliverFirst is the partial-order reduction: delivering a reply changes
// only its client's votes, and commutes with every step of other clients
// and nodes and with time passing. It conflicts only with its client's
// decision, so when that decision is not possible yet (or the reply is
// late anyway), delivering first is the only order explored.
func (m *Model) deliverFirst(s *State) (Step, bool) {
	c := &m.Cfg
	for ci := range s.Clients {
		for ni := range c.Nodes {
			rep := s.Conns[ci*c.Nodes+ni].Rep
			if len(rep) == 0 {
				continue
			}
			if rep[0].Kind == ReqRecord {
				// The same for a record reply and its recorder's decision.
				if a := rep[0].Actor; m.recDecided(s, a) || !m.recDecidable(s, a) {
					return Step{Kind: StepDeliver, Client: ci, Node: ni}, true
				}
				continue
			}
			if a := rep[0].Actor; m.countsDecided(s, a) || !m.clientCan(s, a) {
				return Step{Kind: StepDeliver, Client: ci, Node: ni}, true
			}
		}
	}
	return Step{}, false
}

// nodeFaults appends the restarts, failovers and replications possible.
func (m *Model) nodeFaults(s *State, out []Step) []Step {
	c := &m.Cfg
	for ni := range c.Nodes {
		n := &s.Nodes[ni]
		if s.T < n.DownUntil {
			continue
		}
		if s.Faults[faultRestart] < c.Restarts && m.lossOK(s, ni) {
			out = append(out, Step{Kind: StepRestart, Node: ni})
		}
		if s.Faults[faultDataRestart] < c.DataRestarts && m.lossOK(s, ni) {
			out = append(out, Step{Kind: StepDataRestart, Node: ni})
		}
		if s.Faults[faultPromote] < c.Promotions {
			if n.Copy != m.replicated(n.Data) {
				out = append(out, Step{Kind: StepSync, Node: ni})
			}
			if m.lossOK(s, ni) {
				for _, off := range c.ReplicaOffsets {
					if c.AssumeBand && c.FailoverTime+off-n.Offset < c.Delta {
						continue
					}
					out = append(out, Step{Kind: StepPromote, Node: ni, Arg: off})
				}
			}
		}
	}
	return out
}

// moreFaults appends the faults of issue 45's model: snapshots and
// restarts from them, requests run twice, clients started early.
func (m *Model) moreFaults(s *State, out []Step) []Step {
	c := &m.Cfg
	if s.Faults[faultSnapRestart] < c.SnapRestarts {
		for ni := range c.Nodes {
			n := &s.Nodes[ni]
			if s.T < n.DownUntil {
				continue
			}
			if n.SnapAt == 0 || n.Snap != snapshotOf(n.Data) {
				out = append(out, Step{Kind: StepSnapshot, Node: ni})
			}
			if n.SnapAt != 0 && m.lossOK(s, ni) {
				out = append(out, Step{Kind: StepSnapRestart, Node: ni})
			}
		}
	}
	if s.Faults[faultDup] < c.Dups {
		for ci := range s.Clients {
			for ni := range c.Nodes {
				if len(s.Conns[ci*c.Nodes+ni].Req) > 0 {
					out = append(out, Step{Kind: StepDup, Client: ci, Node: ni})
				}
			}
		}
	}
	for ci := range s.Clients {
		if m.earlyCan(s, ci) {
			out = append(out, Step{Kind: StepEarly, Client: ci})
		}
	}
	return out
}

// lossOK: no other node lost data within LossGap (a minority loses data
// per recovery window).
func (m *Model) lossOK(s *State, ni int) bool {
	for j := range s.Nodes {
		if j != ni && s.Nodes[j].Lost && s.T-s.Nodes[j].LostReal < m.Cfg.LossGap {
			return false
		}
	}
	return true
}

// clientCan reports whether client ci has a local step.
func (m *Model) clientCan(s *State, ci int) bool {
	c := &s.Clients[ci]
	switch c.Phase {
	case Idle:
		if c.Rec.Phase != recIdle {
			return false
		}
		if m.hasWork(s, ci) {
			return m.mayStart(s, ci) // start an attempt
		}
		return m.finished(s, ci) // close
	case Checking:
		return c.Rec.Phase == recIdle
	case Acquiring, Fencing, Refreshing, Claiming:
		return m.decidable(s, ci)
	case Won:
		return true
	case Holding:
		// Refresh, release, hand off, or give up; the keep-alive waits
		// a TTL/3 between refreshes.
		cs := &m.Cfg.Clients[ci]
		return !cs.KeepAlive || c.RefLeft == 0 || s.T >= c.ValidUntil || s.T >= c.Start+cs.TTL/3
	}
	return false
}

// hasWork reports whether client ci has an attempt to make: an acquire,
// or a form to resume.
func (m *Model) hasWork(s *State, ci int) bool {
	return s.Clients[ci].AcqLeft > 0 || m.formReady(s, ci) >= 0
}

// finished reports whether client ci, with no attempt to make, closes:
// unless it lingers, or resumes the forms of a client that may still hand
// one off.
func (m *Model) finished(s *State, ci int) bool {
	if m.lingers(s, ci) {
		return false
	}
	src := m.Cfg.Clients[ci].Resume - 1
	return src < 0 || s.Clients[src].Phase == Done
}

// counts returns the yes and pending counts of the current round.
func (m *Model) counts(c *Client) (yes, pending int) {
	for _, v := range c.Votes {
		switch v {
		case Yes:
			yes++
		case Pending:
			pending++
		}
	}
	return
}

// decidable: the round's loop has stopped reading replies, every node
// answered, or the node timeout has passed.
func (m *Model) decidable(s *State, ci int) bool {
	c := &s.Clients[ci]
	_, pending := m.counts(c)
	return m.countsDecided(s, ci) || pending == 0 || s.T >= c.Start+m.Cfg.NodeTimeout
}

// countsDecided: the round's loop has stopped reading replies (quorum.Round's
// decided): a quorum agreed and, for the first round of a write hold of the
// family, the votes are enough (enough); or a quorum can no longer agree.
func (m *Model) countsDecided(s *State, ci int) bool {
	cl := &s.Clients[ci]
	if cl.Phase == Claiming {
		return false // quorum.WaitAll
	}
	yes, pending := m.masks(cl)
	if !m.met(ci, yes|pending) {
		return true
	}
	return m.met(ci, yes) && m.enough(ci, cl)
}

// enough is family.enough (kind.go), the Enough of the first round of a
// write hold (reentrant or exclusive): when a yes-vote found the owner's
// lock, the round waits for more replies (up to every node's, or the node
// timeout) until a quorum of them agree on one recorded token t > 0
// (FamilyToken's rule 1). Every other round decides on the count of
// yes-votes. With the DecideAtQuorum mutant, no round waits.
func (m *Model) enough(ci int, cl *Client) bool {
	if cl.Phase != Acquiring || !m.family(ci) || m.Cfg.Clients[ci].Kind == Shared || m.Cfg.Mut.DecideAtQuorum {
		return true
	}
	existed := false
	for i, v := range cl.Votes {
		if v != Yes || !cl.Existed[i] {
			continue
		}
		existed = true
		if cl.Tokens[i] <= 0 {
			continue
		}
		same := 0
		for j, w := range cl.Votes {
			if w == Yes && cl.Existed[j] && cl.Tokens[j] == cl.Tokens[i] {
				same++
			}
		}
		if same >= m.quorum(ci) {
			return true
		}
	}
	return !existed
}

// send queues msg from client ci to every node.
func (m *Model) send(s *State, ci int, msg Msg) {
	m.sendTo(s, ci, msg, ^uint64(0))
}

// sendTo queues msg from client ci to its nodes of mask. A request about a
// resumed lock carries the form's owner.
func (m *Model) sendTo(s *State, ci int, msg Msg, mask uint64) {
	nodes := m.Cfg.Nodes
	msg.Actor = ci
	if cl := &s.Clients[ci]; cl.Form > 0 && msg.Kind != ReqRecord {
		msg.Owner = cl.Held.Owner
	}
	for ni := range nodes {
		if !m.member(ci, ni) || mask&(1<<ni) == 0 {
			continue
		}
		cn := &s.Conns[m.conn(ci)*nodes+ni]
		msg.Node = s.Clients[ci].IDs[ni] // the guard's identity (identity.go)
		cn.Req = append(cn.Req, msg)
	}
}

// Apply performs step st on s (which it modifies) and returns the first
// property it breaks, if any (with Model.Only, of that property).
func (m *Model) Apply(s *State, st Step) *Violation {
	v := m.apply(s, st)
	if !m.finds(v) && m.Check != nil {
		v = m.Check(s)
	}
	if !m.finds(v) {
		return nil
	}
	return v
}

// finds reports whether v is a find: any violation, or with Model.Only,
// a violation of that property.
func (m *Model) finds(v *Violation) bool {
	return v != nil && (m.Only == "" || v.Prop == m.Only)
}

func (m *Model) apply(s *State, st Step) *Violation {
	s.Gates = [3]int8{}
	switch st.Kind {
	case StepTick:
		s.T++
		return m.countersKept(s)
	case StepProcess:
		return m.process(s, st.Client, st.Node)
	case StepDeliver:
		m.deliver(s, st.Client, st.Node)
	case StepClient:
		return m.clientStep(s, st.Client)
	case StepRecord:
		m.recordStep(s, st.Client)
	case StepRestart, StepDataRestart, StepPromote, StepSnapRestart:
		m.restart(s, st)
	case StepSync:
		n := &s.Nodes[st.Node]
		n.Copy = m.replicated(n.Data)
	case StepSnapshot:
		n := &s.Nodes[st.Node]
		n.Snap, n.SnapAt = snapshotOf(n.Data), s.T
	case StepDup:
		cn := &s.Conns[st.Client*m.Cfg.Nodes+st.Node]
		cn.Req = append(cn.Req, cn.Req[0])
		s.Faults[faultDup]++
	case StepEarly:
		s.Clients[st.Client].Early = true
		s.Faults[faultEarly]++
		return m.clientStep(s, st.Client)
	case StepRepoint:
		m.repoint(s, st)
	}
	return nil
}

// restart is a node's restart: without its data, with it, from its last
// snapshot, or a failover to its replica.
func (m *Model) restart(s *State, st Step) {
	c := &m.Cfg
	n := &s.Nodes[st.Node]
	down := c.RestartTime
	s.Version++
	switch st.Kind {
	case StepRestart:
		// Nothing is persisted: the data set, its replica's copy and its
		// snapshot are gone (the identity too: the next client to ask
		// writes a new one).
		n.Data, n.Copy, n.Snap, n.SnapAt = Data{}, Data{}, Data{}, 0
		s.Faults[faultRestart]++
	case StepDataRestart:
		// The fast path's key is not in the AOF (an RDB snapshot could
		// carry it, but it would have expired: a restart takes longer than
		// delta).
		n.Data.Ok = OkKey{}
		s.Faults[faultDataRestart]++
	case StepSnapRestart:
		n.Data = n.Snap
		s.Faults[faultSnapRestart]++
	case StepPromote:
		n.Data = n.Copy
		n.Offset = st.Arg
		s.Faults[faultPromote]++
		down = c.FailoverTime
	}
	n.Run = s.NextRun
	s.NextRun++
	n.Replica = st.Kind == StepPromote
	n.DownUntil = s.T + down
	n.Start = s.T + n.Offset
	if st.Kind == StepPromote {
		n.Start = -100 * c.Second // the replica's process ran long
	}
	n.Lost, n.LostKept, n.LostReal, n.LostAt = true, st.Kind == StepDataRestart, s.T, s.T+n.Offset
	// Connections break: requests and replies in flight are lost (of the
	// addresses that lead to the node).
	for ci := range s.Clients {
		for ni := range c.Nodes {
			if m.server(s, ci, ni) == st.Node {
				cn := &s.Conns[ci*c.Nodes+ni]
				cn.Req, cn.Rep = nil, nil
			}
		}
	}
}

// snapshotOf is what an RDB snapshot of d holds: the whole data set but
// the fast path's key, which would have expired before a restart from the
// snapshot could read it (a restart takes longer than delta).
func snapshotOf(d Data) Data {
	d.Ok = OkKey{}
	return d
}

// replicated is what a replica receives of d: everything but the guard's
// fast-path key, which is written with replication off (unless the
// OkKeyReplicated mutant). The waiters mark is left out too: it only
// decides whether a release publishes, which the explorer does not check.
func (m *Model) replicated(d Data) Data {
	d.Waiters = Mark{}
	if !m.Cfg.Mut.OkKeyReplicated {
		d.Ok = OkKey{}
	}
	return d
}

// countersKept checks (f) after time passed: no node's counter reads lower
// than a tick before (an expired counter reads as its seed, the node's
// time rounded down to the second x TokenSeed: above every value it held,
// docs/fencing.md, Lemma 1).
func (m *Model) countersKept(s *State) *Violation {
	if !m.Cfg.Global || m.Cfg.EndToEndOnly {
		return nil
	}
	for ni := range s.Nodes {
		n := &s.Nodes[ni]
		now := s.T + n.Offset
		if before, after := n.Data.CounterRead(now-1, m.Cfg.Second), n.Data.CounterRead(now, m.Cfg.Second); after < before {
			return &Violation{"counter", fmt.Sprintf("n%d's counter reads %d at node time %d, %d before", ni+1, after, now, before)}
		}
	}
	return nil
}
