package fault

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// base is the workload of most scenarios: a 500 ms lock, a 1 s recovery
// window for restarted nodes, 20 ms between read and write, fencing and the
// restart guard on.
var base = workload{
	ttl:    500 * time.Millisecond,
	maxTTL: time.Second,
	hold:   20 * time.Millisecond,
	bound:  2 * time.Second,
	fenced: true,
	guard:  true,
}

// expect says what a scenario must show.
type expect int

const (
	safe      expect = iota // no overlap, no stale write accepted, no lost update
	fenceSafe               // the lock may be unsafe, fencing keeps the data: no stale write accepted
	violation               // a control: the checker must see violations
	overlap                 // the lock's assumption is broken on purpose: overlaps must show
	report                  // measured, nothing asserted
)

type scenario struct {
	name     string
	w        func(workload) workload
	proxied  bool
	workers  int
	rates    []float64 // clock rate of worker i
	children int
	inject   func(ctx context.Context, e *env)
	want     expect
	rejected bool // stale writes rejected must be > 0
	// hitsHolder: the fault must reach a holder: some work abandoned
	// because the lock was reported lost, or refused by fencing, > 0.
	hitsHolder bool
	sentinel   bool // node 0 is a Sentinel-managed master
	// mixed: both read and write holds must have completed (a
	// read-write scenario whose fault left only one kind in tests
	// nothing of their exclusion).
	mixed bool
	// bothNames: a multi-name scenario must have completed writes on both
	// stores (holds of both names that did their work).
	bothNames bool
	// staleSafe: whatever else the scenario shows, no stale write may be
	// accepted.
	staleSafe bool
	// d is the scenario's least duration, when it needs more than the
	// suite's (an explicit -fault.duration wins).
	d time.Duration
}

// onNodes applies f to nodes idx in parallel (a crash of several nodes at
// once) and waits.
func onNodes(e *env, idx []int, f func(i int)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

func crash(idx ...int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		every(ctx, e, 700*time.Millisecond, func() {
			onNodes(e, idx, func(i int) {
				if err := e.nodes[i].Kill(); err != nil {
					e.t.Errorf("kill: %v", err)
				}
				if err := e.nodes[i].Restart(); err != nil {
					e.t.Errorf("restart: %v", err)
				}
			})
		})
	}
}

// failover promotes node 0's replica (SENTINEL FAILOVER) once a client holds
// the lock, and again every few seconds of a long run. The promoted replica
// holds a copy of its old master's epoch record, so it recovers before it
// votes.
func failover(ctx context.Context, e *env) {
	every(ctx, e, 3*time.Second, func() {
		if err := e.sentinel.Failover(ctx); err != nil && ctx.Err() == nil {
			e.t.Errorf("failover: %v", err)
		}
	})
}

func freeze(d time.Duration, idx ...int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		every(ctx, e, d+700*time.Millisecond, func() {
			onNodes(e, idx, func(i int) { _ = e.nodes[i].Pause() })
			sleep(ctx, d)
			onNodes(e, idx, func(i int) { _ = e.nodes[i].Resume() })
		})
	}
}

// netFault applies a proxy fault to nodes idx for d, then heals.
func netFault(d time.Duration, set func(e *env, i int), idx ...int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		every(ctx, e, d+700*time.Millisecond, func() {
			for _, i := range idx {
				set(e, i)
			}
			sleep(ctx, d)
			for _, i := range idx {
				e.proxies[i].Heal()
			}
		})
	}
}

func latency(e *env, i int)   { e.proxies[i].SetLatency(150 * time.Millisecond) }
func blackhole(e *env, i int) { e.proxies[i].SetBlackhole(true) }

// dropReplies is a one-way partition: requests reach the node and take
// effect, and their clients never hear so.
func dropReplies(e *env, i int) { e.proxies[i].SetDropReplies(true) }

func resets(idx ...int) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		every(ctx, e, 300*time.Millisecond, func() {
			for _, i := range idx {
				e.proxies[i].Reset()
			}
		})
	}
}

