package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
)

func TestDriftAllowance(t *testing.T) {
	if got := limits.DriftAllowance(10*time.Second, limits.DriftFactor); got != 102*time.Millisecond {
		t.Errorf("limits.DriftAllowance(10s, 1%%) = %v, want 102ms", got)
	}
	c := config{drift: 0.05}
	if got, want := c.validity(time.Second), time.Second-limits.DriftAllowance(time.Second, 0.05); got != want {
		t.Errorf("validity = %v, want the TTL less limits.DriftAllowance: %v", got, want)
	}
}

func TestNodeTimeoutDefault(t *testing.T) {
	cfg := defaultConfig()
	tests := []struct{ ttl, want time.Duration }{
		{10 * time.Second, 500 * time.Millisecond},
		{time.Minute, time.Second},
		{time.Second, 50 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{20 * time.Millisecond, 5 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := cfg.nodeTimeoutFor(tt.ttl); got != tt.want {
			t.Errorf("nodeTimeoutFor(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}

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

func TestMaxTTLRefused(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients, WithMaxTTL(time.Second))
	if _, err := c.TryObtain(context.Background(), "long", 2*time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TTL above the max TTL: %v, want ErrInvalid", err)
	}
	l, err := c.TryObtain(context.Background(), "long", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(context.Background(), 2*time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Refresh above the max TTL: %v, want ErrInvalid", err)
	}
	if _, err := New(cl.clients, WithMaxTTL(time.Millisecond)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max TTL below limits.MinTTL: %v, want ErrInvalid", err)
	}
}
