//go:build !race

package model

import (
	"testing"
	"time"
)

// TestExhaustiveJoint searches every schedule of the smallest move: one
// node to another host ({0} to {1}), a client on A alone, a joint client
// and a client on B alone, one acquire each, guard off, to t=15 (the
// client on B alone may start at t=14 at the earliest, after a grant on A
// alone at t=10): the runbook as documented breaks nothing, and skipping
// step 2 breaks mutual exclusion.
func TestExhaustiveJoint(t *testing.T) {
	t.Parallel()
	for _, skip := range []bool{false, true} {
		cfg := Config{Nodes: 2, Clients: []ClientSpec{
			{Conf: ConfA, Acquires: 1, Release: true, Mode: '0'},
			{Conf: ConfJoint, Acquires: 1, Release: true, Mode: '0'},
			{Conf: ConfB, Acquires: 1, Release: true, Mode: '0'},
		}, TTL: 3, MaxTTL: 4, NodeTimeout: 2, Delta: 1, Horizon: 15, Global: true, SetA: 0b01, SetB: 0b10}
		cfg.Mut.SkipStep2 = skip
		ce, st := New(cfg).Exhaustive(10_000_000, time.Now().Add(4*time.Minute))
		t.Logf("SkipStep2=%v: %+v", skip, st)
		switch {
		case skip && ce == nil:
			t.Fatalf("step 2 skipped: no counterexample (truncated: %v)", st.Truncated)
		case !skip && st.Truncated:
			t.Fatalf("search truncated: %+v", st)
		case !skip && ce != nil:
			t.Fatalf("the runbook breaks:\n%s", ce)
		case ce != nil:
			t.Logf("%s", ce)
		}
	}
}