// pauseChildren freezes a client process for d (longer than the TTL) once
// it is inside its read-modify-write.
func pauseChildren(d time.Duration) func(ctx context.Context, e *env) {
	return func(ctx context.Context, e *env) {
		every(ctx, e, d+500*time.Millisecond, func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				for _, k := range e.kids {
					if k.holding.Load() > 0 {
						k.pause(d)
						return
					}
				}
				<-t.C
			}
		})
	}
}

func with(f func(*workload)) func(workload) workload {
	return func(w workload) workload { f(&w); return w }
}

var (
	unfenced = with(func(w *workload) { w.fenced = false })
	noGuard  = with(func(w *workload) { w.guard = false })
	longHold = with(func(w *workload) { w.hold, w.fastRetry = 350*time.Millisecond, true })
	gc       = with(func(w *workload) { w.gcEvery, w.gcPause = 3, 2*w.ttl })
	holdFull = with(func(w *workload) { w.holdFull = true })
	// The lock family: a writer of a read-write lock, and a reentrant
	// owner that re-enters once per hold.
	writeKind     = with(func(w *workload) { w.kind = "write" })
	reentrantKind = with(func(w *workload) { w.kind = "reentrant" })
	// Three of the workers read (the reader of RWMutex), the others write
	// (its writer). With two writers that re-acquire at once, a writer
	// nearly always waits, and readers wait behind it (docs/lock-family.md,
	// "Writers do not starve"): in a 4 s run no reader got in.
	readWrite = with(func(w *workload) { w.kind, w.readers = "write", 3 })
	// multi: each worker obtains two or three names as one lock (All), in
	// varying order, and fences both of its stores.
	multi = with(func(w *workload) { w.multi = true })
	// auto holds each lock for two TTLs, kept by automatic refresh.
	auto = with(func(w *workload) { w.auto, w.hold = true, 2*w.ttl })
	// permits2 and permits3: each client takes one permit of a semaphore of
	// two (three), held 100 ms; on five nodes each permit needs four of
	// them (the permit quorum of Client.Semaphore).
	permits2 = with(func(w *workload) { w.permits, w.hold = 2, 100*time.Millisecond })
	permits3 = with(func(w *workload) { w.permits, w.hold = 3, 100*time.Millisecond })
	// longPermit holds a 2 s permit for 1.5 s, and waiters retry fast: the
	// four restarted nodes are back (and their breakers closed) while the
	// holders still hold.
	longPermit = with(func(w *workload) {
		w.ttl, w.maxTTL, w.hold, w.bound, w.fastRetry = 2*time.Second, 2*time.Second, 1500*time.Millisecond, 4*time.Second, true
	})
	// degraded gives the odd workers the degraded mode, with one shared
	// in-process lease store (see workload.leases).
	degraded = func(w workload) workload { w.leases = redlock.NewLocalLeases(); return w }
)

func chain(fs ...func(workload) workload) func(workload) workload {
	return func(w workload) workload {
		for _, f := range fs {
			w = f(w)
		}
		return w
	}
}

