// Package joint holds the decisions of a configuration record round
// (docs/reconfiguration.md, "Making step 2 checkable" and "Tokens across
// the move"): given the records each node returned and the Client's node
// sets, what to write where, the conflict, and the move floor; and the
// "step 3 is safe" rule that redlock doctor applies to the records. The
// library's joint.go, redlock doctor and the model checker
// (internal/model) all call these functions, so that the three cannot
// part.
//
// Times are integers in the caller's unit: milliseconds of node time in
// the library, ticks in the model.
package joint

import (
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/script"
)

// Value is a live field of a configuration record on one node.
type Value struct {
	// Left is how long the field has left on the node, as of the
	// decision (the library subtracts the time since the reply arrived).
	Left int64
	// Floor is a move floor's M (node time); 0 for other fields.
	Floor int64
	// Fresh is, for a move floor, how long is left before its V (node
	// time): until then, a read of every node that finds no evidence of
	// a Client of the old set alone shows that the floor covers every
	// grant of such a Client (StepThree). ≤ 0: not fresh.
	Fresh int64
}

// Records are one node's live fields and its time, as a record round
// returned them. Start is the node's time at the round's start as the
// Client can bound it: Now less the time from the round's start to the
// reply's arrival (at most the node's time then).
type Records struct {
	Now    int64
	Start  int64
	Fields map[string]Value
}

// FromScript are a node's records as record.lua returned them (rc), in
// milliseconds, each field's life counted from now: the reply arrived age
// ago, after from the round's start.
func FromScript(rc *script.Records, age, after time.Duration) *Records {
	out := &Records{Now: rc.Now, Start: rc.Now - after.Milliseconds() - 1,
		Fields: make(map[string]Value, len(rc.Fields))}
	for f, v := range rc.Fields {
		jv := Value{Left: (v.Left - age).Milliseconds(), Floor: v.Floor}
		if v.Fresh != 0 {
			jv.Fresh = v.Fresh - rc.Now - age.Milliseconds()
		}
		if jv.Left > 0 {
			out.Fields[f] = jv
		}
	}
	return out
}

// Sets are a Client's node sets, as masks of its nodes (node i is bit i
// of the slice of Records given to Decide), and their fingerprints. Next
// is 0 unless the Client is in joint configuration.
type Sets struct {
	Cur, Next     uint64
	CurFP, NextFP string
	// Known is set when every node of the sets was identified, so that
	// CurFP and NextFP are the sets' fingerprints (keys.Fingerprint of
	// the nodes' identities). Until then an address stands in for a node,
	// and another Client of the same sets may name them otherwise: Decide
	// then reads the records conservatively.
	Known bool
	// CurAlias and NextAlias are the sets' fingerprints by address, as
	// releases before issue 44 named them ("": none). A Client writes its
	// own fields under them too, raises the move floor under them too,
	// and counts them as its own sets, so that Clients of both releases
	// see each other on the same nodes (docs/reconfiguration.md, "Mixed
	// versions").
	CurAlias, NextAlias string
}

// isCur and isNext report whether fp names the current (next) set: its
// fingerprint or its alias.
func (s Sets) isCur(fp string) bool { return fp == s.CurFP || (s.CurAlias != "" && fp == s.CurAlias) }
func (s Sets) isNext(fp string) bool {
	return s.Joint() && (fp == s.NextFP || (s.NextAlias != "" && fp == s.NextAlias))
}

// names are the fingerprint and the alias of a set ("" left out).
func names(fp, alias string) []string {
	if alias == "" || alias == fp {
		return []string{fp}
	}
	return []string{fp, alias}
}

// Joint reports whether the Client moves from Cur to Next.
func (s Sets) Joint() bool { return s.Next != 0 }

// Own are the Client's own fields: c:FP, or j:FPA:FPB in joint
// configuration, and the same under the sets' aliases.
func (s Sets) Own() []string {
	if s.Joint() {
		out := []string{keys.ConfigJoint(s.CurFP, s.NextFP)}
		if s.CurAlias != "" && s.NextAlias != "" {
			out = append(out, keys.ConfigJoint(s.CurAlias, s.NextAlias))
		}
		return out
	}
	out := []string{keys.ConfigSingle(s.CurFP)}
	if s.CurAlias != "" {
		out = append(out, keys.ConfigSingle(s.CurAlias))
	}
	return out
}

// RecordTTL is how long a Client's own field lives from its write: a lock
// obtained before the Client's next record (within RecordStale) has
// expired before it does.
func RecordTTL(maxTTL int64) int64 { return maxTTL + RecordStale(maxTTL) }

