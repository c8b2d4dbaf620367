package model

// Configuration records in the model: record.lua's Go twin on the nodes
// (held to the script by TestRecordTwinMatchesScript), and each client's
// recorder, which runs the library's record rounds (joint.go's
// engine.record) as messages: a read round that writes the client's own
// field and returns every live field, the decision of internal/joint's
// Decide on those replies, and a write round of what it decided. An
// obtain records first when the last record is RecordStale old (waiting
// for a quorum of the read round); the recorder records every MaxTTL/4 on
// its own (waiting for every node up to the node timeout), at the latest
// MaxTTL/2 after the last (time does not pass beyond that: the library's
// documented pause bound). Late replies of a read round are dropped (the
// library checks them for a conflict: not modelled).

import (
	"fmt"

	"github.com/redlock-go/redlock/internal/joint"
	"github.com/redlock-go/redlock/internal/keys"
)

// ReqRecord is record.lua (Msg.Rec carries its writes, the reply's
// Msg.Recs the node's fields).
const ReqRecord = ReqRelease + 1

// StepRecord is a client's recorder: it starts a round of its own, or
// decides the round under way.
const StepRecord = StepSync + 1

// Checking is the phase of a client whose obtain waits for its record
// round (the library's checkConfig).
const Checking = Done + 1

// The fingerprints of the model's sets A and B, and the fields of their
// records, by index in Node.Conf.
const fpA, fpB = "A", "B"

var confFields = [nConf]string{
	keys.ConfigSingle(fpA), keys.ConfigSingle(fpB), keys.ConfigJoint(fpA, fpB),
	keys.ConfigSeen(fpA), keys.ConfigSeen(fpB), keys.ConfigFloor(fpB),
}

const nConf = 6

func confIndex(name string) int {
	for i, f := range confFields {
		if f == name {
			return i
		}
	}
	panic("model: no record field " + name)
}

// ConfField is a field of a node's configuration record: its expiry (node
// time; 0: absent) and a move floor's M and V.
type ConfField struct{ Exp, M, V int64 }

// ConfFields are a node's configuration record.
type ConfFields [nConf]ConfField

// RecWrite is what a record request writes (record.lua's arguments).
type RecWrite struct {
	Keep  []joint.Keep
	Raise []joint.Raise
}

// Recorder phases.
const (
	recIdle = iota
	recReading
	recWriting
)

// Recorder is a client's configuration records (the library's recorder).
type Recorder struct {
	Phase int
	Round int
	All   bool  // the round waits for every node (the recorder's own)
	Began int64 // real time the record's read round started
	Start int64 // real time the round under way started
	Has   bool  // a record has started: the recorder runs
	Last  int64 // Began of the last finished record
	Votes []int8
	Reps  []RecReply
	// Conflict and Floor are the last record's (the floor only rises);
	// PConflict and PFloor those of the record under way.
	Conflict, PConflict bool
	Floor, PFloor       int64
}

// RecReply is a node's reply to a record request and its arrival.
type RecReply struct {
	Now, At int64
	F       ConfFields
}

// records reports whether client ci keeps configuration records.
func (m *Model) records(ci int) bool { return m.Cfg.Clients[ci].Conf != 0 }

// recordPeriod is the recorder's period, MaxTTL/4 (at least a tick).
func (m *Model) recordPeriod(ci int) int64 { return max(1, m.Cfg.Clients[ci].MaxTTL/4) }

// recordTwin is record.lua on node time now: keep the fields of w.Keep
// alive, raise the floors of w.Raise (first writer wins with the
// FirstWriterFloor mutant, record.lua before issue 33), drop the expired
// fields.
func recordTwin(f *ConfFields, now int64, w *RecWrite, firstWriter bool) {
	for _, k := range w.Keep {
		i := confIndex(k.Name)
		if exp := now + max(k.TTL, 1); f[i].Exp < exp {
			f[i] = ConfField{Exp: exp}
		}
	}
	for _, r := range w.Raise {
		i := confIndex(r.Name)
		live := f[i].Exp > now
		if firstWriter {
			if !live {
				f[i] = ConfField{Exp: now + max(r.TTL, 1), M: now}
			}
			continue
		}
		var old ConfField
		if live {
			old = f[i]
		}
		mm := max(old.M, now+max(r.Ahead, 0))
		v := old.V
		if r.Until > 0 {
			v = max(v, r.Until)
		}
		f[i] = ConfField{Exp: max(old.Exp, mm+max(r.TTL, 1)), M: mm, V: v}
	}
	for i := range f {
		if f[i].Exp != 0 && f[i].Exp <= now {
			f[i] = ConfField{}
		}
	}
}

