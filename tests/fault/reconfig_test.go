package fault

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// move is one change of the node set, as indexes of the scenario's nodes.
type move struct{ from, to []int }

// phase is what a worker runs on from a moment of the scenario: a set of
// nodes alone (next nil), or a joint configuration.
type phase struct {
	at        time.Duration
	cur, next []int
}

// newMoveClient is newLockClient's Client on the nodes cur, in joint
// configuration when next is given; records false turns the configuration
// records off (the control, which also skips the joint configuration).
func newMoveClient(addrs []string, cur, next []int, w workload, records bool) (*redlock.Client, func(), error) {
	var curAddrs []string
	for _, i := range cur {
		curAddrs = append(curAddrs, addrs[i])
	}
	opts := []redlock.Option{redlock.WithConfigRecords(records)}
	var closers []func()
	closeNext := func() {
		for _, f := range closers {
			f()
		}
	}
	if len(next) > 0 {
		var ns []driver.Node
		for _, i := range next {
			n, closeFn, err := suiteDriver.node(addrs[i])
			if err != nil {
				closeNext()
				return nil, nil, err
			}
			ns = append(ns, n)
			closers = append(closers, closeFn)
		}
		opts = append(opts, redlock.WithNextNodes(ns...))
	}
	c, closeFn, err := newLockClient(curAddrs, w, nil, opts...)
	if err != nil {
		closeNext()
		return nil, nil, err
	}
	return c, func() { closeFn(); closeNext() }, nil
}

// rollingPlan is each worker's phases for the moves, following the
// runbook: every worker rolls to joint one after another (spaced by
// stagger), the last worker's roll is followed by the wait of step 2 (the
// records of the old set alone expire max TTL and half after the last one
// was written), and every worker rolls to the new set one after another.
// With skip (the control), the workers roll from the old set straight to
// the new one, one after another, as a restart of every service with the
// new list would.
func rollingPlan(workers int, moves []move, w workload, stagger, settle time.Duration, skip bool) [][]phase {
	plan := make([][]phase, workers)
	for i := range plan {
		plan[i] = []phase{{at: 0, cur: moves[0].from}}
	}
	t := settle
	for _, mv := range moves {
		if !skip {
			for i := range plan {
				plan[i] = append(plan[i], phase{at: t + time.Duration(i)*stagger, cur: mv.from, next: mv.to})
			}
			t += time.Duration(workers)*stagger + w.maxTTL + w.maxTTL/2 + settle
		}
		for i := range plan {
			plan[i] = append(plan[i], phase{at: t + time.Duration(i)*stagger, cur: mv.to})
		}
		t += time.Duration(workers)*stagger + settle
	}
	return plan
}

// runRolling runs the workers through their plans, each phase on a Client
// of its own, and checks the result; it returns when the last phase has
// run for settle.
func (e *env) runRolling(name string, addrs []string, plan [][]phase, settle time.Duration, records bool) (result, int) {
	e.t.Helper()
	last := time.Duration(0)
	for _, p := range plan {
		last = max(last, p[len(p)-1].at)
	}
	ctx, cancel := context.WithTimeout(context.Background(), last+settle)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for wi, phases := range plan {
		wg.Go(func() {
			for pi, ph := range phases {
				end := last + settle
				if pi+1 < len(phases) {
					end = phases[pi+1].at
				}
				if d := time.Until(start.Add(ph.at)); d > 0 {
					time.Sleep(d)
				}
				c, closeFn, err := newMoveClient(addrs, ph.cur, ph.next, e.w, records)
				if err != nil {
					e.t.Error(err)
					return
				}
				pctx, pcancel := context.WithDeadline(ctx, start.Add(end))
				runWorker(pctx, fmt.Sprintf("g%d", wi), c, e.store, e.w, nil, false, &refusals{sink: e.rec, mu: &mu, n: &refused})
				pcancel()
				closeFn()
			}
		})
	}
	wg.Wait()
	r := e.check(name)
	ops := e.rec.ops
	_, _, r.tokenInversions = conflicts(ops, true)
	return r, refused
}

// refusals counts the failed attempts of a sink (ErrConfigConflict among
// them: a Client of the new set that started before step 2 was over).
type refusals struct {
	sink
	mu *sync.Mutex
	n  *int
}

func (r *refusals) addAttempt(a attempt) {
	if !a.OK {
		r.mu.Lock()
		*r.n++
		r.mu.Unlock()
	}
	r.sink.addAttempt(a)
}

// TestReconfiguration is the rolling reconfiguration under load: four
// workers lock and write the fenced store while the deployment grows from
// three nodes to five, replaces one of the five with a sixth, and shrinks
// to three, each move following the runbook (docs/reconfiguration.md):
// no overlap, no stale write accepted, no lost update, no token inversion.
// Its control rolls the workers from the old set straight to the new one
// (step 1 and 2 skipped, records off), from three nodes to three others
// sharing one: the checker must see overlapping holders.
func TestReconfiguration(t *testing.T) {
	w := base
	w.guard = false
	const workers = 4
	stagger, settle := 150*time.Millisecond, time.Second
	for _, tc := range []struct {
		name  string
		moves []move
		skip  bool
	}{
		{"rolling-grow-replace-shrink", []move{
			{[]int{0, 1, 2}, []int{0, 1, 2, 3, 4}},
			{[]int{0, 1, 2, 3, 4}, []int{0, 1, 2, 3, 5}},
			{[]int{0, 1, 2, 3, 5}, []int{1, 3, 5}},
		}, false},
		{"control-rolling-without-joint", []move{
			{[]int{0, 1, 2}, []int{2, 3, 4}},
			{[]int{2, 3, 4}, []int{4, 5, 0}},
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 1
			if tc.skip {
				tries = 3
			}
			for try := range tries {
				e := newEnv(t, w, false, false)
				addrs := append(append([]string(nil), e.addrs...), redistest.Start(t, 1)[0].Addr())
				plan := rollingPlan(workers, tc.moves, w, stagger, settle, tc.skip)
				r, refused := e.runRolling(tc.name, addrs, plan, settle, !tc.skip)
				t.Logf("%d failed attempts (ErrConfigConflict among them), %d token inversions", refused, r.tokenInversions)
				if r.ops == 0 {
					t.Fatal("no operation completed")
				}
				if !tc.skip {
					if r.overlaps != 0 || r.staleAccepted != 0 || r.lost != 0 || r.tokenInversions != 0 {
						t.Errorf("violations: %d overlaps, %d stale writes accepted, %d lost updates, %d token inversions", r.overlaps, r.staleAccepted, r.lost, r.tokenInversions)
					}
					return
				}
				if r.overlaps > 0 {
					return
				}
				if try < tries-1 {
					t.Logf("run %d showed no overlap; running it again", try+1)
				}
			}
			if tc.skip {
				t.Errorf("control run: the checker saw no overlapping holders in %d runs", tries)
			}
		})
	}
}
