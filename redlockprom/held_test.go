package redlockprom

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redlock-go/redlock"
)

// TestHeldCount feeds a Hook the events of locks in the orders a Client
// reports them (redlock.Hook: a lock's ObtainEvent first, a LostEvent
// before the ReleaseEvent, which then says Lost). held_locks and
// degraded_locks return to 0, and each lock's hold is observed once, by
// its first end.
func TestHeldCount(t *testing.T) {
	obtain := func(id uint64, degraded bool) redlock.Event {
		return redlock.ObtainEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Result: "obtained", Degraded: degraded}
	}
	lost := func(id uint64, degraded bool) redlock.Event {
		return redlock.LostEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Degraded: degraded}
	}
	release := func(id uint64, wasLost, degraded bool) redlock.Event {
		return redlock.ReleaseEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Result: "ok", Lost: wasLost, Degraded: degraded}
	}
	tests := []struct {
		name     string
		events   []redlock.Event
		held     []float64 // held_locks after each event
		degraded []float64 // degraded_locks after each event
		lost     int       // hold_duration_seconds{outcome=lost} samples
		released int
	}{
		{"released", []redlock.Event{obtain(1, false), release(1, false, false)}, []float64{1, 0}, []float64{0, 0}, 0, 1},
		{"lost then released", []redlock.Event{obtain(1, false), lost(1, false), release(1, true, false)}, []float64{1, 0, 0}, []float64{0, 0, 0}, 1, 0},
		{"two locks, one degraded", []redlock.Event{obtain(1, false), obtain(2, true), lost(2, true), release(1, false, false), release(2, true, true)},
			[]float64{1, 2, 1, 0, 0}, []float64{0, 1, 0, 0, 0}, 1, 1},
		{"not obtained", []redlock.Event{redlock.ObtainEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain}, Result: "held", Err: redlock.ErrNotObtained}}, []float64{0}, []float64{0}, 0, 0},
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
				if got := testutil.ToFloat64(h.degradedLocks.WithLabelValues()); got != tt.degraded[i] {
					t.Errorf("degraded_locks = %v after event %d (%T), want %v", got, i, e, tt.degraded[i])
				}
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
		})
	}
}