// toRecords is a node's record as internal/joint reads it, age ticks
// after now, in a round that started since ticks before now.
func toRecords(f *ConfFields, now, age, since int64) *joint.Records {
	rc := &joint.Records{Now: now, Start: now - since, Fields: map[string]joint.Value{}}
	for i, v := range f {
		left := v.Exp - now - age
		if v.Exp == 0 || left <= 0 {
			continue
		}
		jv := joint.Value{Left: left, Floor: v.M}
		if v.V != 0 {
			jv.Fresh = v.V - now - age
		}
		rc.Fields[confFields[i]] = jv
	}
	return rc
}

// nodeRecords is node ni's record as a read of it now returns it.
func (m *Model) nodeRecords(s *State, ni int) *joint.Records {
	n := &s.Nodes[ni]
	now := s.T + n.Offset
	f := n.Conf
	recordTwin(&f, now, &RecWrite{}, false)
	return toRecords(&f, now, 0, 0)
}

// jointMut is the mutant of internal/joint that the model's mutant
// selects.
func (m *Model) jointMut() joint.Mut {
	mut := &m.Cfg.Mut
	return joint.Mut{FirstWriterFloor: mut.FirstWriterFloor, JointNoFloor: mut.JointNoFloor, JointNoConflict: mut.JointNoConflict}
}

// nodesOf are client ci's nodes, in the order of its records, and its
// sets as masks of that order (the library's engine.nodes and sets).
func (m *Model) nodesOf(ci int) ([]int, joint.Sets) {
	c := &m.Cfg
	var nodes []int
	var a, b uint64
	for ni := range c.Nodes {
		if !m.member(ci, ni) {
			continue
		}
		bit := uint64(1) << len(nodes)
		if c.SetA&(1<<ni) != 0 {
			a |= bit
		}
		if c.SetB&(1<<ni) != 0 {
			b |= bit
		}
		nodes = append(nodes, ni)
	}
	all := uint64(1)<<len(nodes) - 1
	switch c.Clients[ci].Conf {
	case ConfA:
		return nodes, joint.Sets{Cur: all, CurFP: fpA, Known: true}
	case ConfB:
		return nodes, joint.Sets{Cur: all, CurFP: fpB, Known: true}
	}
	return nodes, joint.Sets{Cur: a, Next: b, CurFP: fpA, NextFP: fpB, Known: true}
}

// startRecord starts a record (its read round) of client ci.
func (m *Model) startRecord(s *State, ci int, all bool) {
	cl := &s.Clients[ci]
	r := &cl.Rec
	if r.Votes == nil {
		r.Votes = make([]int8, m.Cfg.Nodes)
		r.Reps = make([]RecReply, m.Cfg.Nodes)
	}
	r.Has, r.All, r.Began = true, all, s.T
	_, sets := m.nodesOf(ci)
	own := &RecWrite{Keep: []joint.Keep{{Name: sets.Own()[0], TTL: joint.RecordTTL(m.Cfg.Clients[ci].MaxTTL)}}}
	m.recordRound(s, ci, recReading, func(int) *RecWrite { return own })
}

// recordRound sends a round of record requests.
func (m *Model) recordRound(s *State, ci, phase int, w func(li int) *RecWrite) {
	c := &m.Cfg
	r := &s.Clients[ci].Rec
	r.Phase, r.Start = phase, s.T
	r.Round++
	nodes, _ := m.nodesOf(ci)
	for i := range r.Votes {
		r.Votes[i] = No
		r.Reps[i] = RecReply{}
	}
	for li, ni := range nodes {
		r.Votes[ni] = Pending
		cn := &s.Conns[m.conn(ci)*c.Nodes+ni]
		cn.Req = append(cn.Req, Msg{Kind: ReqRecord, Actor: ci, Round: r.Round, Rec: w(li)})
	}
}

