package model

import (
	"fmt"
)

// clientStep1 is client ci's step in its phase.
func (m *Model) clientStep1(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	switch cl.Phase {
	case Idle, Checking:
		m.startAttempt(s, ci)
	case Acquiring:
		return m.decideFirst(s, ci)
	case Won:
		m.newRound(s, ci)
		cl.Phase = Fencing
		m.send(s, ci, Msg{Kind: ReqFence, Round: cl.Round, Value: cl.Value, Arg: cl.Token})
	case Fencing:
		yes, _ := m.masks(cl)
		if !m.met(ci, yes) || s.T >= cl.ValidUntil {
			cl.Phase = Idle // the lock is given back (release not modelled)
			return nil
		}
		return m.grant(s, ci)
	case Holding:
		m.holdStep(s, ci)
	case Refreshing:
		return m.decideRefresh(s, ci)
	case Claiming:
		return m.decideClaim(s, ci)
	}
	_ = c
	return nil
}

// startAttempt is client ci's next attempt, an obtain's or a resume's,
// after its admission (its records first, again if the record took too
// long), or its close when it has none.
func (m *Model) startAttempt(s *State, ci int) {
	c := &m.Cfg
	cs := c.Clients[ci]
	cl := &s.Clients[ci]
	if !m.hasWork(s, ci) {
		cl.Phase = Done
		return
	}
	if cl.Unknown != 0 {
		m.reidentify(s, ci) // a node refused a vote as another node
	}
	if cl.Invalid {
		cl.Phase = Done // ErrInvalid: two of its nodes are one server
		return
	}
	if m.checkConfig(s, ci) {
		return // records first (again, if the record took too long)
	}
	cl.Phase = Idle
	if cl.AcqLeft == 0 {
		m.startResume(s, ci)
		return
	}
	cl.AcqLeft--
	cl.Started = true
	cl.Saw = cl.Rec.Saw
	if cl.Rec.Conflict {
		return // ErrConfigConflict
	}
	// Values per client and attempt, so that equal states hash equal
	// whatever order the clients started in.
	cl.Value = (ci+1)*64 + cs.Acquires - cl.AcqLeft
	m.newRound(s, ci)
	cl.ValidUntil = s.T + cs.TTL - c.Drift
	for i := range cl.Tokens {
		cl.Tokens[i], cl.Existed[i], cl.Counters[i] = 0, false, 0
	}
	cl.Phase = Acquiring
	m.send(s, ci, Msg{Kind: ReqAcquire, Round: cl.Round, Value: cl.Value, Arg: cs.TTL, Rec: m.foldFirst(s, ci)})
}

// decideFirst decides an acquire's first round: lost, granted, or on to
// the second round (the token is raised: the votes differ, or the move
// floor is above them; a family hold's seal).
func (m *Model) decideFirst(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	if cl.Rec.Phase == recFolded && m.decideFolded(s, ci) {
		return nil
	}
	yes, _ := m.masks(cl)
	if !m.met(ci, yes) || s.T >= cl.ValidUntil || cl.Invalid {
		// Invalid: a reply's identity showed one server twice
		// (learnRead); the library gives a won round back
		// (engine.acquire), as any failed attempt's clean-up, which
		// the model leaves to the keys' expiry.
		cl.Phase = Idle
		return nil
	}
	for i, v := range cl.Votes {
		cl.FirstYes[i] = v == Yes
	}
	if m.family(ci) {
		var seal bool
		cl.Token, seal = m.familyToken(cl)
		if m.moveFloor(s, ci) {
			seal = true // engine.moveFloor after the kind's token rule
		}
		if !seal {
			return m.grant(s, ci)
		}
		cl.Phase = Won
		return nil
	}
	cl.Token = 0
	for i, v := range cl.Votes {
		if v == Yes && cl.Tokens[i] > cl.Token {
			cl.Token = cl.Tokens[i]
		}
	}
	var equal uint64
	for i, v := range cl.Votes {
		if v == Yes && cl.Tokens[i] == cl.Token {
			equal |= 1 << i
		}
	}
	raise := !m.met(ci, equal)
	if m.moveFloor(s, ci) {
		raise = true
	}
	if !raise || c.Mut.NoSecondRound {
		return m.grant(s, ci)
	}
	cl.Phase = Won
	return nil
}

