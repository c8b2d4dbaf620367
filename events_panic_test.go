package redlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// panicHook panics on the events that when selects, after counting them.
type panicHook struct {
	when func(Event) bool
	mu   sync.Mutex
	seen map[string]int
}

func (h *panicHook) Observe(_ context.Context, ev Event) {
	if !h.when(ev) {
		return
	}
	h.mu.Lock()
	if h.seen == nil {
		h.seen = map[string]int{}
	}
	h.seen[kindOf(ev)]++
	h.mu.Unlock()
	panic("hook bug: " + kindOf(ev))
}

func (h *panicHook) count(kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[kind]
}

func kindOf(ev Event) string {
	switch ev.(type) {
	case AttemptEvent:
		return "attempt"
	case ObtainEvent:
		return "obtain"
	case RefreshEvent:
		return "refresh"
	case ReleaseEvent:
		return "release"
	case LostEvent:
		return "lost"
	case BreakerEvent:
		return "breaker"
	case SampleEvent:
		return "sample"
	case WaitEvent:
		return "wait"
	}
	return "?"
}

// A hook that panics at a successful attempt, before the obtain has
// registered the lock, and at every later event on the caller's goroutine:
// the obtain returns its lock, no key is left that belongs to nobody, and
// the lock is released so that another Client obtains the name at once.
func TestHookPanicOnTheCallersGoroutine(t *testing.T) {
	cl := startNodes(t, 3)
	var buf syncBuffer
	h := &panicHook{when: func(ev Event) bool {
		a, ok := ev.(AttemptEvent)
		return !ok || a.Obtained
	}}
	c := newClient(t, cl.clients, WithHook(h), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	other := newClient(t, cl.clients)
	ctx := context.Background()
	var l *Lock
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = errors.New("Obtain panicked")
			}
		}()
		l, err = c.Obtain(ctx, "p", 10*time.Second)
	}()
	if err != nil {
		// The key the panicking obtain left behind: whose is it?
		_, oerr := other.TryObtain(ctx, "p", 10*time.Second)
		t.Fatalf("Obtain with a panicking hook: %v; another Client's TryObtain then: %v", err, oerr)
	}
	if h.count("attempt") != 1 || h.count("obtain") != 1 {
		t.Fatalf("hook saw %v, want one successful attempt and one obtain", h.seen)
	}
	if _, err := other.TryObtain(ctx, "p", 10*time.Second); !errors.Is(err, ErrHeld) {
		t.Fatalf("another Client while the lock is held: %v, want ErrHeld", err)
	}
	if err := l.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l2, err := other.TryObtain(ctx, "p", 10*time.Second)
	if err != nil {
		t.Fatalf("another Client after the release: %v", err)
	}
	_ = l2.Release(ctx)
	if h.count("release") != 1 || h.count("refresh") != 1 {
		t.Fatalf("hook saw %v, want its refresh and release too", h.seen)
	}
	out := buf.String()
	if n := strings.Count(out, "the hook panicked"); n != 1 {
		t.Fatalf("%d log lines about the hook's panics, want 1 (at most one a minute):\n%s", n, out)
	}
	if !strings.Contains(out, "hook bug: attempt") || !strings.Contains(out, "redlock.AttemptEvent") {
		t.Fatalf("the log line does not name the panic and the event:\n%s", out)
	}
}

// A hook that panics on the keep-alive's goroutine does not kill the
// process, and the lock stays held and refreshed.
func TestHookPanicInTheKeepAlive(t *testing.T) {
	cl := startNodes(t, 1)
	h := &panicHook{when: func(ev Event) bool { _, ok := ev.(RefreshEvent); return ok }}
	c := newClient(t, cl.clients, WithHook(h))
	ctx := context.Background()
	l, err := c.Obtain(ctx, "ka", time.Second, WithAutoRefresh(), WithRefreshInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "three automatic refreshes", func() bool { return h.count("refresh") >= 3 })
	if err := l.Err(); err != nil {
		t.Fatalf("lock after refreshes whose events panicked: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// A hook that panics on the sampler's goroutine (WithAdaptiveTTL) does not
// kill the process; the sampler goes on.
func TestHookPanicInTheSampler(t *testing.T) {
	cl := startNodes(t, 1)
	h := &panicHook{when: func(ev Event) bool { _, ok := ev.(SampleEvent); return ok }}
	c := newClient(t, cl.clients, WithHook(h),
		WithAdaptiveTTL(AdaptiveTTL{Min: 500 * time.Millisecond, Max: 10 * time.Second, SampleInterval: 20 * time.Millisecond}))
	l, err := c.TryObtain(context.Background(), "s", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "three samples", func() bool { return h.count("sample") >= 3 })
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// A hook that panics on the breaker's probe goroutine does not kill the
// process; the breaker opens, probes and closes as usual. Hooks joined
// after the panicking one get every event.
func TestHookPanicInTheBreakerProbe(t *testing.T) {
	cl := startNodes(t, 3)
	h := &panicHook{when: func(ev Event) bool { _, ok := ev.(BreakerEvent); return ok }}
	var after atomic.Int32
	c := newClient(t, cl.clients, WithHook(JoinHooks(h, hookFunc(func(ev Event) {
		if _, ok := ev.(BreakerEvent); ok {
			after.Add(1)
		}
	}))), WithNodeTimeout(150*time.Millisecond), WithBreaker(2, 100*time.Millisecond))
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	untilBreakerOpen(t, c, "b")
	// The probes run on the breaker's goroutine, every cooldown.
	eventually(t, "a probe (half_open)", func() bool { return h.count("breaker") >= 2 })
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the breaker closes", func() bool { return c.BreakerState() == "closed" })
	if n, m := h.count("breaker"), int(after.Load()); m < n {
		t.Fatalf("the hook joined after the panicking one saw %d BreakerEvents of %d", m, n)
	}
	l, err := c.TryObtain(context.Background(), "b", time.Second)
	if err != nil {
		t.Fatalf("TryObtain after the breaker closed: %v", err)
	}
	_ = l.Release(context.Background())
}

type hookFunc func(Event)

func (f hookFunc) Observe(_ context.Context, ev Event) { f(ev) }
