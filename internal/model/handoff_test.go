package model

import (
	"fmt"
	"testing"
	"time"
)

// handoffBase: three nodes, the handing Client H holding the lock of kind
// k with one refresh to send (its requests may run late, after the
// handoff), two workers given the same form, and a rival that tries twice.
func handoffBase(k byte) HandoffConfig {
	return HandoffConfig{Nodes: 3, Kind: k, Permits: 1, TTL: 6, Drift: 1, NodeTimeout: 2, Horizon: 16, Refreshes: 1, Rival: 2}
}

// handoffForged: as handoffBase, with W2's form edited to another kind
// (HandoffModel.ForgedForm).
func handoffForged(k byte) HandoffConfig {
	c := handoffBase(k)
	c.Forged = true
	return c
}

// handoffLate: as handoffBase, targeted at the fencing check's schedule:
// the workers resume, and the rival (one obtain) tries, only after the
// handed lock expired (HandoffConfig.Late), so that H's late refresh can
// re-create it after the rival's tenure and before a Resume.
func handoffLate(k byte) HandoffConfig {
	c := handoffBase(k)
	c.Rival, c.Late = 1, c.TTL+1
	return c
}

// handoffSearch is a random search of a handoff configuration.
type handoffSearch struct {
	cfg    HandoffConfig
	random int // schedules
	steps  int
}

func (h handoffSearch) run(mut HandoffMutations, seed uint64, n int) (*HCounterexample, HStats) {
	cfg := h.cfg
	cfg.Mut = mut
	if n == 0 {
		n = h.random
	}
	return NewHandoff(cfg).Random(seed, n, h.steps, time.Now().Add(5*time.Minute))
}

// handoffSearches are TestHandoffMutants' searches, by name: each kind of
// lock, with the form delivered twice as it is, and edited to another
// kind.
func handoffSearches() map[string]handoffSearch {
	out := map[string]handoffSearch{}
	for _, k := range []struct {
		name string
		kind byte
	}{{"plain", Plain}, {"reentrant", Reentrant}, {"writer", Exclusive}, {"reader", Shared}, {"permit", Permit}} {
		out[k.name] = handoffSearch{cfg: handoffBase(k.kind), random: 20000, steps: 200}
		out[k.name+"Forged"] = handoffSearch{cfg: handoffForged(k.kind), random: 20000, steps: 200}
		out[k.name+"Late"] = handoffSearch{cfg: handoffLate(k.kind), random: 20000, steps: 200}
	}
	return out
}

// handoffMutant is a broken Resume and the search that must find it.
type handoffMutant struct {
	name   string
	mut    HandoffMutations
	search string
	// budget is how many schedules the search may play (0: the
	// search's own): at least fifteen times the mean that 20 seeds
	// needed, as docs/fencing.md's table does.
	budget int
	seeds  []uint64
}

func handoffMutants() []handoffMutant {
	// Schedules needed from 20 seeds, mean (max): OldResume 2 (7), its
	// writer 2 (7), its forged reader 3 (12); ClaimTrustsKind 4 (15), its
	// permit 4 (15); NoTombstone 2,362 (6,593), its writer 23 (99);
	// ValidityFromDecision 5,329 (20,255); NoCounterCheck (plainLate, targeted)
	// 12,731 (37,988).
	return []handoffMutant{
		// Finding 2: the form resumed twice.
		{name: "OldResume", mut: HandoffMutations{OldResume: true}, search: "plain", seeds: []uint64{17}},
		{name: "OldResume/writer", mut: HandoffMutations{OldResume: true}, search: "writer", seeds: []uint64{17}},
		// Finding 3: a reader's form that says writer.
		{name: "OldResume/readerForged", mut: HandoffMutations{OldResume: true}, search: "readerForged", seeds: []uint64{17}},
		{name: "ClaimTrustsKind", mut: HandoffMutations{ClaimTrustsKind: true}, search: "readerForged", seeds: []uint64{17}},
		{name: "ClaimTrustsKind/permit", mut: HandoffMutations{ClaimTrustsKind: true}, search: "permitForged", seeds: []uint64{17}},
		// The late refresh of the handing Client writes the old secret
		// back, and a second Resume claims it.
		{name: "NoTombstone", mut: HandoffMutations{NoTombstone: true}, search: "plain", budget: 40000, seeds: []uint64{17}},
		{name: "NoTombstone/writer", mut: HandoffMutations{NoTombstone: true}, search: "writer", seeds: []uint64{17}},
		{name: "ValidityFromDecision", mut: HandoffMutations{ValidityFromDecision: true}, search: "plain", budget: 80000, seeds: []uint64{17}},
		// The fencing check: H's late refresh re-creates the lock after
		// the rival's tenure, and a Resume continues it with a token below
		// the rival's.
		{name: "NoCounterCheck", mut: HandoffMutations{NoCounterCheck: true}, search: "plainLate", budget: 200000, seeds: []uint64{17}},
	}
}

// TestHandoffMutants: every broken Resume is found by a random search
// from the initial state (this run's seed, and its regression seeds), and
// Resume as implemented passes every search: no two holders that exclude
// each other, a form resumed at most once, and a resumed lock of the kind
// the nodes hold.
func TestHandoffMutants(t *testing.T) {
	seed := seedOf(t)
	t.Logf("random searches from seed %d (replay: %s=%d)", seed, seedEnv, seed)
	searches := handoffSearches()
	for _, m := range handoffMutants() {
		s, ok := searches[m.search]
		if !ok {
			t.Fatalf("mutant %s: no search %s", m.name, m.search)
		}
		seeds := append([]uint64{seed}, m.seeds...)
		if raceDetector {
			seeds = m.seeds
		}
		for _, sd := range seeds {
			name := m.name
			if sd != seed {
				name = fmt.Sprintf("%s/seed=%d", m.name, sd)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ce, st := s.run(m.mut, sd, m.budget)
				if ce == nil {
					t.Fatalf("search %s from seed %d found nothing (%+v); replay: %s=%d", m.search, sd, st, seedEnv, sd)
				}
				t.Logf("search %s from seed %d: %+v\n%s", m.search, sd, st, ce)
			})
		}
	}
	for name, s := range handoffSearches() {
		t.Run("fixed/"+name, func(t *testing.T) {
			t.Parallel()
			n := s.random
			if raceDetector {
				n = max(n/10, 1)
			}
			ce, st := s.run(HandoffMutations{}, seed, n)
			if ce != nil {
				t.Fatalf("Resume breaks (search %s from seed %d; replay: %s=%d):\n%s", name, seed, seedEnv, seed, ce)
			}
			t.Logf("search %s from seed %d: %+v", name, seed, st)
		})
	}
}