// holdStep is a held lock's next step: lost, refreshed, or ended
// (released, handed off, or left to expire).
func (m *Model) holdStep(s *State, ci int) {
	c := &m.Cfg
	cs := c.Clients[ci]
	cl := &s.Clients[ci]
	g := &s.Grants[cl.Grant]
	switch {
	case s.T >= cl.ValidUntil:
		cl.Phase = Idle // lost
	case cl.RefLeft > 0:
		cl.RefLeft--
		m.newRound(s, ci)
		cl.NewValid = s.T + cs.TTL - c.Drift
		cl.Phase = Refreshing
		m.send(s, ci, Msg{Kind: ReqRefresh, Round: cl.Round, Value: cl.Value, Arg: cs.TTL, Tok: cl.Token})
	case cs.Handoff:
		m.handoff(s, ci)
		cl.Phase = Idle
	default:
		if cs.Release {
			g.End = min(g.End, s.T)
			m.send(s, ci, Msg{Kind: ReqRelease, Round: cl.Round, Value: cl.Value, Tok: cl.Token})
		}
		cl.Form = 0
		cl.Phase = Idle
	}
}

// decideRefresh decides a refresh round: extended on a quorum, else the
// validity is the earlier of the two.
func (m *Model) decideRefresh(s *State, ci int) *Violation {
	cl := &s.Clients[ci]
	yes, _ := m.masks(cl)
	g := &s.Grants[cl.Grant]
	if m.met(ci, yes) && s.T < cl.ValidUntil && s.T < cl.NewValid {
		// (c): the extension rests on a quorum of agreeing replies.
		if v := m.refreshQuorum(s, ci); v != nil {
			return v
		}
		cl.ValidUntil = cl.NewValid
		g.End = cl.NewValid
		if v := m.exclusive(s, ci); v != nil {
			return v
		}
	} else if cl.NewValid < cl.ValidUntil {
		cl.ValidUntil = cl.NewValid
		g.End = min(g.End, cl.NewValid)
	}
	cl.Phase = Holding
	return nil
}

// FamVote is a yes-vote of a family acquire's first round: the token the
// node returned, whether it found the owner's lock (then the token is the
// recorded t) and the node's counter.
type FamVote struct {
	Token   int64
	Existed bool
	Counter int64
}

// FamilyToken is the client's token rule for the lock family
// (docs/lock-family.md, "Fencing tokens", rules 1 and 2; family.go's
// familyToken), on the yes-votes of a first round with quorum q. It
// returns the token and whether the seal round must confirm it.
//
// Rule 1 (continuing tenure): at least q of the yes-votes found the
// owner's lock and report one recorded token t > 0: the token is t, no
// second round. Rule 2 (new tenure): the largest of each fresh vote's
// token and one more than the counter of each vote that found the lock;
// no second round only when no vote found the lock and q votes issued that
// token.
func FamilyToken(q int, yes []FamVote, mut Mutations) (int64, bool) {
	if mut.Rule1AnyExisted {
		var t int64
		for _, v := range yes {
			if v.Existed && v.Token > t {
				t = v.Token
			}
		}
		if t > 0 {
			return t, false
		}
	}
	for _, v := range yes {
		if !v.Existed || v.Token <= 0 {
			continue
		}
		same := 0
		for _, w := range yes {
			if w.Existed && w.Token == v.Token {
				same++
			}
		}
		if same >= q {
			return v.Token, false
		}
	}
	var token int64
	existed := false
	for _, v := range yes {
		x := v.Token
		if v.Existed {
			existed = true
			x = v.Counter + 1
			switch {
			case mut.Rule2ExistedCounter:
				x = v.Counter
			case mut.Rule2RecordedToken:
				x = v.Token + 1
			}
		}
		token = max(token, x)
	}
	issued := 0
	for _, v := range yes {
		if !v.Existed && v.Token == token {
			issued++
		}
	}
	return token, existed || issued < q
}

// familyToken applies FamilyToken to cl's first round.
func (m *Model) familyToken(cl *Client) (int64, bool) {
	var yes []FamVote
	for i, v := range cl.Votes {
		if v == Yes {
			yes = append(yes, FamVote{cl.Tokens[i], cl.Existed[i], cl.Counters[i]})
		}
	}
	return FamilyToken(m.Cfg.Quorum(), yes, m.Cfg.Mut)
}

// refreshQuorum checks (c): a quorum of this round's replies agreed.
func (m *Model) refreshQuorum(s *State, ci int) *Violation {
	cl := &s.Clients[ci]
	if yes, _ := m.masks(cl); !m.met(ci, yes) {
		return &Violation{"refresh", fmt.Sprintf("c%d extended its lock with the yes-votes of %b", ci, yes)}
	}
	return nil
}