// RecordStale is the age of a Client's last record past which an obtain
// records before it locks.
func RecordStale(maxTTL int64) int64 { return maxTTL / 2 }

// Params are the times a decision needs.
type Params struct {
	MaxTTL   int64
	FenceTTL int64
}

// Keep is a field to keep alive for TTL (record.lua's first kind).
type Keep struct {
	Name string
	TTL  int64
}

// Raise is a move floor to raise (record.lua's second kind): M to at
// least now + Ahead, V to at least Until (a node time; 0: none), and the
// field's life to at least M + TTL. Until is absolute so that a write
// delivered late does not make the floor look fresher than the round
// that read the records.
type Raise struct {
	Name  string
	Ahead int64
	Until int64
	TTL   int64
}

// Writes are what one node is given in the write round.
type Writes struct {
	Keep  []Keep
	Raise []Raise
}

// Conflict is the evidence, on node Node, of a live Client that the
// Client must not lock beside (field Field: c:Other, a relay s:Other, or
// a joint Client's j:A:B, Other then "A:B"; with Left to go).
type Conflict struct {
	Node  int
	Field string
	Other string
	Left  int64
	// Unplaced is set when the Client refused because it has not
	// identified all its nodes (Sets.Known false).
	Unplaced bool
}

// Mut selects a mutant of the protocol, for the model checker's mutation
// tests; the library passes the zero value.
type Mut struct {
	// FirstWriterFloor is the protocol before issue 33: a joint Client
	// writes the move floor (first writer wins, M = the node's time) at
	// a round where every node answered and no evidence of a Client of
	// the current set alone is live, and never raises it; a Client on
	// the next set alone writes one the same way when it sees the move
	// and none is there, and takes the largest it reads.
	FirstWriterFloor bool
	// JointNoFloor is issue 44's finding C: a joint Client takes no move
	// floor under its tokens, although it is on its current set, which
	// an earlier move may have gone to.
	JointNoFloor bool
	// JointNoConflict is issue 44's finding D: a joint Client never
	// refuses, although a Client of neither of its sets alone may be
	// alive beside a move that touches one of them.
	JointNoConflict bool
	// KnownNamesOnly is the reading of the records before issue 44's
	// finding E, when a set was named by the spelling of its addresses: a
	// record under a fingerprint the reader does not know is not counted.
	// StepOf does not wait for it (no StepOther), and a joint Client
	// relays and raises the next set's floor by the evidence of its own
	// sets only. The model checker pairs it with fingerprints by spelling
	// (its BySpelling mutant).
	KnownNamesOnly bool
}

// Plan is the decision of a record round.
type Plan struct {
	// Writes are the writes of a second round, per node (nil: none); no
	// node needs any when Write is false.
	Writes []Writes
	Write  bool
	// Conflict is set for a Client that must not lock.
	Conflict *Conflict
	// Floor is the move floor (a node time; 0: none) under the Client's
	// tokens.
	Floor int64
}

// Decide is a record round's decision (the library's recorder.record): recs
// are the records of the Client's nodes (nil for a node that did not
// answer). One rule for every Client, on one set or moving from its
// current set to a next one (docs/reconfiguration.md):
//
//   - It refuses (Conflict) while its nodes show a move that touches one
//     of its sets and a live Client on none of them (Conflicting).
//   - It is on its current set, which an earlier move may have gone to:
//     its floor is the largest move floor of that set it read, and when
//     its nodes show a live move to that set (it runs after step 2 of
//     that move's runbook), the largest node time it read too, which it
//     raises m:CUR to on the current set's nodes when every node answered.
//   - A joint Client also relays the lone Clients it sees (their own
//     fields c:FP, not relays: a relay of a relay would outlive the
//     record) to the nodes of the other set as s:FP, and when every node
//     answered, raises the move floor m:NEXT on the next set's nodes to
//     the node's time plus the longest life left of the evidence of a
//     Client on any set but the next alone (c:FP or s:FP), with V the
//     round's start (the node's Start) plus RecordTTL − MaxTTL.
//
// A fingerprint it does not know (an older release's, a set reached under
// a node's address before its identity was learned) counts against it:
// its evidence raises the floor and is relayed, never ignored.
func Decide(s Sets, recs []*Records, p Params, mut Mut) Plan {
	plan := Plan{Writes: make([]Writes, len(recs))}
	answered := 0
	for _, rc := range recs {
		if rc != nil {
			answered++
		}
	}
	if answered == 0 {
		return plan
	}
	every := answered == len(recs)
	if !s.Known {
		// Its own fingerprints may not be the ones the other Clients
		// of its sets wrote: it cannot tell which evidence is theirs.
		if plan.Conflict = unplaced(recs, s); plan.Conflict != nil {
			return plan
		}
		plan.Floor = anyFloor(recs)
	}
	if s.Known && !(s.Joint() && mut.JointNoConflict) {
		if plan.Conflict = Conflicting(recs, s); plan.Conflict != nil {
			return plan
		}
	}
	if s.Known && !(s.Joint() && mut.JointNoFloor) {
		plan.Floor = s.curFloor(recs, p, every, mut, plan.Writes)
	}
	if s.Joint() {
		s.relay(recs, plan.Writes, mut)
		if every {
			s.raiseNext(recs, p, mut, plan.Writes)
		}
	}
	for _, w := range plan.Writes {
		if len(w.Keep)+len(w.Raise) > 0 {
			plan.Write = true
		}
	}
	return plan
}