var scenarios = []scenario{
	{name: "baseline", workers: 3, want: safe},

	// Client pauses longer than the TTL.
	{name: "control-unfenced-gc-pause", w: chain(unfenced, gc), workers: 3, want: violation},
	{name: "gc-pause", w: gc, workers: 3, want: safe, rejected: true},
	{name: "control-unfenced-process-pause", w: unfenced, workers: 1, children: 2, inject: pauseChildren(2 * base.ttl), want: violation},
	{name: "process-pause", workers: 1, children: 2, inject: pauseChildren(2 * base.ttl), want: safe, rejected: true},

	// Crash and restart without persistence.
	{name: "crash-minority-guard-on", w: longHold, workers: 4, inject: crash(0, 1), want: safe},
	{name: "crash-minority-guard-off", w: chain(longHold, noGuard), workers: 4, inject: crash(0, 1), want: report},
	{name: "crash-majority-guard-on", w: longHold, workers: 4, inject: crash(0, 1, 2), want: safe},
	{name: "control-crash-majority-guard-off", w: chain(longHold, noGuard), workers: 4, inject: crash(0, 1, 2), want: overlap},

	// Node freezes (SIGSTOP, SIGCONT).
	{name: "freeze-minority-shorter-than-ttl", workers: 3, inject: freeze(base.ttl/2, 0, 1), want: safe},
	{name: "freeze-minority-longer-than-ttl", workers: 3, inject: freeze(3*base.ttl, 0, 1), want: safe},
	{name: "freeze-majority-longer-than-ttl", workers: 3, inject: freeze(3*base.ttl, 0, 1, 2), want: safe},

	// Network faults through the proxy.
	{name: "latency-minority", proxied: true, workers: 3, inject: netFault(time.Second, latency, 0, 1), want: safe},
	{name: "latency-majority", proxied: true, workers: 3, inject: netFault(time.Second, latency, 0, 1, 2), want: safe},
	{name: "partition-minority", proxied: true, workers: 3, inject: netFault(time.Second, blackhole, 0, 1), want: safe},
	{name: "partition-majority", proxied: true, workers: 3, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe},
	{name: "replies-lost-minority", proxied: true, workers: 3, inject: netFault(time.Second, dropReplies, 0, 1), want: safe},
	{name: "replies-lost-majority", proxied: true, workers: 3, inject: netFault(time.Second, dropReplies, 0, 1, 2), want: safe},
	{name: "reset-minority", proxied: true, workers: 3, inject: resets(0, 1), want: safe},
	{name: "reset-majority", proxied: true, workers: 3, inject: resets(0, 1, 2), want: safe},

	// Automatic refresh: each lock is held for two TTLs by the keep-alive.
	// A fault that stops refreshes must end the lock (Done, Err) before its
	// validity, and the holder abandons its work; a pause between the check
	// and the store is caught by fencing.
	{name: "auto-refresh", w: auto, workers: 3, want: safe},
	{name: "auto-refresh-freeze-minority", w: auto, workers: 3, inject: freeze(2*base.ttl, 0, 1), want: safe},
	{name: "auto-refresh-partition-majority", w: auto, proxied: true, workers: 3, inject: netFault(2*base.ttl, blackhole, 0, 1, 2), want: safe, hitsHolder: true},
	{name: "auto-refresh-replies-lost-majority", w: auto, proxied: true, workers: 3, inject: netFault(2*base.ttl, dropReplies, 0, 1, 2), want: safe, hitsHolder: true},
	{name: "auto-refresh-process-pause", w: auto, workers: 1, children: 2, inject: pauseChildren(2 * base.ttl), want: safe, hitsHolder: true},

	// The lock family under freeze, crash and partition (docs/lock-family.md).
	{name: "write-freeze-minority-longer-than-ttl", w: writeKind, workers: 3, inject: freeze(3*base.ttl, 0, 1), want: safe},
	{name: "write-crash-majority-guard-on", w: chain(longHold, writeKind), workers: 4, inject: crash(0, 1, 2), want: safe},
	{name: "write-partition-majority", w: writeKind, proxied: true, workers: 3, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe},
	{name: "reentrant-freeze-minority-longer-than-ttl", w: reentrantKind, workers: 3, inject: freeze(3*base.ttl, 0, 1), want: safe},
	{name: "reentrant-crash-majority-guard-on", w: chain(longHold, reentrantKind), workers: 4, inject: crash(0, 1, 2), want: safe},
	{name: "reentrant-partition-majority", w: reentrantKind, proxied: true, workers: 3, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe},
	{name: "reentrant-gc-pause", w: chain(gc, reentrantKind), workers: 3, want: safe, rejected: true},
	// Readers and writers of one read-write lock: readers may overlap
	// readers, never a writer; tokens ordered between conflicting holds.
	{name: "read-write-baseline", w: readWrite, workers: 4, want: safe, mixed: true},
	{name: "read-write-freeze-minority-longer-than-ttl", w: readWrite, workers: 4, inject: freeze(3*base.ttl, 0, 1), want: safe, mixed: true},
	// After each crash of the majority the nodes recover for the max TTL
	// (1 s), and the first hold after the recovery brings the next crash:
	// each window lets in about one round of holders, the writer first in
	// about one window of four (three readers race it). 4 s have three
	// windows, and a CI run under an empty-cache build saw three runs of
	// reads only; 8 s have six.
	{name: "read-write-crash-majority-guard-on", w: chain(longHold, readWrite), workers: 4, inject: crash(0, 1, 2), want: safe, mixed: true, d: 8 * time.Second},
	{name: "read-write-partition-majority", w: readWrite, proxied: true, workers: 4, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe, mixed: true},
	// Multi-name locks (Client.All): two or three names per obtain, given in
	// orders that vary between workers and iterations; each name checked
	// on its own: overlaps, stale writes and lost updates of both stores.
	{name: "multi-baseline", w: multi, workers: 3, want: safe, bothNames: true},
	{name: "multi-freeze-minority-longer-than-ttl", w: multi, workers: 3, inject: freeze(3*base.ttl, 0, 1), want: safe, bothNames: true},
	{name: "multi-crash-majority-guard-on", w: chain(longHold, multi), workers: 4, inject: crash(0, 1, 2), want: safe, bothNames: true},
	{name: "multi-partition-majority", w: multi, proxied: true, workers: 3, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe, bothNames: true},

	// The degraded mode under a partial partition: the odd workers lose a
	// majority of the nodes and fall back to their shared lease store,
	// while the even workers still reach a quorum. Overlaps between the
	// two groups are what the degraded mode costs (docs/safety.md), and
	// they must show; fencing still refuses the degraded holders' writes
	// (their tokens are negative), so no stale write is accepted. The
	// unfenced control shows the lost updates that the overlaps cause.
	{name: "degraded-partial-partition", w: degraded, proxied: true, workers: 4, inject: netFault(time.Second, blackhole, 0, 1, 2), want: overlap, staleSafe: true},
	{name: "control-unfenced-degraded-partial-partition", w: chain(degraded, unfenced), proxied: true, workers: 4, inject: netFault(time.Second, blackhole, 0, 1, 2), want: violation},

	// Worker 0's clock runs fast or slow; it keeps the lock for all the
	// validity its clock grants. The drift budget is 1% (DefaultDriftFactor).
	// Semaphores (docs/safety.md, "Semaphores"): at most k holders valid at
	// once. A permit needs four of the five nodes for k = 2 and 3, so one
	// node down is survived and two are not; a crash of four without the
	// guard is the control that shows the capacity checker catching
	// holders beyond k.
	{name: "permits-2-baseline", w: permits2, workers: 5, want: safe},
	{name: "permits-3-freeze-one-longer-than-ttl", w: permits3, workers: 6, inject: freeze(3*base.ttl, 0), want: safe},
	{name: "permits-2-freeze-minority-longer-than-ttl", w: permits2, workers: 5, inject: freeze(3*base.ttl, 0, 1), want: safe},
	{name: "permits-2-crash-four-guard-on", w: chain(permits2, longPermit), workers: 6, inject: crash(0, 1, 2, 3), want: safe},
	{name: "control-permits-2-crash-four-guard-off", w: chain(permits2, noGuard, longPermit), workers: 6, inject: crash(0, 1, 2, 3), want: overlap},
	{name: "permits-3-partition-one", w: permits3, proxied: true, workers: 6, inject: netFault(time.Second, blackhole, 0), want: safe},
	{name: "permits-2-partition-majority", w: permits2, proxied: true, workers: 5, inject: netFault(time.Second, blackhole, 0, 1, 2), want: safe},
	{name: "permits-2-auto-refresh-replies-lost-minority", w: chain(auto, permits2, with(func(w *workload) { w.hold = 2 * w.ttl })), proxied: true, workers: 5, inject: netFault(2*base.ttl, dropReplies, 0, 1), want: safe},
	{name: "sentinel-failover", workers: 3, sentinel: true, inject: failover, want: safe},
	{name: "clock-fast-within-budget", w: holdFull, workers: 3, rates: []float64{1.005}, want: safe},
	{name: "clock-slow-within-budget", w: holdFull, workers: 3, rates: []float64{0.995}, want: safe},
	{name: "clock-fast-beyond-budget", w: holdFull, workers: 3, rates: []float64{1.5}, want: safe},
	{name: "clock-slow-beyond-budget", w: holdFull, workers: 3, rates: []float64{0.7}, want: overlap},
}

