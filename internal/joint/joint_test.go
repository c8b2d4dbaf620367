package joint

import (
	"slices"
	"testing"

	"github.com/redlock-go/redlock/internal/keys"
)

// recs builds one node's records: fields and their time left.
func recs(now int64, fields map[string]Value) *Records {
	return &Records{Now: now, Start: now - 30, Fields: fields}
}

// TestDecideJointFloor: a joint Client's round that every node answered
// raises the floor on the next set's nodes only, by the longest life left
// of the current set's evidence (c: or a relay s:), fresh for
// RecordTTL − MaxTTL from the round's start on the node; a round that missed a
// node raises nothing, and relays only the lone Clients' own fields.
func TestDecideJointFloor(t *testing.T) {
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "A", NextFP: "B", Known: true}
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	all := []*Records{
		recs(100, map[string]Value{"c:A": {Left: 900}}),
		recs(100, map[string]Value{"s:A": {Left: 1200}}),
		recs(100, nil),
	}
	plan := Decide(s, all, p, Mut{})
	if !plan.Write || len(plan.Writes[0].Raise) != 0 {
		t.Fatalf("plan %+v", plan)
	}
	for _, i := range []int{1, 2} {
		r := plan.Writes[i].Raise
		if len(r) != 1 || r[0] != (Raise{Name: keys.ConfigFloor("B"), Ahead: 1200, Until: 70 + 1000, TTL: 20000}) {
			t.Errorf("node %d raises %+v", i, r)
		}
	}
	// Relay c:A (900) onto node 2, the next set's alone; not s:A.
	if k := plan.Writes[2].Keep; len(k) != 1 || k[0] != (Keep{Name: "s:A", TTL: 900}) {
		t.Errorf("relays %+v", k)
	}
	plan = Decide(s, []*Records{all[0], nil, all[2]}, p, Mut{})
	for i, w := range plan.Writes {
		if len(w.Raise) != 0 {
			t.Errorf("a round without node 1 raises %+v on node %d", w.Raise, i)
		}
	}
	// The mutant: no floor while evidence is live; first writer then.
	if plan := Decide(s, all, p, Mut{FirstWriterFloor: true}); len(plan.Writes[1].Raise) != 0 {
		t.Errorf("first-writer floor beside live evidence: %+v", plan.Writes[1])
	}
}

// TestDecideSingle: a Client on one set refuses beside a move and a live
// Client of the other set alone; seeing a move to its set, its floor is
// the largest of the floors and node times it read, and it raises the
// floor when every node answered.
func TestDecideSingle(t *testing.T) {
	s := Sets{Cur: 0b11, CurFP: "B", Known: true}
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	plan := Decide(s, []*Records{
		recs(500, map[string]Value{"j:A:B": {Left: 100}, "m:B": {Left: 9000, Floor: 700}}),
		recs(600, nil),
	}, p, Mut{})
	if plan.Conflict != nil || plan.Floor != 700 || !plan.Write || len(plan.Writes[1].Raise) != 1 {
		t.Errorf("moved: %+v", plan)
	}
	plan = Decide(s, []*Records{recs(800, map[string]Value{"j:A:B": {Left: 100}}), nil}, p, Mut{})
	if plan.Floor != 800 || plan.Write {
		t.Errorf("moved, one node: %+v", plan)
	}
	plan = Decide(s, []*Records{recs(800, map[string]Value{"j:A:B": {Left: 100}}), recs(800, map[string]Value{"s:A": {Left: 5}})}, p, Mut{})
	if c := plan.Conflict; c == nil || c.Node != 1 || c.Other != "A" || c.Field != "s:A" {
		t.Errorf("conflict: %+v", plan)
	}
	plan = Decide(s, []*Records{recs(800, map[string]Value{"c:A": {Left: 100}}), recs(800, nil)}, p, Mut{})
	if plan.Conflict != nil || plan.Floor != 0 {
		t.Errorf("no move: %+v", plan)
	}
}