// unplaced is the conflict of a Client that has not identified all its
// nodes (Sets.Known false): while its nodes show a move other than its
// own, every live evidence of a Client that is not its own exact field
// may be of a Client it must not lock beside. nil when no move shows.
func unplaced(recs []*Records, s Sets) *Conflict {
	own := s.Own()
	moving := false
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if _, _, ok := keys.ParseConfigJoint(f); ok && !slices.Contains(own, f) {
				moving = true
			}
		}
	}
	if !moving {
		return nil
	}
	for i, rc := range recs {
		if rc == nil {
			continue
		}
		var out *Conflict
		for f, v := range rc.Fields {
			fp, _, alone := keys.ParseConfigAlone(f)
			a, b, isJoint := keys.ParseConfigJoint(f)
			if (!alone && !isJoint) || slices.Contains(own, f) {
				continue
			}
			other := fp
			if isJoint {
				other = a + ":" + b
			}
			if out == nil || v.Left > out.Left || (v.Left == out.Left && f < out.Field) {
				out = &Conflict{Node: i, Field: f, Other: other, Left: v.Left, Unplaced: true}
			}
		}
		if out != nil {
			return out
		}
	}
	return nil
}

// anyFloor is the largest move floor of any set the nodes show: the floor
// of a Client that cannot tell its own sets' fingerprints (Sets.Known
// false). A floor only raises tokens.
func anyFloor(recs []*Records) int64 {
	var m int64
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f, v := range rc.Fields {
			if strings.HasPrefix(f, keys.ConfigFloorPrefix) {
				m = max(m, v.Floor)
			}
		}
	}
	return m
}

// in reports whether node i is in set.
func in(set uint64, i int) bool { return set&(1<<i) != 0 }

// curFloor is the move floor of the current set (a Client on it alone, or
// moving from it): the largest m:CUR, and beside a live move to it the
// largest node time, which it then raises m:CUR to on the current set's
// nodes (into w) when every node answered.
func (s Sets) curFloor(recs []*Records, p Params, every bool, mut Mut, w []Writes) int64 {
	cur := names(s.CurFP, s.CurAlias)
	var floor int64
	moved := false
	for _, fp := range cur {
		floor = max(floor, FloorOf(recs, fp))
		moved = moved || MovedTo(recs, fp)
	}
	raise := func(i int) {
		for _, fp := range cur {
			w[i].Raise = append(w[i].Raise, Raise{Name: keys.ConfigFloor(fp), TTL: p.FenceTTL})
		}
	}
	switch {
	case mut.FirstWriterFloor:
		if floor == 0 && every && moved {
			for i := range recs {
				if in(s.Cur, i) {
					raise(i)
				}
			}
		}
	case moved:
		for i, rc := range recs {
			if rc != nil {
				floor = max(floor, rc.Now)
			}
			if every && in(s.Cur, i) {
				raise(i)
			}
		}
	}
	return floor
}

// relay is a joint Client's relay of the lone Clients it sees: each live
// c:FP onto the nodes of the other set than FP's (the next set's alone,
// for every FP but the next set's; the current set's alone for every FP
// but the current set's), as s:FP.
func (s Sets) relay(recs []*Records, w []Writes, mut Mut) {
	lone := map[string]int64{}
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f, v := range rc.Fields {
			fp, seen, ok := keys.ParseConfigAlone(f)
			if mut.KnownNamesOnly && !s.isCur(fp) && !s.isNext(fp) {
				continue
			}
			if ok && !seen && v.Left > lone[fp] {
				lone[fp] = v.Left
			}
		}
	}
	for _, fp := range sortedKeys(lone) {
		for i := range recs {
			onlyNext := in(s.Next, i) && !in(s.Cur, i)
			onlyCur := in(s.Cur, i) && !in(s.Next, i)
			if (onlyNext && !s.isNext(fp)) || (onlyCur && !s.isCur(fp)) {
				w[i].Keep = append(w[i].Keep, Keep{keys.ConfigSeen(fp), lone[fp]})
			}
		}
	}
}

