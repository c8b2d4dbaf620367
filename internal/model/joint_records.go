package model

// Configuration records in the model: record.lua's Go twin on the nodes
// (held to the script by TestRecordTwinMatchesScript), and each client's
// recorder, which runs the library's record rounds (joint.go's
// recorder.record) as messages: a read round that writes the client's own
// field and returns every live field, the decision of internal/joint's
// Decide on those replies, and a write round of what it decided. An
// obtain records first when the last record is RecordStale old (waiting
// for a quorum of the read round), but for a first obtain on one set,
// whose acquire carries its first record (fold_records.go); the recorder records every MaxTTL/4 on
// its own (waiting for every node up to the node timeout), at the latest
// MaxTTL/2 after the last (time does not pass beyond that: the library's
// documented pause bound). Late replies of a read round are dropped (the
// library checks them for a conflict: not modelled).

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/redlock-go/redlock/internal/joint"
)

// ConfField is a field of a node's configuration record: its name (c:FP,
// j:FPA:FPB, s:FP or m:FP), its expiry (node time) and a move floor's M
// and V.
type ConfField struct {
	Name      string
	Exp, M, V int64
}

// ConfFields are a node's configuration record, sorted by name. A record
// is never changed in place (recordTwin makes a new one), so that states
// and a node's snapshot or replica share it; nil is an empty record.
type ConfFields []ConfField

// field returns the field called name.
func (f *ConfFields) field(name string) ConfField {
	if f != nil {
		for _, v := range *f {
			if v.Name == name {
				return v
			}
		}
	}
	return ConfField{Name: name}
}

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
	// PConflict and PFloor those of the record under way. Saw (PSaw) are
	// the clients whose evidence it showed beside a move linking them to
	// this client's sets (runbook.go): not the library's, the model's
	// record of what the conflict rule had before it.
	Conflict, PConflict bool
	Floor, PFloor       int64
	Saw, PSaw           uint64
}

// RecReply is a node's reply to a record request and its arrival.
type RecReply struct {
	Now, At int64
	F       *ConfFields
}

// records reports whether client ci keeps configuration records.
func (m *Model) records(ci int) bool { return m.Cfg.Clients[ci].Conf != 0 }

// recordPeriod is the recorder's period, MaxTTL/4 (at least a tick).
func (m *Model) recordPeriod(ci int) int64 { return max(1, m.Cfg.Clients[ci].MaxTTL/4) }

// recordTwin is record.lua on node time now: keep the fields of w.Keep
// alive, raise the floors of w.Raise (first writer wins with the
// FirstWriterFloor mutant, record.lua before issue 33), drop the expired
// fields. It returns the record after the script (f is not changed).
func recordTwin(f *ConfFields, now int64, w *RecWrite, firstWriter bool) *ConfFields {
	out := ConfFields{}
	if f != nil {
		out = slices.Clone(*f)
	}
	at := func(name string) *ConfField {
		for i := range out {
			if out[i].Name == name {
				return &out[i]
			}
		}
		out = append(out, ConfField{Name: name})
		return &out[len(out)-1]
	}
	for _, k := range w.Keep {
		if v, exp := at(k.Name), now+max(k.TTL, 1); v.Exp < exp {
			*v = ConfField{Name: k.Name, Exp: exp}
		}
	}
	for _, r := range w.Raise {
		v := at(r.Name)
		live := v.Exp > now
		if firstWriter {
			if !live {
				*v = ConfField{Name: r.Name, Exp: now + max(r.TTL, 1), M: now}
			}
			continue
		}
		var old ConfField
		if live {
			old = *v
		}
		mm := max(old.M, now+max(r.Ahead, 0))
		until := old.V
		if r.Until > 0 {
			until = max(until, r.Until)
		}
		*v = ConfField{Name: r.Name, Exp: max(old.Exp, mm+max(r.TTL, 1)), M: mm, V: until}
	}
	out = slices.DeleteFunc(out, func(v ConfField) bool { return v.Exp <= now })
	slices.SortFunc(out, func(a, b ConfField) int { return strings.Compare(a.Name, b.Name) })
	if len(out) == 0 {
		return nil
	}
	return &out
}

// toRecords is a node's record as internal/joint reads it, age ticks
// after now, in a round that started since ticks before now.
func toRecords(f *ConfFields, now, age, since int64) *joint.Records {
	rc := &joint.Records{Now: now, Start: now - since, Fields: map[string]joint.Value{}}
	if f == nil {
		return rc
	}
	for _, v := range *f {
		left := v.Exp - now - age
		if left <= 0 {
			continue
		}
		jv := joint.Value{Left: left, Floor: v.M}
		if v.V != 0 {
			jv.Fresh = v.V - now - age
		}
		rc.Fields[v.Name] = jv
	}
	return rc
}

