package model

// The first record folded into the first acquire (issue 50's first
// obtain with records on; the library's recorder.foldFirst). A client
// with records on one node set of two nodes or more (standalone, as the
// model's are) makes no first contact and no record round before its
// first obtain's acquire: the acquire's requests carry its record
// (record.lua before the acquire's script in one pipeline, then id.lua),
// which writes its own field under the set's name by address only (it
// knows no identity yet, so the name by identity would name no set), and
// returns the node's live fields with the acquire's vote and the node's
// identity. When the round is decided the client names its sets by the
// identities it learned (nodes still silent stand in by address, and it
// reads the records as a client that has not identified them all:
// joint.Sets.Known false) and decides its record on the replies as a
// record round's read (joint.Decide):
//
//   - a conflict gives the round back (ErrConfigConflict), as any failed
//     attempt: the client held no lock;
//   - writes to make (a move is in sight: relays, a move floor to raise)
//     give the round back too, and the attempt waits for a record round
//     of those writes (Checking) and is made again, unfolded;
//   - else the record is the client's (its floor and Last, Began the
//     round's start), and the acquire is decided as any other: the move
//     floor raises the token by the second round (moveFloor).
//
// The record reached each node before the acquire did (one pipeline,
// in order), so a lock it gives is covered by a live field from its
// start, under a name every reader counts as a client it must wait for
// when it does not know it (an unknown name costs a wait, never a pair
// of holders). The client's field under the identities' name comes with
// its next record (the recorder's, every MaxTTL/4).

import (
	"fmt"

	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
)

// recFolded is the recorder's phase while its first record rides on the
// first acquire round.
const recFolded = recWriting + 1

// foldRecords reports whether client ci reads its nodes' identities with
// its acquires and folds its first record into its first obtain's acquire
// (the library's identities.fold with records): records on one set of
// two nodes or more. A resume before any obtain makes the first contact
// and records first (checkConfig), as in the library.
func (m *Model) foldRecords(ci int) bool {
	c := &m.Cfg
	cs := &c.Clients[ci]
	if !m.records(ci) || c.Mut.VoteByAddress {
		return false
	}
	cur, next := c.setsOf(cs.Conf)
	return next == 0 && bits64(cur) >= 2
}

// foldFirst starts client ci's folded record, when its attempt is its
// first (no record yet), and returns what its acquires write first.
func (m *Model) foldFirst(s *State, ci int) *RecWrite {
	cl := &s.Clients[ci]
	r := &cl.Rec
	if r.Has || !m.foldRecords(ci) {
		return nil
	}
	if r.Votes == nil {
		r.Votes = make([]int8, m.Cfg.Nodes)
		r.Reps = make([]RecReply, m.Cfg.Nodes)
	}
	for ni := range r.Votes {
		r.Votes[ni], r.Reps[ni] = No, RecReply{}
		if m.member(ci, ni) {
			r.Votes[ni] = Pending
		}
	}
	cur, _ := m.Cfg.setsOf(m.Cfg.Clients[ci].Conf)
	m.name(s, ci) // by address until the identities come
	name := m.alias(cur, m.Cfg.Clients[ci].Spelling)
	r.Has, r.All, r.Began, r.Start, r.Phase = true, false, s.T, s.T, recFolded
	return &RecWrite{Keep: []joint.Keep{{Name: keys.ConfigSingle(name), TTL: joint.RecordTTL(m.Cfg.Clients[ci].MaxTTL)}}}
}

// foldedReply keeps a folded record's reply, as a record round's read
// keeps it (deliverRecord).
func (m *Model) foldedReply(s *State, ni int, rep Msg) {
	r := &s.Clients[rep.Actor].Rec
	if r.Phase != recFolded || rep.Recs == nil || r.Votes[ni] != Pending {
		return
	}
	r.Votes[ni] = Yes
	r.Reps[ni] = RecReply{Now: rep.RecNow, At: s.T, F: rep.Recs}
}

// decideFolded decides client ci's folded record when its acquire round
// is decided, and reports whether the attempt ends there (given back:
// a conflict, or writes to make first).
func (m *Model) decideFolded(s *State, ci int) bool {
	cl := &s.Clients[ci]
	r := &cl.Rec
	m.name(s, ci)
	nodes, sets := m.nodesOf(s, ci)
	recs := make([]*joint.Records, len(nodes))
	answered := false
	for li, ni := range nodes {
		if r.Votes[ni] == Yes {
			rp := &r.Reps[ni]
			recs[li] = toRecords(rp.F, rp.Now, s.T-rp.At, rp.At-r.Began)
			answered = true
		}
	}
	if !answered {
		// Nothing recorded: the next attempt records first, as the
		// first did.
		r.Phase, r.Has = recIdle, false
		cl.Phase = Idle
		return true
	}
	plan := joint.Decide(sets, recs, joint.Params{MaxTTL: m.Cfg.Clients[ci].MaxTTL, FenceTTL: m.Cfg.FenceTTL}, m.jointMut())
	r.PConflict, r.PFloor, r.PSaw = plan.Conflict != nil, plan.Floor, m.saw(s, ci, recs)
	mut := &m.Cfg.Mut
	if mut.FoldNoConflict {
		r.PConflict = false
	}
	if mut.FoldNoFloor {
		r.PFloor = 0
	}
	if plan.Write && !mut.FoldNoFloor {
		m.recordRound(s, ci, recWriting, func(li int) *RecWrite {
			return &RecWrite{Keep: plan.Writes[li].Keep, Raise: plan.Writes[li].Raise}
		})
		cl.AcqLeft++ // made again once the record is over
		cl.Phase = Checking
		return true
	}
	m.finishRecord(s, ci)
	cl.Saw = r.Saw
	if r.Conflict {
		cl.Phase = Idle // ErrConfigConflict: the round is given back
		return true
	}
	return false
}

// FirstObtain is how client ci's first obtain ended (PlayFirstObtain).
type FirstObtain struct {
	Granted     bool
	Token       int64
	Conflict    bool // ErrConfigConflict
	RecordFirst bool // the folded record called for writes first
}

// PlayFirstObtain plays client ci's first obtain from s, on nodes that
// answer at once, in order, with no fault and no time passing: every
// request is run and answered, then the recorder and the client step,
// until the client holds, or is idle again with nothing in flight. The
// library's differential test of the fold (TestFoldedRecordMatchesModel,
// root package) plays the same records through both. It returns an error
// when the obtain has not ended after 1,000 steps (a model that loops).
func (m *Model) PlayFirstObtain(s *State, ci int) (FirstObtain, error) {
	var out FirstObtain
	cl := &s.Clients[ci]
	for range 1000 {
		progressed := false
		for _, st := range m.Enabled(s) {
			if (st.Kind == StepProcess || st.Kind == StepDeliver) && st.Client == m.conn(ci) {
				m.apply(s, st)
				progressed = true
				break
			}
		}
		if progressed {
			continue
		}
		if cl.Rec.Phase == recWriting {
			out.RecordFirst = true
			m.recordStep(s, ci)
			continue
		}
		phase := cl.Phase
		if phase == Holding {
			out.Granted, out.Token = true, cl.Token
			return out, nil
		}
		if phase == Idle && cl.Started {
			out.Conflict = cl.Rec.Conflict
			return out, nil
		}
		m.clientStep1(s, ci)
	}
	return out, fmt.Errorf("model: client %d's first obtain did not end in 1,000 steps (phase %v, recorder phase %v)", ci, cl.Phase, cl.Rec.Phase)
}
