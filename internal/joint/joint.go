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
}

// Joint reports whether the Client moves from Cur to Next.
func (s Sets) Joint() bool { return s.Next != 0 }

// Own is the Client's own field: c:FP, or j:FPA:FPB in joint
// configuration.
func (s Sets) Own() string {
	if s.Joint() {
		return keys.ConfigJoint(s.CurFP, s.NextFP)
	}
	return keys.ConfigSingle(s.CurFP)
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

// Conflict is the evidence, on node Node, of a live Client of set Other
// alone beside a move between it and the Client's set (field Field,
// c:Other or a relay s:Other, with Left to go).
type Conflict struct {
	Node  int
	Field string
	Other string
	Left  int64
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
}

// Plan is the decision of a record round.
type Plan struct {
	// Writes are the writes of a second round, per node (nil: none); no
	// node needs any when Write is false.
	Writes []Writes
	Write  bool
	// Conflict is set for a Client on one set that must not lock.
	Conflict *Conflict
	// Floor is the move floor (a node time; 0: none) under the tokens of
	// a Client on one set that a move went to.
	Floor int64
}

// Decide is a record round's decision (the library's engine.record): recs
// are the records of the Client's nodes (nil for a node that did not
// answer).
//
// A joint Client relays each set's lone Clients (their own fields c:FP,
// not relays: a relay of a relay would outlive the record) to the other
// set's nodes as s:FP, and when every node answered, raises the move
// floor m:NEXT on the next set's nodes to the node's time plus the
// longest life left of the evidence of a Client of the current set alone
// (c:CUR or s:CUR), with V the round's start (the node's Start) plus
// RecordTTL − MaxTTL.
//
// A Client on one set refuses (Conflict) while its nodes show a move
// between its set and another and a live Client of the other set alone.
// Otherwise, when its nodes show a live move to its set, its floor is the
// largest of the floors it read and the largest node time it read (it
// runs after step 2 of the runbook), which it raises m:CUR to on its
// nodes when every node answered.
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
	in := func(set uint64, i int) bool { return set&(1<<i) != 0 }
	if s.Joint() {
		leftCur := Left(recs, s.CurFP, false)
		leftNext := Left(recs, s.NextFP, false)
		seenCur := Left(recs, s.CurFP, true)
		for i := range recs {
			w := &plan.Writes[i]
			if leftCur > 0 && in(s.Next, i) && !in(s.Cur, i) {
				w.Keep = append(w.Keep, Keep{keys.ConfigSeen(s.CurFP), leftCur})
			}
			if leftNext > 0 && in(s.Cur, i) && !in(s.Next, i) {
				w.Keep = append(w.Keep, Keep{keys.ConfigSeen(s.NextFP), leftNext})
			}
			if !every || !in(s.Next, i) {
				continue
			}
			switch {
			case mut.FirstWriterFloor:
				if seenCur == 0 {
					w.Raise = append(w.Raise, Raise{Name: keys.ConfigFloor(s.NextFP), TTL: p.FenceTTL})
				}
			default:
				w.Raise = append(w.Raise, Raise{Name: keys.ConfigFloor(s.NextFP), Ahead: seenCur,
					Until: recs[i].Start + RecordTTL(p.MaxTTL) - p.MaxTTL, TTL: p.FenceTTL})
			}
		}
	} else {
		plan.Conflict = Conflicting(recs, s.CurFP)
		if plan.Conflict != nil {
			return plan
		}
		floor := FloorOf(recs, s.CurFP)
		moved := MovedTo(recs, s.CurFP)
		switch {
		case mut.FirstWriterFloor:
			if floor == 0 && every && moved {
				for i := range recs {
					plan.Writes[i].Raise = []Raise{{Name: keys.ConfigFloor(s.CurFP), TTL: p.FenceTTL}}
				}
			}
		case moved:
			for i, rc := range recs {
				if rc != nil {
					floor = max(floor, rc.Now)
				}
				if every {
					plan.Writes[i].Raise = []Raise{{Name: keys.ConfigFloor(s.CurFP), TTL: p.FenceTTL}}
				}
			}
		}
		plan.Floor = floor
	}
	for _, w := range plan.Writes {
		if len(w.Keep)+len(w.Raise) > 0 {
			plan.Write = true
		}
	}
	return plan
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

// Conflicting returns the evidence of a live Client of another set alone
// when the nodes show a move between set fp and that set (a joint
// Client's record): nil when there is none. A Client of another set that
// shares a node without a move between the two is not a conflict:
// nothing says the two are one deployment.
func Conflicting(recs []*Records, fp string) *Conflict {
	moves := map[string]bool{}
	for _, rc := range recs {
		if rc == nil {
			continue
		}
		for f := range rc.Fields {
			if a, b, ok := keys.ParseConfigJoint(f); ok {
				switch fp {
				case a:
					moves[b] = true
				case b:
					moves[a] = true
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
			other, _, ok := keys.ParseConfigAlone(f)
			if !ok || other == fp || !moves[other] {
				continue
			}
			// The first node, and on it the field that lasts longest:
			// one answer whatever the map's order.
			if out == nil || (out.Node == i && v.Left > out.Left) {
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
)

// Reading is StepOf's answer.
type Reading struct {
	Step Step
	// LeftA and LeftB are the longest evidence left of a Client of a
	// alone and of b alone.
	LeftA, LeftB int64
	// Stale are the nodes of b whose move floor is missing or not fresh
	// (StepFloor).
	Stale []int
}

// StepOf reads the records of every node of a move from set a to set b
// (recs[i] nil: node i did not answer) and says which step of the runbook
// is safe next. Step 3 is safe only when every node answered, a joint
// Client recorded, no node shows a live Client of a alone (c:A or a relay
// s:A), and every node of b holds a move floor that is still fresh (its
// node's time before the floor's V). Freshness closes the gap after the
// last joint round that read every node: V is that round's start plus
// RecordTTL − MaxTTL, and evidence of a Client of a alone written after
// the round started lives RecordTTL from its write, so before V it still
// has MaxTTL to live and shows here. Every grant of a Client of a alone
// whose evidence the round did not read is then seen, and every other is
// under the floor (docs/reconfiguration.md, "Tokens across the move").
// With mut.FirstWriterFloor, the floor is not asked for (the rule before
// issue 33).
func StepOf(recs []*Records, a, b uint64, fa, fb string, mut Mut) Reading {
	var (
		r       Reading
		joint   bool
		missing bool
	)
	for i, rc := range recs {
		if rc == nil {
			missing = true
			continue
		}
		for f, v := range rc.Fields {
			switch f {
			case keys.ConfigSingle(fa), keys.ConfigSeen(fa):
				r.LeftA = max(r.LeftA, v.Left)
			case keys.ConfigSingle(fb), keys.ConfigSeen(fb):
				r.LeftB = max(r.LeftB, v.Left)
			case keys.ConfigJoint(fa, fb):
				joint = true
			}
		}
		if b&(1<<i) != 0 {
			if v, ok := rc.Fields[keys.ConfigFloor(fb)]; !ok || v.Fresh <= 0 {
				r.Stale = append(r.Stale, i)
			}
		}
	}
	switch {
	case r.LeftA > 0 && r.LeftB > 0:
		r.Step = StepBoth
	case r.LeftA > 0 && !joint:
		r.Step = StepOne
	case r.LeftA > 0:
		r.Step = StepWait
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
