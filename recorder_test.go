package redlock

import (
	"context"
	"sync"
	"testing"
)

// eventRecorder is a Hook that keeps the events the tests of the adaptive
// TTL, the circuit breaker and the degraded mode look at, and counts
// attempts.
type eventRecorder struct {
	BaseHook
	mu       sync.Mutex
	attempts int
	obtains  []ObtainEvent
	refreshs []RefreshEvent
	lost     []LostEvent
	samples  []SampleEvent
	changes  []BreakerEvent
	degraded []DegradedEvent
}

// record appends e to *list under r.mu.
func record[E any](r *eventRecorder, list *[]E, e E) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, e)
}

func (r *eventRecorder) Attempt(context.Context, AttemptEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
}

func (r *eventRecorder) Obtain(_ context.Context, e ObtainEvent)   { record(r, &r.obtains, e) }
func (r *eventRecorder) Refresh(_ context.Context, e RefreshEvent) { record(r, &r.refreshs, e) }
func (r *eventRecorder) Lost(_ context.Context, e LostEvent)       { record(r, &r.lost, e) }
func (r *eventRecorder) Sample(_ context.Context, e SampleEvent)   { record(r, &r.samples, e) }
func (r *eventRecorder) Breaker(_ context.Context, e BreakerEvent) { record(r, &r.changes, e) }
func (r *eventRecorder) Degraded(_ context.Context, e DegradedEvent) {
	record(r, &r.degraded, e)
}

// lastObtain is the last ObtainEvent of key.
func (r *eventRecorder) lastObtain(t *testing.T, key string) ObtainEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.obtains) - 1; i >= 0; i-- {
		if r.obtains[i].Key == key {
			return r.obtains[i]
		}
	}
	t.Fatalf("no ObtainEvent of %s", key)
	return ObtainEvent{}
}

// transitions lists the breaker's changes seen, as "from>to".
func (r *eventRecorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.changes {
		out = append(out, e.From.String()+">"+e.To.String())
	}
	return out
}

func (r *eventRecorder) attemptCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts
}
