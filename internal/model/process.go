package model

import (
	"fmt"
)

// process runs the request at the head of connection conn to node ni's
// address, on the node the address reaches (server, identity.go).
func (m *Model) process(s *State, conn, addr int) *Violation {
	c := &m.Cfg
	cn := &s.Conns[conn*c.Nodes+addr]
	req := cn.Req[0]
	cn.Req = cn.Req[1:]
	ni := m.server(s, conn, addr)
	if req.Kind == ReqRecord {
		cn.Rep = append(cn.Rep, m.processRecord(s, ni, req))
		return nil
	}
	ci := req.Actor
	cs := c.Clients[ci]
	n := &s.Nodes[ni]
	if m.otherNode(s, ni, req) {
		// An acquire and a claim (scripts that call epoch.lua's epoch)
		// say recovering before they check the identity: a node restarted
		// without its data recovers first. A refresh and a second round
		// check the identity first.
		rep := Msg{Kind: req.Kind, Actor: ci, Round: req.Round, Value: req.Value, Status: OtherNode}
		if req.Kind == ReqAcquire || req.Kind == ReqClaim {
			if rec, _ := n.Data.Epoch(n.env(s.T, c.Second), m.guard(ci), c.Mut); rec > 0 {
				rep.Status, rep.N = Recovering, rec
			}
		}
		cn.Rep = append(cn.Rep, rep)
		return nil
	}
	env := n.env(s.T, c.Second)
	before := n.Data.CounterRead(env.Now, env.Second)
	g := m.guard(ci)
	rep := Msg{Kind: req.Kind, Actor: ci, Round: req.Round, Value: req.Value}
	if req.Kind == ReqAcquire && req.Rec != nil {
		// A folded record (foldRecords): record.lua first, in the
		// acquire's pipeline.
		rr := m.processRecord(s, ni, req)
		rep.Recs, rep.RecNow = rr.Recs, rr.N
	}
	voted := false
	retry := n.Data.retried(env, req.Value)
	mode, owner := m.holdOf(ci, req.Value)
	if req.Owner != 0 {
		owner = req.Owner
	}
	switch {
	case req.Kind == ReqClaim:
		rep.Status, rep.N = m.claim(n, env, req, g)
		voted = rep.Status == Claimed
	case m.permit(ci):
		switch req.Kind {
		case ReqAcquire:
			rep.Status, rep.N = n.Data.PermAcquire(env, c.Permits, req.Value, req.Arg, g, c.Mut)
			voted = rep.Status == Taken
		case ReqFence:
			n.Data.Raise(env, req.Arg, g, c.Mut)
			rep.Status = 1
		case ReqRefresh:
			rep.Status = n.Data.PermRefresh(env, c.Permits, req.Value, req.Arg, req.Tok, g, c.Mut)
			voted = rep.Status == Reseeded
		case ReqRelease:
			if deleted, _, _ := n.Data.PermRelease(env, req.Value, req.Tok, true, g, c.Mut); deleted {
				rep.Status = 1
			}
		}
	case m.family(ci):
		switch req.Kind {
		case ReqAcquire:
			rep.Status, rep.N, rep.Existed, rep.Counter = n.Data.FamAcquire(env, mode, owner, req.Value, req.Arg, g, c.Mut)
			voted = rep.Status == Taken
		case ReqFence:
			n.Data.Seal(env, req.Arg, owner, g, c.Mut) // a reader's owner is 0: nothing recorded
			rep.Status = 1
		case ReqRefresh:
			rep.Status = n.Data.FamRefresh(env, mode, owner, req.Value, req.Arg, req.Tok, g, c.Mut)
			voted = rep.Status == Reseeded
		case ReqRelease:
			if deleted, _, _ := n.Data.FamRelease(env, mode, owner, req.Value, req.Tok, true, g, c.Mut); deleted {
				rep.Status = 1
			}
		}
		if !c.WriterMark {
			n.Data.WWait = Mark{}
		}
	case req.Kind == ReqAcquire:
		rep.Status, rep.N = n.Data.Acquire(env, req.Value, req.Arg, g, c.Mut)
		voted = rep.Status == Taken
	case req.Kind == ReqFence:
		n.Data.Raise(env, req.Arg, g, c.Mut)
		rep.Status = 1
	case req.Kind == ReqRefresh:
		rep.Status = n.Data.Refresh(env, req.Value, req.Arg, req.Tok, g, c.Mut)
		voted = rep.Status == Reseeded
	case req.Kind == ReqRelease:
		if deleted, _ := n.Data.Release(env, req.Value, req.Tok, true, g, c.Mut); deleted {
			rep.Status = 1
		}
	}
	if req.Kind == ReqAcquire && req.Node == 0 && m.folds(ci) {
		rep.ID = m.identifyOn(s, ni) // id.lua, after the acquire
	}
	cn.Rep = append(cn.Rep, rep)
	// (f) counters: the script leaves the counter reading no lower, and a
	// vote reports at least what it read: one more for a token it issued,
	// as much for a counter beside a re-entry.
	if c.Global && !c.EndToEndOnly {
		reported := int64(-1)
		switch {
		case !voted || req.Kind != ReqAcquire:
		case rep.Existed:
			reported = rep.Counter
		case retry:
			reported = rep.N // a retried request: the counter as it is (current)
		default:
			reported = rep.N - 1
		}
		if after := n.Data.CounterRead(env.Now, env.Second); after < before {
			return &Violation{"counter", fmt.Sprintf("n%d's counter reads %d after c%d's %s, %d before", ni+1, after, ci, kindName[req.Kind], before)}
		}
		if reported >= 0 && reported < before {
			return &Violation{"counter", fmt.Sprintf("n%d reports counter %d to c%d, below the %d it reads", ni+1, reported, ci, before)}
		}
	}
	// (e) recovery: a guarded node votes only maxTTL after it may have
	// lost writes (a 'p' client trusts a restart that kept the data).
	if voted && cs.Mode != '0' && n.Lost && env.Now < n.LostAt+cs.MaxTTL && !(cs.Mode == 'p' && n.LostKept) {
		return &Violation{"recovery", fmt.Sprintf("n%d votes for c%d at node time %d, %d after its fault (max TTL %d)",
			ni+1, ci, env.Now, env.Now-n.LostAt, cs.MaxTTL)}
	}
	return nil
}