// TestStepOf: step 3 needs every node, a joint record, no evidence of a
// Client of A alone, and a fresh floor on every node of B.
func TestStepOf(t *testing.T) {
	fresh := Value{Left: 9000, Floor: 5, Fresh: 10}
	stale := Value{Left: 9000, Floor: 5, Fresh: 0}
	j := Value{Left: 100}
	for _, tc := range []struct {
		name string
		recs []*Records
		want Step
	}{
		{"nothing", []*Records{recs(0, nil), recs(0, nil)}, StepNone},
		{"a alone", []*Records{recs(0, map[string]Value{"c:A": j}), recs(0, nil)}, StepOne},
		{"wait", []*Records{recs(0, map[string]Value{"c:A": j, "j:A:B": j}), recs(0, nil)}, StepWait},
		{"relay", []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"s:A": j, "m:B": fresh})}, StepWait},
		{"stale floor", []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"m:B": stale})}, StepFloor},
		{"no floor", []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, nil)}, StepFloor},
		{"step 3", []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"m:B": fresh})}, StepThree},
		{"unknown", []*Records{nil, recs(0, map[string]Value{"m:B": fresh, "j:A:B": j})}, StepUnknown},
		{"both", []*Records{recs(0, map[string]Value{"c:A": j}), recs(0, map[string]Value{"c:B": j})}, StepBoth},
		{"done", []*Records{recs(0, nil), recs(0, map[string]Value{"c:B": j})}, StepDone},
		// Issue 44's finding E: evidence under a fingerprint the doctor
		// does not know (another spelling, an older release) may be a
		// Client of A alone: it is not step 3.
		{"other alone", []*Records{recs(0, map[string]Value{"j:A:B": j, "c:X": j}), recs(0, map[string]Value{"m:B": fresh})}, StepOther},
		{"other relayed", []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"m:B": fresh, "s:X": j})}, StepOther},
		{"other joint", []*Records{recs(0, map[string]Value{"j:A:B": j, "j:X:A": j}), recs(0, map[string]Value{"m:B": fresh})}, StepOther},
		{"joint to b", []*Records{recs(0, map[string]Value{"j:A:B": j, "j:X:B": j}), recs(0, map[string]Value{"m:B": fresh})}, StepThree},
		{"joint from b", []*Records{recs(0, map[string]Value{"j:A:B": j, "j:B:C": j}), recs(0, map[string]Value{"m:B": fresh})}, StepThree},
	} {
		if got := StepOf(tc.recs, 0b01, 0b10, SetName{FP: "A"}, SetName{FP: "B"}, Mut{}); got.Step != tc.want {
			t.Errorf("%s: %+v, want step %d", tc.name, got, tc.want)
		}
	}
	stalest := []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"m:B": stale})}
	if got := StepOf(stalest, 0b01, 0b10, SetName{FP: "A"}, SetName{FP: "B"}, Mut{FirstWriterFloor: true}); got.Step != StepThree {
		t.Errorf("the old rule asks for a fresh floor: %+v", got)
	}
}

// TestDecideJointOnItsCurrentSet is issue 44's finding C: a joint Client
// moving from B to C is on B, which the move A → B went to: it takes B's
// move floor, and beside a live move to B the node times too, as a Client
// on B alone does; with JointNoFloor it takes none.
func TestDecideJointOnItsCurrentSet(t *testing.T) {
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "B", NextFP: "C", Known: true}
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	floorOnly := []*Records{
		recs(500, map[string]Value{"m:B": {Left: 9000, Floor: 700}}),
		recs(600, map[string]Value{"m:B": {Left: 9000, Floor: 650}}),
		recs(600, nil),
	}
	if plan := Decide(s, floorOnly, p, Mut{}); plan.Conflict != nil || plan.Floor != 700 {
		t.Errorf("B's floor: %+v", plan)
	}
	if plan := Decide(s, floorOnly, p, Mut{JointNoFloor: true}); plan.Floor != 0 {
		t.Errorf("the mutant takes a floor: %+v", plan)
	}
	moved := []*Records{
		recs(500, map[string]Value{"j:A:B": {Left: 100}}),
		recs(900, nil),
		recs(600, nil),
	}
	plan := Decide(s, moved, p, Mut{})
	if plan.Floor != 900 {
		t.Errorf("beside the move A -> B: floor %d, want the largest node time 900", plan.Floor)
	}
	// m:B raised on B's nodes (0 and 1), m:C on C's (1 and 2).
	for i, want := range [][]string{{"m:B"}, {"m:B", "m:C"}, {"m:C"}} {
		var got []string
		for _, r := range plan.Writes[i].Raise {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("node %d raises %v, want %v", i, got, want)
		}
	}
}

