package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A degraded lock without refreshes that runs out after the breaker closed
// is lost with ErrDegraded beside ErrLost, as WithDegradedMode promises: its
// owner must take it again on the nodes.
func TestDegradedRunOutAfterBreakerClosedWrapsErrDegraded(t *testing.T) {
	cl, a, _, rec := degradedPair(t, NewLocalLeases())
	l := obtainDegraded(t, a, "quiet", 8*time.Second)
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); a.BreakerState() != "closed"; {
		if time.Now().After(deadline) {
			t.Fatalf("breaker %v 20 s after the nodes came back", a.BreakerState())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if l.Err() != nil {
		t.Fatalf("the lock ran out (%v) before the breaker closed: the machine is too slow for this test", l.Err())
	}
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("degraded lock did not run out")
	}
	if err := l.Err(); !errors.Is(err, ErrLost) || !errors.Is(err, ErrDegraded) {
		t.Fatalf("Err: %v, want ErrLost and ErrDegraded", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.lost) != 1 || !errors.Is(rec.lost[0].Err, ErrDegraded) {
		t.Fatalf("LostEvents %+v: want one, wrapping ErrDegraded", rec.lost)
	}
}

// Releasing a degraded lock that ran out, and that another Client took
// since, says ErrNotHeld, as on the nodes, and the hook counts it
// "not_held"; the other Client's lock is untouched.
func TestDegradedReleaseOfALeaseTakenByAnotherIsNotHeld(t *testing.T) {
	_, a, b, rec := degradedPair(t, NewLocalLeases())
	ctx := context.Background()
	la := obtainDegraded(t, a, "taken", 300*time.Millisecond)
	select {
	case <-la.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("degraded lock did not run out")
	}
	untilBreakerOpenOrDegraded(t, b)
	time.Sleep(time.Second) // the lease outlives the lock by the node timeout and the drift
	lb := obtainDegraded(t, b, "taken", 10*time.Second)
	if err := la.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a degraded lock taken by another: %v, want ErrNotHeld", err)
	}
	rec.mu.Lock()
	var res []string
	for _, ev := range rec.releases {
		if ev.Name == "taken" {
			res = append(res, string(ev.Result))
		}
	}
	rec.mu.Unlock()
	if len(res) != 1 || res[0] != "not_held" {
		t.Fatalf("ReleaseEvent results %v, want [not_held]", res)
	}
	if err := lb.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("the other Client's lock after the stale release: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatalf("Release by the holder: %v", err)
	}
	// A lease that ran out and nobody took is not held either.
	lc := obtainDegraded(t, a, "expired", 300*time.Millisecond)
	<-lc.Done()
	time.Sleep(time.Second)
	if err := lc.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a degraded lock whose lease expired: %v, want ErrNotHeld", err)
	}
}
