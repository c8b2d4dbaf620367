package redlockprom

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redlock-go/redlock"
)

// TestHeldOrder feeds a Hook the events of locks in the orders that
// concurrent goroutines can report them (the events are built here, not
// observed on a Client: the races that produce the rarer orders cannot be
// provoked on demand). held_locks returns to 0 and each lock's hold is
// observed once, by its first end.
func TestHeldOrder(t *testing.T) {
	obtain := func(id uint64, degraded bool) redlock.Event {
		return redlock.ObtainEvent{Name: "x", Kind: "plain", LockID: id, Result: "obtained", Degraded: degraded}
	}
	lost := func(id uint64) redlock.Event { return redlock.LostEvent{Name: "x", Kind: "plain", LockID: id} }
	release := func(id uint64) redlock.Event {
		return redlock.ReleaseEvent{Name: "x", Kind: "plain", LockID: id, Result: "ok"}
	}
	tests := []struct {
		name     string
		events   []redlock.Event
		held     []float64 // held_locks after each event
		lost     int       // hold_duration_seconds{outcome=lost} samples
		released int
	}{
		{"released", []redlock.Event{obtain(1, false), release(1)}, []float64{1, 0}, 0, 1},
		{"lost then released", []redlock.Event{obtain(1, false), lost(1), release(1)}, []float64{1, 0, 0}, 1, 0},
		{"lost before its obtain event", []redlock.Event{lost(1), obtain(1, false), release(1)}, []float64{0, 0, 0}, 1, 0},
		{"released before its obtain event", []redlock.Event{release(1), obtain(1, false)}, []float64{0, 0}, 0, 1},
		{"lost and released before its obtain event", []redlock.Event{lost(1), release(1), obtain(1, false)}, []float64{0, 0, 0}, 1, 0},
		{"two locks", []redlock.Event{obtain(1, false), obtain(2, true), lost(2), release(1), release(2)}, []float64{1, 2, 1, 0, 0}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tt.events {
				h.Observe(context.Background(), e)
				if got := testutil.ToFloat64(h.heldLocks.WithLabelValues("plain")); got != tt.held[i] {
					t.Errorf("held_locks = %v after event %d (%T), want %v", got, i, e, tt.held[i])
				}
				if got := testutil.ToFloat64(h.degradedLocks.WithLabelValues()); got < 0 || got > 1 {
					t.Errorf("degraded_locks = %v after event %d", got, i)
				}
			}
			if got := testutil.ToFloat64(h.degradedLocks.WithLabelValues()); got != 0 {
				t.Errorf("degraded_locks = %v at the end, want 0", got)
			}
			for outcome, want := range map[string]int{"lost": tt.lost, "released": tt.released} {
				var m dto.Metric
				if err := h.holdTime.WithLabelValues(outcome, "plain").(prometheus.Metric).Write(&m); err != nil {
					t.Fatal(err)
				}
				if got := m.GetHistogram().GetSampleCount(); got != uint64(want) {
					t.Errorf("hold_duration_seconds{outcome=%q} has %d samples, want %d", outcome, got, want)
				}
			}
			if len(h.held.locks) != 0 || h.held.early != 0 {
				t.Errorf("the Hook still follows %d locks (%d early), want none", len(h.held.locks), h.held.early)
			}
		})
	}
}