// TestDecideJointRefuses is issue 44's finding D: A = {0}, B = {0,1},
// C = {1,2}, as masks of a joint(B, C) Client's nodes {0,1,2}. Beside a
// move A → B (j:A:B) and a live Client of A alone, the joint Client
// refuses: it shares no set with it. It does not refuse beside Clients
// of its own sets alone, nor beside a Client of an unrelated set; with
// JointNoConflict it never refuses.
func TestDecideJointRefuses(t *testing.T) {
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "B", NextFP: "C", Known: true}
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	j := Value{Left: 100}
	plan := Decide(s, []*Records{recs(0, map[string]Value{"j:A:B": j, "c:A": j}), recs(0, nil), recs(0, nil)}, p, Mut{})
	if c := plan.Conflict; c == nil || c.Other != "A" || c.Node != 0 {
		t.Errorf("beside a Client of A alone: %+v", plan)
	}
	if plan := Decide(s, []*Records{recs(0, map[string]Value{"j:A:B": j, "c:A": j}), recs(0, nil), recs(0, nil)}, p, Mut{JointNoConflict: true}); plan.Conflict != nil {
		t.Errorf("the mutant refuses: %+v", plan)
	}
	for name, fields := range map[string]map[string]Value{
		"own sets":  {"j:A:B": j, "c:B": j, "c:C": j, "j:B:C": j},
		"unrelated": {"j:A:B": j, "c:X": j},
	} {
		if plan := Decide(s, []*Records{recs(0, fields), recs(0, nil), recs(0, nil)}, p, Mut{}); plan.Conflict != nil {
			t.Errorf("%s: refused %+v", name, plan.Conflict)
		}
	}
	// A joint Client of two other sets linked to ours: j:Z:A beside
	// j:A:B (a move into A) shares no set with joint(B, C).
	plan = Decide(s, []*Records{recs(0, map[string]Value{"j:A:B": j, "j:Z:A": j}), recs(0, nil), recs(0, nil)}, p, Mut{})
	if c := plan.Conflict; c == nil || c.Field != "j:Z:A" {
		t.Errorf("beside a joint Client of Z and A: %+v", plan)
	}
	// A Client on C alone sees the joint(A, B) Client through j:B:C.
	single := Sets{Cur: 0b110, CurFP: "C", Known: true}
	plan = Decide(single, []*Records{recs(0, map[string]Value{"j:B:C": j, "j:A:B": j}), recs(0, nil), recs(0, nil)}, p, Mut{})
	if c := plan.Conflict; c == nil || c.Field != "j:A:B" {
		t.Errorf("C alone beside a joint(A, B) Client: %+v", plan)
	}
}

// TestDecideJointRelaysUnknown: a joint Client relays the lone Clients of
// fingerprints it does not know too (another spelling, an older
// release), and their evidence raises the next set's floor: a Client it
// cannot tell from one of its current set alone counts as one.
func TestDecideJointRelaysUnknown(t *testing.T) {
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "A", NextFP: "B", Known: true}
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	plan := Decide(s, []*Records{recs(100, map[string]Value{"c:X": {Left: 1500}}), recs(100, nil), recs(100, nil)}, p, Mut{})
	if k := plan.Writes[2].Keep; len(k) != 1 || k[0] != (Keep{Name: "s:X", TTL: 1500}) {
		t.Errorf("relays %+v onto the next set's node, want s:X", k)
	}
	if r := plan.Writes[1].Raise; len(r) != 1 || r[0].Ahead != 1500 {
		t.Errorf("raises %+v, want the floor 1500 ahead", r)
	}
}

// TestDecideUnknownIdentities: a Client that has not identified all its
// nodes (Sets.Known false) cannot tell its sets' records from others':
// it takes the largest move floor of any set, and while a move other than
// its own shows, it refuses beside any live Client's evidence but its own
// field. With no move, it locks.
func TestDecideUnknownIdentities(t *testing.T) {
	p := Params{MaxTTL: 2000, FenceTTL: 20000}
	j := Value{Left: 100}
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "B'", NextFP: "C'"}
	plan := Decide(s, []*Records{recs(0, map[string]Value{"m:B": {Left: 9000, Floor: 700}, "m:Z": {Left: 9000, Floor: 900}}), recs(0, nil), recs(0, nil)}, p, Mut{})
	if plan.Conflict != nil || plan.Floor != 900 {
		t.Errorf("no move: %+v, want no conflict and the largest floor, 900", plan)
	}
	plan = Decide(s, []*Records{recs(0, map[string]Value{"j:A:B": j, "c:B": j, "j:B':C'": j}), recs(0, nil), recs(0, nil)}, p, Mut{})
	if c := plan.Conflict; c == nil || !c.Unplaced {
		t.Errorf("beside a move: %+v, want an unplaced conflict", plan)
	}
	single := Sets{Cur: 0b11, CurFP: "B'"}
	plan = Decide(single, []*Records{recs(0, map[string]Value{"c:B'": j}), recs(0, nil)}, p, Mut{})
	if plan.Conflict != nil {
		t.Errorf("its own field alone: %+v", plan)
	}
	plan = Decide(single, []*Records{recs(0, map[string]Value{"c:B'": j, "j:A:B": j}), recs(0, nil)}, p, Mut{})
	if c := plan.Conflict; c == nil || c.Field != "j:A:B" {
		t.Errorf("its own field beside a move: %+v, want the move's record as the conflict", plan)
	}
}