// grant hands the lock to client ci and checks (a) and (b).
func (m *Model) grant(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	cl.Phase = Holding
	cl.RefLeft = c.Clients[ci].Refresh
	mode, owner := m.holdOf(ci, cl.Value)
	s.Grants = append(s.Grants, Grant{Client: ci, Value: cl.Value, Owner: owner, Read: mode == 'r', Permit: mode == 's',
		Token: cl.Token, Began: cl.ValidUntil - c.Clients[ci].TTL + c.Drift, At: s.T, End: cl.ValidUntil, Saw: cl.Saw})
	cl.Grant = len(s.Grants) - 1
	if v := m.exclusive(s, ci); m.finds(v) {
		return v
	}
	return m.tokenOrder(s, ci)
}

// tokenOrder checks (b) for client ci's grant, the latest: its token is
// above every earlier conflicting grant's (a resumed lock's, the form's,
// above every one but the handed lock's, which it continues).
func (m *Model) tokenOrder(s *State, ci int) *Violation {
	if !m.Cfg.Global {
		return nil
	}
	gi := s.Clients[ci].Grant
	g := s.Grants[gi]
	for i, e := range s.Grants[:gi] {
		if i+1 == g.Origin || (g.Origin != 0 && e.Origin == g.Origin) || m.early(s, g, e) {
			continue // the lock it continues; another Resume of its form ("once")
		}
		switch {
		case g.Permit && e.Permit && g.Began > e.At && e.Token >= g.Token:
			// (b) for permits: a permit whose acquire began after another
			// was granted has a higher token. (Concurrent acquires of
			// permits are not ordered, and may share a token.)
			return &Violation{"token", fmt.Sprintf("c%d's permit granted token %d at t=%d (began at %d) after c%d's permit got token %d at t=%d",
				ci, g.Token, g.At, g.Began, e.Client, e.Token, e.At)}
		case g.conflicts(e) && e.Token >= g.Token:
			return &Violation{"token", fmt.Sprintf("c%d granted token %d at t=%d after c%d got token %d at t=%d",
				ci, g.Token, g.At, e.Client, e.Token, e.At)}
		case !g.conflicts(e) && !g.Read && g.Began > e.At && e.End > g.At && e.Token > g.Token:
			// One owner's holds: a re-entry that began after another
			// hold of the owner was granted, and is granted while that
			// one is valid, gets a token no lower than that one's.
			// (Concurrent acquires of one owner are not ordered.)
			return &Violation{"token", fmt.Sprintf("c%d granted token %d at t=%d (began at %d) while c%d's hold of the same owner, granted at %d with token %d, is valid until %d",
				ci, g.Token, g.At, g.Began, e.Client, e.At, e.Token, e.End)}
		}
	}
	return nil
}

// exclusive checks (a): no other owner's grant is valid now, and at most
// Permits of the semaphore's permits.
func (m *Model) exclusive(s *State, ci int) *Violation {
	if !m.Cfg.Global {
		return nil
	}
	g := s.Grants[s.Clients[ci].Grant]
	permits := 0
	for _, e := range s.Grants {
		if e.At > s.T || s.T >= e.End || (m.early(s, g, e) && !m.sawOther(s, g, e)) {
			continue
		}
		if g.Permit && e.Permit {
			permits++
			continue
		}
		if g.conflicts(e) {
			return &Violation{"exclusion", fmt.Sprintf("c%d holds the lock at t=%d while c%d's grant of t=%d is valid until %d",
				ci, s.T, e.Client, e.At, e.End)}
		}
	}
	if permits > m.Cfg.Permits {
		return &Violation{"exclusion", fmt.Sprintf("%d permits of %d valid at t=%d (c%d's the latest)", permits, m.Cfg.Permits, s.T, ci)}
	}
	return nil
}

// early reports whether grants g and e are of two clients that share no
// node set, one of them started by the operator before its move's step 2
// was over (runbook.go): quorums of the two may share no node, and only
// what the early client's records showed is promised.
func (m *Model) early(s *State, g, e Grant) bool {
	a, b := g.Client, e.Client
	if !s.Clients[a].Early && !s.Clients[b].Early {
		return false
	}
	return !m.shareSet(a, b)
}

// sawOther reports whether the early client of g and e saw the other's
// client in the records of its attempt (Grant.Saw): it must then have
// refused (joint.Decide's conflict), and their overlap breaks (a).
func (m *Model) sawOther(s *State, g, e Grant) bool {
	return (s.Clients[g.Client].Early && g.Saw&(1<<e.Client) != 0) ||
		(s.Clients[e.Client].Early && e.Saw&(1<<g.Client) != 0)
}
