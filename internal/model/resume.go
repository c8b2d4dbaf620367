package model

import (
	"fmt"
	"slices"
)

// The clients' side of a handoff (handoff.go): Lock.Handoff, and
// Client.Resume's admission, claim round, decision and grant.

// FormRec is a form handed off, and what became of it.
type FormRec struct {
	Form    Form
	From    int // the handing client
	Origin  int // index in State.Grants of the handed lock
	Resumes int // the Resumes that returned it
}

// formOf is the form of client ci's held lock.
func (m *Model) formOf(s *State, ci int) Form {
	cl := &s.Clients[ci]
	if cl.Form > 0 {
		f := cl.Held
		f.Secret = cl.Value
		return f
	}
	cs := &m.Cfg.Clients[ci]
	f := Form{Kind: 'p', Secret: cl.Value, Token: cl.Token}
	switch cs.Kind {
	case Reentrant:
		f.Kind, f.Owner = 'w', cs.Owner
	case Exclusive:
		f.Kind, f.Owner = 'w', 1<<20+cl.Value
	case Shared:
		f.Kind = 'r'
	case Permit:
		f.Kind, f.K = 's', m.Cfg.Permits
	}
	return f
}

// handoff is Lock.Handoff of client ci's held lock: the lock ends here,
// unreleased, and its form is handed to the clients that resume ci's.
func (m *Model) handoff(s *State, ci int) {
	cl := &s.Clients[ci]
	g := &s.Grants[cl.Grant]
	g.End = min(g.End, s.T)
	s.Forms = append(s.Forms, FormRec{Form: m.formOf(s, ci), From: ci, Origin: cl.Grant})
	cl.Form = 0
}

// formReady is the index in State.Forms of the next form client ci is to
// resume (-1: none yet).
func (m *Model) formReady(s *State, ci int) int {
	src := m.Cfg.Clients[ci].Resume - 1
	if src < 0 {
		return -1
	}
	want := s.Clients[ci].Forms
	if m.Cfg.Clients[ci].Twice {
		want /= 2
	}
	k := 0
	for i, f := range s.Forms {
		if f.From != src {
			continue
		}
		if k == want {
			return i
		}
		k++
	}
	return -1
}

// forged is f edited to another kind that agrees with itself, as issue
// 33's finding 3's reviewer did: a reader's that says writer, a writer's
// that says reader, a plain lock's that says reader, a reentrant lock's of
// another owner, a permit's of another number of permits.
func forged(f Form) Form {
	switch f.Kind {
	case 'r':
		f.Kind, f.Owner = 'w', 1<<20+9
	case 'w':
		if f.Owner < 1<<20 {
			f.Owner++
		} else {
			f.Kind, f.Owner = 'r', 0
		}
	case 's':
		f.K++
	default:
		f.Kind = 'r'
	}
	return f
}

// startResume is Client.Resume of the next form, after its admission
// (clientStep1 ran checkConfig): refused on a conflict, else a claim
// round with a new secret.
func (m *Model) startResume(s *State, ci int) {
	cl := &s.Clients[ci]
	fi := m.formReady(s, ci)
	cl.Forms++
	cl.Started = true
	cl.Saw = cl.Rec.Saw
	if cl.Rec.Conflict && !m.Cfg.Mut.ResumeUnrecorded {
		return // ErrConfigConflict
	}
	f := s.Forms[fi].Form
	if m.Cfg.Clients[ci].Forged {
		f = forged(f)
	}
	cl.Form, cl.Held = fi+1, f
	cl.Value = (ci+1)*64 + 32 + cl.Forms // the lock's new secret
	if m.Cfg.Mut.OldResume {
		cl.Value = f.Secret
	}
	m.newRound(s, ci)
	cl.Phase = Claiming
	m.send(s, ci, Msg{Kind: ReqClaim, Round: cl.Round, Value: cl.Value, Claim: &f})
}

// claim runs a claim request on node n (resume.lua, or the read of the
// resume before issue 33 with the OldResume mutant).
func (m *Model) claim(n *Node, env Env, req Msg, g Guard) (int, int64) {
	mut := m.Cfg.Mut.HandoffMutations
	if mut.OldResume {
		if ok, left := n.Data.OldResumeCheck(env, *req.Claim); ok {
			return Claimed, left
		}
		return NotClaimed, 0
	}
	return n.Data.Claim(&n.Data.Tombs, env, *req.Claim, req.Value, g, mut)
}

// decideClaim is Resume's decision: the quorum rule on the claims with
// time left, the validity, and the grant; a failed claim gives back what
// it claimed (to the nodes that claimed or did not answer).
func (m *Model) decideClaim(s *State, ci int) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	yes, pending := m.masks(cl)
	cl.Phase = Idle
	// A failed claim gives back what it took (its lock has no token yet:
	// nothing retired); a claim with too little left is released as the
	// lock it became, with the form's token.
	giveBack := func(mask uint64, token int64) {
		if !c.Mut.OldResume {
			m.sendTo(s, ci, Msg{Kind: ReqRelease, Round: cl.Round, Value: cl.Value, Tok: token}, mask)
		}
		cl.Form = 0
	}
	left, ok := m.claimedLeft(ci, cl, yes)
	if !ok {
		giveBack(yes|pending, 0)
		return nil
	}
	from := cl.Start
	if c.Mut.ValidityFromDecision {
		from = s.T
	}
	valid := from + left - c.Drift
	if s.T >= valid-c.NodeTimeout {
		giveBack(^uint64(0), cl.Held.Token)
		return nil
	}
	return m.resumed(s, ci, valid)
}