// nodeRecords is node ni's record as a read of it now returns it.
func (m *Model) nodeRecords(s *State, ni int) *joint.Records {
	n := &s.Nodes[ni]
	now := s.T + n.Offset
	return toRecords(n.Data.Conf, now, 0, 0)
}

// jointMut is the mutant of internal/joint that the model's mutant
// selects.
func (m *Model) jointMut() joint.Mut {
	mut := &m.Cfg.Mut
	return joint.Mut{FirstWriterFloor: mut.FirstWriterFloor, JointNoFloor: mut.JointNoFloor, JointNoConflict: mut.JointNoConflict,
		KnownNamesOnly: mut.BySpelling}
}

// nodesOf are client ci's nodes, in the order of its records, and its
// sets as masks of that order (the library's engine.nodes and sets).
func (m *Model) nodesOf(s *State, ci int) ([]int, joint.Sets) {
	c := &m.Cfg
	cur, next := c.setsOf(c.Clients[ci].Conf)
	var nodes []int
	var a, b uint64
	for ni := range c.Nodes {
		if !m.member(ci, ni) {
			continue
		}
		bit := uint64(1) << len(nodes)
		if cur&(1<<ni) != 0 {
			a |= bit
		}
		if next&(1<<ni) != 0 {
			b |= bit
		}
		nodes = append(nodes, ni)
	}
	cl := &s.Clients[ci]
	n := &cl.Names
	known := true
	if m.foldRecords(ci) { // nodes still silent stand in by address
		for _, ni := range nodes {
			known = known && cl.IDs[ni] != 0
		}
	}
	return nodes, joint.Sets{Cur: a, Next: b, CurFP: n.Cur, NextFP: n.Next, CurAlias: n.CurAlias, NextAlias: n.NextAlias, Known: known}
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
	m.contact(s, ci)
	_, sets := m.nodesOf(s, ci)
	own := &RecWrite{}
	for _, f := range sets.Own() {
		own.Keep = append(own.Keep, joint.Keep{Name: f, TTL: joint.RecordTTL(m.Cfg.Clients[ci].MaxTTL)})
	}
	m.recordRound(s, ci, recReading, func(int) *RecWrite { return own })
}