// processRecord runs a record request on node ni: record.lua, which
// passes the restart guard first (a recovering node answers Recovering
// and changes nothing).
func (m *Model) processRecord(s *State, ni int, req Msg) Msg {
	n := &s.Nodes[ni]
	now := s.T + n.Offset
	if rec, _ := n.Data.Epoch(n.env(s.T, m.Cfg.Second), m.guard(req.Actor), m.Cfg.Mut); rec > 0 {
		return Msg{Kind: ReqRecord, Actor: req.Actor, Round: req.Round, Status: Recovering}
	}
	recordTwin(&n.Conf, now, req.Rec, m.Cfg.Mut.FirstWriterFloor)
	f := n.Conf
	return Msg{Kind: ReqRecord, Actor: req.Actor, Round: req.Round, N: now, Recs: &f}
}

// deliverRecord hands a record reply to its client's recorder.
func (m *Model) deliverRecord(s *State, ni int, rep Msg) {
	r := &s.Clients[rep.Actor].Rec
	if rep.Round != r.Round || r.Phase == recIdle || r.Votes[ni] != Pending || m.recDecided(s, rep.Actor) {
		return // late
	}
	if rep.Status == Recovering {
		r.Votes[ni] = No
		return
	}
	r.Votes[ni] = Yes
	r.Reps[ni] = RecReply{Now: rep.N, At: s.T, F: *rep.Recs}
}

// recDecided: the read round of an obtain has its quorum (the plain
// lock's rule of the client's sets; quorum.Round stops reading).
func (m *Model) recDecided(s *State, ci int) bool {
	r := &s.Clients[ci].Rec
	if r.Phase != recReading || r.All {
		return false
	}
	var yes uint64
	for i, v := range r.Votes {
		if v == Yes {
			yes |= 1 << i
		}
	}
	c := &m.Cfg
	in := func(set uint64) bool { return bits64(yes&set) >= bits64(set)/2+1 }
	switch c.Clients[ci].Conf {
	case ConfA:
		return in(c.SetA)
	case ConfB:
		return in(c.SetB)
	}
	return in(c.SetA) && in(c.SetB)
}