// runScenario runs one scenario and checks what it must show.
func runScenario(t *testing.T, sc scenario) {
	w := base
	if sc.w != nil {
		w = sc.w(w)
	}
	// A control must show what the checker catches, and a pause
	// scenario must show fencing at work (a stale operation
	// refused). Both depend on random timing (a crash or a pause
	// landing while a client is in its read-modify-write), so such
	// a scenario gets up to three runs to show it. The safety
	// checks apply to every run, so a retry hides no violation.
	tries := 1
	if sc.want == violation || sc.want == overlap || sc.rejected || sc.hitsHolder || sc.mixed || sc.bothNames {
		tries = 3
	}
	for try := range tries {
		e := newEnv(t, w, sc.proxied, sc.sentinel)
		d := duration()
		if sc.d > d && *flagDuration == 0 {
			d = sc.d
		}
		r := e.run(sc.name, d, sc.workers, sc.rates, sc.children, sc.inject)
		if r.ops == 0 {
			t.Fatal("no operation completed")
		}
		switch sc.want {
		case safe:
			if r.overlaps != 0 || r.staleAccepted != 0 || r.lost != 0 || r.tokenInversions != 0 {
				t.Errorf("violations: %d overlaps, %d stale writes accepted, %d lost updates, %d token inversions", r.overlaps, r.staleAccepted, r.lost, r.tokenInversions)
			}
			if s := r.second; s.overlaps != 0 || s.staleAccepted != 0 || s.lost != 0 {
				t.Errorf("violations on the second name: %d overlaps, %d stale writes accepted, %d lost updates", s.overlaps, s.staleAccepted, s.lost)
			}
		case fenceSafe:
			if r.staleAccepted != 0 {
				t.Errorf("%d stale writes accepted", r.staleAccepted)
			}
		}
		if sc.staleSafe && (r.staleAccepted != 0 || r.lost != 0) {
			t.Errorf("%d stale writes accepted, %d lost updates", r.staleAccepted, r.lost)
		}
		shown := true
		switch {
		case sc.want == violation:
			shown = r.staleAccepted > 0 || r.lost > 0
		case sc.want == overlap:
			shown = r.overlaps > 0
		case sc.rejected:
			shown = r.staleRejected > 0
		case sc.hitsHolder:
			shown = r.abandoned > 0 || r.staleRejected > 0
		case sc.mixed:
			shown = r.reads > 0 && r.reads < r.ops
		case sc.bothNames:
			shown = r.acked > 0 && r.second.acked > 0
		}
		if shown {
			break
		}
		if try < tries-1 {
			t.Logf("run %d did not show what the scenario is for; running it again", try+1)
			continue
		}
		switch {
		case sc.want == violation:
			t.Errorf("control run: the checker saw no stale write and no lost update in %d runs; a green result would mean nothing", tries)
		case sc.want == overlap:
			t.Errorf("control run: the checker saw no overlapping holders in %d runs", tries)
		case sc.rejected:
			t.Errorf("no stale operation was rejected in %d runs: the pauses did not test fencing", tries)
		case sc.hitsHolder:
			t.Errorf("no holder lost its lock in %d runs: the fault did not test the keep-alive", tries)
		case sc.mixed:
			t.Errorf("no run of %d completed both read and write holds", tries)
		case sc.bothNames:
			t.Errorf("no run of %d completed writes on both names' stores", tries)
		}
	}
}
