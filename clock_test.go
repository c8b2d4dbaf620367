package redlock

import (
	"context"
	"testing"
	"time"
)

// The Client reads the time only from its clock (WithClock): an obtain's
// ObtainEvent.Elapsed and its attempt's AttemptEvent.Elapsed are measured
// on one clock, so that the obtain, which contains the attempt, never
// reports less. With a clock ten times fast, an ObtainEvent measured on
// time.Now would report about a tenth of its attempt's.
func TestOneClockObtainAndAttempt(t *testing.T) {
	cl := startNodes(t, 1)
	base := time.Now()
	fast := func() time.Time { return base.Add(10 * time.Since(base)) }
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithClock(fast), WithHook(rec))
	ctx := context.Background()
	for range 5 {
		l, err := c.TryObtain(ctx, "one-clock", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.obtains) != 5 || len(rec.attempts) != 5 {
		t.Fatalf("%d obtains and %d attempts reported, want 5 and 5", len(rec.obtains), len(rec.attempts))
	}
	for i, o := range rec.obtains {
		if a := rec.attempts[i]; o.Elapsed < a.Elapsed {
			t.Errorf("obtain %d took %v, less than its attempt's %v: not one clock", i, o.Elapsed, a.Elapsed)
		}
	}
}