func bits64(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// recDecidable: the round under way can be decided.
func (m *Model) recDecidable(s *State, ci int) bool {
	r := &s.Clients[ci].Rec
	if r.Phase == recIdle {
		return false
	}
	pending := false
	for _, v := range r.Votes {
		if v == Pending {
			pending = true
		}
	}
	return !pending || s.T >= r.Start+m.Cfg.NodeTimeout || m.recDecided(s, ci)
}

// recordCan reports whether client ci's recorder has a step: decide its
// round, or start one of its own (the client is not closed, and its
// period has passed since its last record).
func (m *Model) recordCan(s *State, ci int) bool {
	if !m.records(ci) {
		return false
	}
	cl := &s.Clients[ci]
	r := &cl.Rec
	if r.Phase != recIdle {
		return m.recDecidable(s, ci)
	}
	return cl.Phase != Done && cl.Phase != Checking && r.Has && s.T >= r.Last+m.recordPeriod(ci)
}

// recordDue reports whether some recorder must start a round before time
// passes: MaxTTL/2 since its last record.
func (m *Model) recordDue(s *State) bool {
	for ci := range s.Clients {
		cl := &s.Clients[ci]
		r := &cl.Rec
		if m.records(ci) && cl.Phase != Done && r.Has && r.Phase == recIdle && s.T >= r.Last+2*m.recordPeriod(ci) {
			return true
		}
	}
	return false
}

// recordStep is a recorder's step.
func (m *Model) recordStep(s *State, ci int) {
	c := &m.Cfg
	cs := c.Clients[ci]
	r := &s.Clients[ci].Rec
	switch r.Phase {
	case recIdle:
		m.startRecord(s, ci, true)
	case recReading:
		nodes, sets := m.nodesOf(ci)
		recs := make([]*joint.Records, len(nodes))
		for li, ni := range nodes {
			if r.Votes[ni] == Yes {
				rp := &r.Reps[ni]
				recs[li] = toRecords(&rp.F, rp.Now, s.T-rp.At, rp.At-r.Began)
			}
		}
		answered := false
		for _, rc := range recs {
			answered = answered || rc != nil
		}
		if !answered {
			r.Phase = recIdle
			return
		}
		plan := joint.Decide(sets, recs, joint.Params{MaxTTL: cs.MaxTTL, FenceTTL: c.FenceTTL}, m.jointMut())
		r.PConflict, r.PFloor = plan.Conflict != nil, plan.Floor
		if !plan.Write {
			m.finishRecord(s, ci)
			return
		}
		m.recordRound(s, ci, recWriting, func(li int) *RecWrite {
			return &RecWrite{Keep: plan.Writes[li].Keep, Raise: plan.Writes[li].Raise}
		})
	case recWriting:
		nodes, sets := m.nodesOf(ci)
		recs := make([]*joint.Records, len(nodes))
		for li, ni := range nodes {
			if r.Votes[ni] == Yes {
				rp := &r.Reps[ni]
				recs[li] = toRecords(&rp.F, rp.Now, s.T-rp.At, rp.At-r.Began)
			}
		}
		r.PFloor = max(r.PFloor, joint.FloorOf(recs, sets.CurFP))
		m.finishRecord(s, ci)
	}
}

// finishRecord ends a record: its conflict and floor become the client's.
func (m *Model) finishRecord(s *State, ci int) {
	r := &s.Clients[ci].Rec
	if !r.PConflict {
		r.Floor = max(r.Floor, r.PFloor)
	}
	r.Conflict, r.Last, r.Phase = r.PConflict, r.Began, recIdle
}

// checkConfig is an obtain's check (the library's checkConfig), before an
// attempt of client ci: it starts a record when the last is stale (also
// when the record it just waited for started RecordStale ago or more) and
// reports that the attempt waits for it (Checking).
func (m *Model) checkConfig(s *State, ci int) bool {
	cl := &s.Clients[ci]
	r := &cl.Rec
	if !m.records(ci) || (r.Has && s.T-r.Last < joint.RecordStale(m.Cfg.Clients[ci].MaxTTL)) {
		return false
	}
	m.startRecord(s, ci, false)
	cl.Phase = Checking
	return true
}

// describeRecord says what a step of the records does.
func (m *Model) describeRecord(s *State, st Step) (string, bool) {
	c := &m.Cfg
	at := fmt.Sprintf("t=%d ", s.T)
	who := string(rune('A' + st.Client))
	switch st.Kind {
	case StepRecord:
		r := &s.Clients[st.Client].Rec
		switch r.Phase {
		case recIdle:
			return at + who + "'s recorder sends its record to its nodes", true
		case recReading:
			return at + who + "'s recorder decides its record round (internal/joint.Decide)", true
		}
		return at + who + "'s recorder ends its write round", true
	case StepProcess:
		q := s.Conns[st.Client*c.Nodes+st.Node].Req[0]
		if q.Kind != ReqRecord {
			return "", false
		}
		n := &s.Nodes[st.Node]
		f := n.Conf
		recordTwin(&f, s.T+n.Offset, q.Rec, c.Mut.FirstWriterFloor)
		return fmt.Sprintf("%sn%d (clock %d) runs %s's record %+v: %s", at, st.Node+1, s.T+n.Offset, string(rune('A'+q.Actor)), *q.Rec, confString(&f)), true
	case StepDeliver:
		q := s.Conns[st.Client*c.Nodes+st.Node].Rep[0]
		if q.Kind != ReqRecord {
			return "", false
		}
		return fmt.Sprintf("%s%s's recorder receives n%d's records", at, string(rune('A'+q.Actor)), st.Node+1), true
	case StepClient:
		if s.Clients[st.Client].Phase == Checking {
			return at + who + "'s obtain reads its record's conflict", true
		}
	}
	return "", false
}

func confString(f *ConfFields) string {
	out := ""
	for i, v := range f {
		if v.Exp == 0 {
			continue
		}
		out += fmt.Sprintf(" %s=%d", confFields[i], v.Exp)
		if v.M != 0 || v.V != 0 {
			out += fmt.Sprintf(":%d:%d", v.M, v.V)
		}
	}
	return "{" + out + " }"
}

// hashRec adds a record request's writes to a state's hash.
func hashRec(v func(int64), w *RecWrite) {
	if w == nil {
		v(-1)
		return
	}
	for _, k := range w.Keep {
		v(int64(confIndex(k.Name)))
		v(k.TTL)
	}
	v(-2)
	for _, r := range w.Raise {
		v(int64(confIndex(r.Name)))
		v(r.Ahead)
		v(r.Until)
		v(r.TTL)
	}
}

func init() { kindName[ReqRecord] = "record" }
