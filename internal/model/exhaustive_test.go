//go:build !race

package model

import (
	"testing"
	"time"
)

// TestExhaustiveFindsFinding1 searches every schedule of finding 1's
// configuration (three nodes, two clients with one acquire each, up to
// t=14) with the guard off, which finding 1 does not involve and which
// keeps the search small: with the old second-round rule it must find a
// token inversion. About two million states, 15 s without the race
// detector, which would make it ten times slower: make test runs this
// package once more without -race for it. (The fixed rule's search at
// these bounds does not finish within 40 million states; the seeded
// searches of TestMutants and TestFinding1Schedule check the fix.)
func TestExhaustiveFindsFinding1(t *testing.T) {
	cfg := base()
	cfg.Horizon = 14
	for i := range cfg.Clients {
		cfg.Clients[i].Mode = '0'
	}
	cfg.Mut.FenceCountsAnyNode = true
	ce, st := New(cfg).Exhaustive(10_000_000, time.Now().Add(5*time.Minute))
	t.Logf("%+v", st)
	if ce == nil {
		t.Fatalf("no token inversion with the old second-round rule (truncated: %v)", st.Truncated)
	}
	t.Logf("%s", ce)
}
