package joint

import (
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
	s := Sets{Cur: 0b011, Next: 0b110, CurFP: "A", NextFP: "B"}
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
	s := Sets{Cur: 0b11, CurFP: "B"}
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
	} {
		if got := StepOf(tc.recs, 0b01, 0b10, "A", "B", Mut{}); got.Step != tc.want {
			t.Errorf("%s: %+v, want step %d", tc.name, got, tc.want)
		}
	}
	stalest := []*Records{recs(0, map[string]Value{"j:A:B": j}), recs(0, map[string]Value{"m:B": stale})}
	if got := StepOf(stalest, 0b01, 0b10, "A", "B", Mut{FirstWriterFloor: true}); got.Step != StepThree {
		t.Errorf("the old rule asks for a fresh floor: %+v", got)
	}
}