// claimedLeft is the largest time left for which the nodes that claimed
// it meet client ci's quorum rule (quorum.Rule's Largest).
func (m *Model) claimedLeft(ci int, cl *Client, yes uint64) (int64, bool) {
	var lefts []int64
	for ni := range cl.Votes {
		if yes&(1<<ni) != 0 {
			lefts = append(lefts, cl.Tokens[ni])
		}
	}
	slices.Sort(lefts)
	slices.Reverse(lefts)
	for _, l := range lefts {
		var with uint64
		for ni := range cl.Votes {
			if yes&(1<<ni) != 0 && cl.Tokens[ni] >= l {
				with |= 1 << ni
			}
		}
		if m.met(ci, with) {
			return l, true
		}
	}
	return 0, false
}

// resumed hands client ci the resumed lock, valid until valid, and checks
// it: exclusion, token order, once and kind.
func (m *Model) resumed(s *State, ci int, valid int64) *Violation {
	c := &m.Cfg
	cl := &s.Clients[ci]
	fr := &s.Forms[cl.Form-1]
	f := cl.Held
	origin := s.Grants[fr.Origin]
	owner := 1<<23 + cl.Value // a lock of its own, but for a reentrant owner's
	if f.Kind == 'w' && f.Owner < 1<<20 {
		owner = f.Owner
	}
	cl.Phase, cl.RefLeft, cl.Token, cl.ValidUntil = Holding, c.Clients[ci].Refresh, f.Token, valid
	s.Grants = append(s.Grants, Grant{Client: ci, Value: cl.Value, Owner: owner, Read: f.Kind == 'r', Permit: f.Kind == 's',
		Token: f.Token, Began: origin.Began, At: s.T, End: valid, Origin: fr.Origin + 1})
	cl.Grant = len(s.Grants) - 1
	fr.Resumes++
	if v := m.exclusive(s, ci); m.finds(v) || !c.Global {
		return v
	}
	if fr.Resumes > 1 {
		return &Violation{"once", fmt.Sprintf("c%d resumes c%d's form at t=%d, resumed already", ci, fr.From, s.T)}
	}
	if h := fr.Form; f.Kind != h.Kind || f.Owner != h.Owner || f.K != h.K {
		return &Violation{"kind", fmt.Sprintf("c%d resumed a lock of kind %c owner %d k %d; the nodes hold kind %c owner %d k %d",
			ci, f.Kind, f.Owner, f.K, h.Kind, h.Owner, h.K)}
	}
	return m.tokenOrder(s, ci)
}

// describeMore says what the steps of issue 45's model do: claims,
// resumes, handoffs, snapshots, duplicated requests, early starts.
func (m *Model) describeMore(s *State, st Step) (string, bool) {
	c := &m.Cfg
	at := fmt.Sprintf("t=%d ", s.T)
	who := func(ci int) string { return string(rune('A' + ci)) }
	switch st.Kind {
	case StepProcess:
		q := s.Conns[st.Client*c.Nodes+st.Node].Req[0]
		if q.Kind != ReqClaim {
			return "", false
		}
		n := s.Nodes[st.Node]
		env := n.env(s.T, c.Second)
		status, left := m.claim(&n, env, q, m.guard(q.Actor))
		names := map[int]string{NotClaimed: "not claimed", Claimed: "claimed", ClaimRecovering: "recovering", AlreadyClaimed: "resumed already",
			Superseded: "superseded (a later holder's token)", ClaimKindError: "another kind"}
		return fmt.Sprintf("%sn%d (clock %d) runs %s's claim of %c/%d token %d -> %d: %s, %d left", at, st.Node+1, env.Now, who(q.Actor),
			q.Claim.Kind, q.Claim.Secret, q.Claim.Token, q.Value, names[status], left), true
	case StepClient:
		cl := &s.Clients[st.Client]
		cs := &c.Clients[st.Client]
		switch {
		case cl.Phase == Claiming:
			yes, _ := m.counts(cl)
			return fmt.Sprintf("%s%s decides its claim (%d claimed)", at, who(st.Client), yes), true
		case cl.Phase == Idle && cl.AcqLeft == 0 && m.formReady(s, st.Client) >= 0:
			return fmt.Sprintf("%s%s resumes %s's form", at, who(st.Client), who(cs.Resume-1)), true
		case cl.Phase == Holding && s.T < cl.ValidUntil && cl.RefLeft == 0 && cs.Handoff:
			return fmt.Sprintf("%s%s hands its lock off (token %d)", at, who(st.Client), cl.Token), true
		}
	case StepSnapshot:
		return fmt.Sprintf("%sn%d writes a snapshot", at, st.Node+1), true
	case StepSnapRestart:
		return fmt.Sprintf("%sn%d restarts from its snapshot of t=%d", at, st.Node+1, s.Nodes[st.Node].SnapAt), true
	case StepDup:
		q := s.Conns[st.Client*c.Nodes+st.Node].Req[0]
		return fmt.Sprintf("%s%s's %s to n%d will run twice (a retry)", at, who(q.Actor), kindName[q.Kind], st.Node+1), true
	case StepEarly:
		return fmt.Sprintf("%sthe operator starts %s before step 2 of its move is over", at, who(st.Client)), true
	}
	return "", false
}