// raiseNext is a joint Client's raise of the move floor m:NEXT on the next
// set's nodes, at a round that every node answered: to the node's time
// plus the longest life left of the evidence of a Client on any set but
// the next alone.
func (s Sets) raiseNext(recs []*Records, p Params, mut Mut, w []Writes) {
	var ahead int64
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f, v := range rc.Fields {
			fp, _, ok := keys.ParseConfigAlone(f)
			if mut.KnownNamesOnly && !s.isCur(fp) {
				continue
			}
			if ok && !s.isNext(fp) && v.Left > ahead {
				ahead = v.Left
			}
		}
	}
	for i := range recs {
		if !in(s.Next, i) {
			continue
		}
		for _, fp := range names(s.NextFP, s.NextAlias) {
			switch {
			case mut.FirstWriterFloor:
				if Left(recs, s.CurFP, true) == 0 {
					w[i].Raise = append(w[i].Raise, Raise{Name: keys.ConfigFloor(fp), TTL: p.FenceTTL})
				}
			default:
				w[i].Raise = append(w[i].Raise, Raise{Name: keys.ConfigFloor(fp), Ahead: ahead,
					Until: recs[i].Start + RecordTTL(p.MaxTTL) - p.MaxTTL, TTL: p.FenceTTL})
			}
		}
	}
}

// sortedKeys are m's keys in order: one decision whatever the map's order.
func sortedKeys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Left is how long the evidence of a Client on set fp alone (its own
// field c:fp, and with relays a relay s:fp of it) lasts at the most on
// the nodes that answered.
func Left(recs []*Records, fp string, relays bool) int64 {
	fields := []string{keys.ConfigSingle(fp)}
	if relays {
		fields = append(fields, keys.ConfigSeen(fp))
	}
	var left int64
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for _, f := range fields {
			if v, ok := rc.Fields[f]; ok && v.Left > left {
				left = v.Left
			}
		}
	}
	return left
}

// Conflicting returns the evidence of a live Client that the Client of
// sets s must not lock beside: a Client on none of s's sets (its own
// field c:X, a relay s:X, or a joint Client's j:X:Y), where the nodes show
// a live move between one of s's sets and one of that Client's (a joint
// Client's record j:...). nil when there is none. Two Clients that share
// a set share a node of every pair of their quorums (a joint Client holds
// a quorum of each of its sets); two that share none may not. A Client of
// another set that shares a node without a move linking the two is not a
// conflict: nothing says the two are one deployment.
func Conflicting(recs []*Records, s Sets) *Conflict {
	own := func(fp string) bool { return s.isCur(fp) || s.isNext(fp) }
	linked := map[string]bool{}
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if a, b, ok := keys.ParseConfigJoint(f); ok {
				if own(a) && !own(b) {
					linked[b] = true
				}
				if own(b) && !own(a) {
					linked[a] = true
				}
			}
		}
	}
	var out *Conflict
	for i, rc := range recs {
		if rc == nil {
			continue
		}
		for f, v := range rc.Fields {
			other, ok := "", false
			if fp, _, alone := keys.ParseConfigAlone(f); alone {
				other, ok = fp, linked[fp]
			} else if a, b, j := keys.ParseConfigJoint(f); j && !own(a) && !own(b) {
				other, ok = a+":"+b, linked[a] || linked[b]
			}
			if !ok {
				continue
			}
			// The first node, and on it the field that lasts longest:
			// one answer whatever the map's order.
			if out == nil || (out.Node == i && (v.Left > out.Left || (v.Left == out.Left && f < out.Field))) {
				out = &Conflict{Node: i, Field: f, Other: other, Left: v.Left}
			}
		}
		if out != nil {
			return out
		}
	}
	return nil
}

// MovedTo reports whether a node shows a live joint Client moving to fp.
func MovedTo(recs []*Records, fp string) bool {
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if _, b, ok := keys.ParseConfigJoint(f); ok && b == fp {
				return true
			}
		}
	}
	return false
}

// FloorOf is the move floor M of a move to fp, the largest the nodes
// show; 0 when none.
func FloorOf(recs []*Records, fp string) int64 {
	var m int64
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		if v, ok := rc.Fields[keys.ConfigFloor(fp)]; ok {
			m = max(m, v.Floor)
		}
	}
	return m
}

