package redlock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// eventRecorder is a Hook that keeps the events the tests look at, and
// counts attempts.
type eventRecorder struct {
	mu       sync.Mutex
	attempts []AttemptEvent
	obtains  []ObtainEvent
	refreshs []RefreshEvent
	releases []ReleaseEvent
	lost     []LostEvent
	samples  []SampleEvent
	changes  []BreakerEvent
	waits    []WaitEvent
	// ctxs holds, per event type, the value of ctxKey in each event's
	// context, to see each call's context reach the hook.
	ctxs map[string][]any
}

// ctxKey marks a caller's context, to see it reach the hook.
type ctxKey struct{}

func (r *eventRecorder) Observe(ctx context.Context, e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctxs == nil {
		r.ctxs = make(map[string][]any)
	}
	kind := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", e), "redlock."), "Event")
	r.ctxs[kind] = append(r.ctxs[kind], ctx.Value(ctxKey{}))
	switch e := e.(type) {
	case AttemptEvent:
		r.attempts = append(r.attempts, e)
	case ObtainEvent:
		r.obtains = append(r.obtains, e)
	case RefreshEvent:
		r.refreshs = append(r.refreshs, e)
	case ReleaseEvent:
		r.releases = append(r.releases, e)
	case LostEvent:
		r.lost = append(r.lost, e)
	case SampleEvent:
		r.samples = append(r.samples, e)
	case BreakerEvent:
		r.changes = append(r.changes, e)
	case WaitEvent:
		r.waits = append(r.waits, e)
	}
}

// degraded is the ObtainEvents of locks obtained in degraded mode.
func (r *eventRecorder) degraded() []ObtainEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ObtainEvent
	for _, e := range r.obtains {
		if e.Degraded {
			out = append(out, e)
		}
	}
	return out
}

// lastObtain is the last ObtainEvent of name.
func (r *eventRecorder) lastObtain(t *testing.T, name string) ObtainEvent {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.obtains) - 1; i >= 0; i-- {
		if r.obtains[i].Name == name {
			return r.obtains[i]
		}
	}
	t.Fatalf("no ObtainEvent of %s", name)
	return ObtainEvent{}
}

// transitions lists the breaker's changes seen, as "from>to".
func (r *eventRecorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.changes {
		out = append(out, string(e.From)+">"+string(e.To))
	}
	return out
}

func (r *eventRecorder) attemptCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.attempts)
}

// reader and writer are the handles of the read-write lock named name.
func reader(c *Client, name string) Locker { r, _ := c.RWMutex(name); return r }
func writer(c *Client, name string) Locker { _, w := c.RWMutex(name); return w }