// recordRound sends a round of record requests.
func (m *Model) recordRound(s *State, ci, phase int, w func(li int) *RecWrite) {
	c := &m.Cfg
	r := &s.Clients[ci].Rec
	r.Phase, r.Start = phase, s.T
	r.Round++
	nodes, _ := m.nodesOf(s, ci)
	for i := range r.Votes {
		r.Votes[i] = No
		r.Reps[i] = RecReply{}
	}
	for li, ni := range nodes {
		r.Votes[ni] = Pending
		cn := &s.Conns[m.conn(ci)*c.Nodes+ni]
		cn.Req = append(cn.Req, Msg{Kind: ReqRecord, Actor: ci, Round: r.Round, Rec: w(li), Node: s.Clients[ci].IDs[ni]})
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
	if m.otherNode(s, ni, req) { // after the guard, as epoch.lua's epoch
		return Msg{Kind: ReqRecord, Actor: req.Actor, Round: req.Round, Status: OtherNode}
	}
	n.Data.Conf = recordTwin(n.Data.Conf, now, req.Rec, m.Cfg.Mut.FirstWriterFloor)
	s.Version++
	return Msg{Kind: ReqRecord, Actor: req.Actor, Round: req.Round, N: now, Recs: n.Data.Conf}
}

// deliverRecord hands a record reply to its client's recorder.
func (m *Model) deliverRecord(s *State, ni int, rep Msg) {
	r := &s.Clients[rep.Actor].Rec
	if rep.Status == OtherNode {
		s.Clients[rep.Actor].Unknown |= 1 << ni // to identify again (identity.go)
	}
	if rep.Round != r.Round || r.Phase == recIdle || r.Votes[ni] != Pending || m.recDecided(s, rep.Actor) {
		return // late
	}
	if rep.Status == Recovering || rep.Status == OtherNode {
		r.Votes[ni] = No
		return
	}
	r.Votes[ni] = Yes
	r.Reps[ni] = RecReply{Now: rep.N, At: s.T, F: rep.Recs}
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
	if r.Phase == recFolded {
		return false // the acquire round decides it (decideFolded)
	}
	if r.Phase != recIdle {
		return m.recDecidable(s, ci)
	}
	return cl.Phase != Done && cl.Phase != Checking && r.Has && s.T >= r.Last+m.recordPeriod(ci)
}

// recordDue reports whether some recorder must act before time passes:
// start a round, MaxTTL/2 after its last record began; or decide the
// round under way, once its node timeout has passed (the library's round
// returns by its timeout). So a record starts at most MaxTTL/2 after the
// one before, as the library's recorder does (every MaxTTL/4, a round
// taking twice the node timeout at most, and a pause of up to MaxTTL/4,
// the documented bound).
func (m *Model) recordDue(s *State) bool {
	for ci := range s.Clients {
		cl := &s.Clients[ci]
		r := &cl.Rec
		if !m.records(ci) || cl.Phase == Done || !r.Has {
			continue
		}
		if r.Phase == recIdle && s.T >= r.Last+2*m.recordPeriod(ci) {
			return true
		}
		if r.Phase != recIdle && r.Phase != recFolded && s.T >= r.Start+m.Cfg.NodeTimeout {
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
		nodes, sets := m.nodesOf(s, ci)
		recs := make([]*joint.Records, len(nodes))
		for li, ni := range nodes {
			if r.Votes[ni] == Yes {
				rp := &r.Reps[ni]
				recs[li] = toRecords(rp.F, rp.Now, s.T-rp.At, rp.At-r.Began)
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
		r.PConflict, r.PFloor, r.PSaw = plan.Conflict != nil, plan.Floor, m.saw(s, ci, recs)
		if !plan.Write {
			m.finishRecord(s, ci)
			return
		}
		m.recordRound(s, ci, recWriting, func(li int) *RecWrite {
			return &RecWrite{Keep: plan.Writes[li].Keep, Raise: plan.Writes[li].Raise}
		})
	case recWriting:
		nodes, sets := m.nodesOf(s, ci)
		recs := make([]*joint.Records, len(nodes))
		for li, ni := range nodes {
			if r.Votes[ni] == Yes {
				rp := &r.Reps[ni]
				recs[li] = toRecords(rp.F, rp.Now, s.T-rp.At, rp.At-r.Began)
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
	r.Conflict, r.Saw, r.Last, r.Phase = r.PConflict, r.PSaw, r.Began, recIdle
}

// checkConfig is an obtain's check (the library's recorder.check), before an
// attempt of client ci: it starts a record when the last is stale (also
// when the record it just waited for started RecordStale ago or more) and
// reports that the attempt waits for it (Checking).
func (m *Model) checkConfig(s *State, ci int) bool {
	cl := &s.Clients[ci]
	r := &cl.Rec
	if !m.records(ci) || (r.Has && s.T-r.Last < joint.RecordStale(m.Cfg.Clients[ci].MaxTTL)) {
		return false
	}
	if m.Cfg.Clients[ci].Resume > 0 && m.Cfg.Mut.ResumeUnrecorded {
		return false // Resume skips the admission: no record, no recorder
	}
	if !r.Has && cl.AcqLeft > 0 && m.foldRecords(ci) {
		return false // the first record rides on the obtain's acquire (foldFirst)
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
		f := recordTwin(n.Data.Conf, s.T+n.Offset, q.Rec, c.Mut.FirstWriterFloor)
		return fmt.Sprintf("%sn%d (clock %d) runs %s's record %+v: %s", at, st.Node+1, s.T+n.Offset, string(rune('A'+q.Actor)), *q.Rec, confString(f)), true
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
	if f == nil {
		return "{ }"
	}
	for _, v := range *f {
		out += fmt.Sprintf(" %s=%d", v.Name, v.Exp)
		if v.M != 0 || v.V != 0 {
			out += fmt.Sprintf(":%d:%d", v.M, v.V)
		}
	}
	return "{" + out + " }"
}

// hashRec adds a record request's writes to a state's hash.
func hashRec(h *hasher, w *RecWrite) {
	if w == nil {
		h.v(-1)
		return
	}
	for _, k := range w.Keep {
		hashString(h, k.Name)
		h.v(k.TTL)
	}
	h.v(-2)
	for _, r := range w.Raise {
		hashString(h, r.Name)
		h.v(r.Ahead)
		h.v(r.Until)
		h.v(r.TTL)
	}
}

// hashString adds a string to a state's hash.
func hashString(h *hasher, x string) {
	h.v(int64(len(x)))
	for i := 0; i < len(x); i += 8 {
		var w [8]byte
		copy(w[:], x[i:])
		h.v(int64(binary.LittleEndian.Uint64(w[:])))
	}
}

// hashConf adds a configuration record to a state's hash.
func hashConf(h *hasher, f *ConfFields) {
	if f == nil {
		h.v(-1)
		return
	}
	h.v(int64(len(*f)))
	for _, x := range *f {
		hashString(h, x.Name)
		h.v(x.Exp)
		h.v(x.M)
		h.v(x.V)
	}
}