// SetName names a set in the records: its fingerprint, and its alias
// by address, as releases before issue 44 named it ("": none; see
// Sets.CurAlias).
type SetName struct{ FP, Alias string }

// names reports whether fp names the set.
func (n SetName) names(fp string) bool { return fp == n.FP || (n.Alias != "" && fp == n.Alias) }

// freshFloor reports whether a node's records hold a fresh move floor of
// the set n, under either name.
func freshFloor(rc *Records, n SetName) bool {
	for _, fp := range names(n.FP, n.Alias) {
		if v, ok := rc.Fields[keys.ConfigFloor(fp)]; ok && v.Fresh > 0 {
			return true
		}
	}
	return false
}

// Step is what the records of a move from a to b say of the runbook
// (StepOf).
type Step int

// Steps of the runbook, as StepOf reads them.
const (
	StepNone    Step = iota // no Client recorded either set
	StepOne                 // a Client of a alone, no joint Client
	StepWait                // a Client of a alone was seen (Left says how long)
	StepFloor               // no Client of a alone, but the move floor is not fresh on every node of b
	StepThree               // step 3 is safe
	StepDone                // only Clients of b alone
	StepBoth                // Clients of a alone and of b alone: a violation
	StepUnknown             // a node did not answer
	StepOther               // a Client on a set that is neither a nor b, and not on b, was seen
)

// Reading is StepOf's answer.
type Reading struct {
	Step Step
	// LeftA and LeftB are the longest evidence left of a Client of a
	// alone and of b alone; LeftOther of a Client on neither (Other is
	// its field: c:X, s:X, or a joint Client's j:X:Y with neither X nor
	// Y b).
	LeftA, LeftB, LeftOther int64
	Other                   string
	// Stale are the nodes of b whose move floor is missing or not fresh
	// (StepFloor).
	Stale []int
}

// StepOf reads the records of every node of a move from set a to set b
// (recs[i] nil: node i did not answer) and says which step of the runbook
// is safe next. Step 3 is safe only when every node answered, a joint
// Client recorded, no node shows a live Client that is not on b (a Client
// of a alone, c:A or a relay s:A; a Client of any other set alone; a
// joint Client of two sets neither of which is b), and every node of b
// holds a move floor that is still fresh (its node's time before the
// floor's V). A fingerprint StepOf does not know is a Client not on b: an
// older release's, or a set reached before its nodes' identities were
// learned, may be a's. Freshness closes the gap after the last joint
// round that read every node: V is that round's start plus RecordTTL −
// MaxTTL, and evidence of a Client of a alone written after the round
// started lives RecordTTL from its write, so before V it still has
// MaxTTL to live and shows here. Every grant of a Client of a alone whose
// evidence the round did not read is then seen, and every other is under
// the floor (docs/reconfiguration.md, "Tokens across the move"). With
// mut.FirstWriterFloor, the floor is not asked for (the rule before issue
// 33).
func StepOf(recs []*Records, a, b uint64, na, nb SetName, mut Mut) Reading {
	var (
		r       Reading
		joint   bool
		missing bool
	)
	isA, isB := na.names, nb.names
	for i, rc := range recs {
		if rc == nil {
			missing = true
			continue
		}
		for f, v := range rc.Fields {
			fp, _, alone := keys.ParseConfigAlone(f)
			ja, jb, isJoint := keys.ParseConfigJoint(f)
			switch {
			case alone && isA(fp):
				r.LeftA = max(r.LeftA, v.Left)
			case alone && isB(fp):
				r.LeftB = max(r.LeftB, v.Left)
			case isJoint && isA(ja) && isB(jb):
				joint = true
			case mut.KnownNamesOnly:
			case alone || (isJoint && !isB(ja) && !isB(jb)):
				if v.Left > r.LeftOther || (v.Left == r.LeftOther && f < r.Other) {
					r.LeftOther, r.Other = v.Left, f
				}
			}
		}
		if b&(1<<i) != 0 && !freshFloor(rc, nb) {
			r.Stale = append(r.Stale, i)
		}
	}
	switch {
	case r.LeftA > 0 && r.LeftB > 0:
		r.Step = StepBoth
	case r.LeftA > 0 && !joint:
		r.Step = StepOne
	case r.LeftA > 0:
		r.Step = StepWait
	case r.LeftOther > 0:
		r.Step = StepOther
	case missing:
		r.Step = StepUnknown
	case joint && len(r.Stale) > 0 && !mut.FirstWriterFloor:
		r.Step = StepFloor
	case joint:
		r.Step = StepThree
	case r.LeftB > 0:
		r.Step = StepDone
	}
	return r
}