// deliver hands the reply at the head of connection conn from node ni to
// its client.
func (m *Model) deliver(s *State, conn, ni int) {
	c := &m.Cfg
	cn := &s.Conns[conn*c.Nodes+ni]
	rep := cn.Rep[0]
	cn.Rep = cn.Rep[1:]
	if rep.Kind == ReqRecord {
		m.deliverRecord(s, ni, rep)
		return
	}
	cl := &s.Clients[rep.Actor]
	if rep.Status == OtherNode {
		cl.Unknown |= 1 << ni // to identify again (identity.go); no vote
	}
	if rep.ID != 0 {
		m.learnRead(s, rep.Actor, ni, rep.ID) // late or not, as the library
	}
	if rep.Round != cl.Round || cl.Votes[ni] != Pending || m.countsDecided(s, rep.Actor) {
		return // late: cannot create a grant
	}
	switch {
	case cl.Phase == Acquiring && rep.Kind == ReqAcquire:
		m.foldedReply(s, ni, rep)
		if rep.Status == Taken && !(rep.ID != 0 && cl.Invalid) {
			cl.Votes[ni], cl.Tokens[ni] = Yes, rep.N
			cl.Existed[ni], cl.Counters[ni] = rep.Existed, rep.Counter
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Fencing && rep.Kind == ReqFence:
		anyNode := c.Mut.FenceCountsAnyNode
		if m.family(rep.Actor) {
			anyNode = c.Mut.SealCountsAnyNode
		}
		if rep.Status == OtherNode {
			cl.Votes[ni] = No // another server's: its raise is not this node's
		} else if cl.FirstYes[ni] || anyNode {
			cl.Votes[ni] = Yes
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Refreshing && rep.Kind == ReqRefresh:
		if rep.Status == Extended || rep.Status == Reseeded {
			cl.Votes[ni] = Yes
		} else {
			cl.Votes[ni] = No
		}
	case cl.Phase == Claiming && rep.Kind == ReqClaim:
		// A yes: claimed with time left, which Tokens keeps.
		if rep.Status == Claimed && rep.N > 0 {
			cl.Votes[ni], cl.Tokens[ni] = Yes, rep.N
		} else {
			cl.Votes[ni] = No
		}
	}
}

func (m *Model) newRound(s *State, ci int) {
	cl := &s.Clients[ci]
	cl.Round++
	cl.Start = s.T
	for i := range cl.Votes {
		cl.Votes[i] = Pending
		if !m.member(ci, i) {
			cl.Votes[i] = No
		}
	}
}

func (m *Model) clientStep(s *State, ci int) *Violation {
	v := m.clientStep1(s, ci)
	if cl := &s.Clients[ci]; cl.Phase == Idle && !m.hasWork(s, ci) && m.finished(s, ci) {
		cl.Phase = Done
	}
	return v
}

// retried reports whether a plain lock's or a permit's acquire of value
// finds its own key (hold) live: a request that ran before (StepDup), to
// which acquire.lua and permit.lua answer with the counter as it is.
func (d *Data) retried(env Env, value int) bool {
	now := env.keyTime()
	if d.Lock.Owner == value && now <= d.Lock.Exp {
		return true
	}
	if d.Fam.OK && d.Fam.Mode == 's' && now <= d.Fam.Exp {
		exp, ok := d.Fam.Hold(value)
		return ok && exp > now
	}
	return false
}
