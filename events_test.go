package redlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The automatic refreshes and the loss of Do's lock carry Do's context.
func TestHookDoEventsCarryDosContext(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithHook(rec), WithNodeTimeout(100*time.Millisecond))
	doCtx := context.WithValue(context.Background(), ctxKey{}, "do")
	err := c.Do(doCtx, "do", 300*time.Millisecond, func(ctx context.Context) error {
		eventually(t, "an automatic refresh", func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return len(rec.refreshs) >= 1
		})
		// Lose it: another owner's value takes the key, and the next
		// refresh is refused.
		if err := cl.clients[0].Set(context.Background(), "{redlock:do}", "another", time.Minute).Err(); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	}, WithRefreshInterval(50*time.Millisecond))
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Do: %v, want ErrLost", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range []string{"Obtain", "Refresh", "Release", "Lost"} {
		if len(rec.ctxs[m]) == 0 || slices.ContainsFunc(rec.ctxs[m], func(v any) bool { return v != "do" }) {
			t.Errorf("%s contexts %v, want Do's", m, rec.ctxs[m])
		}
	}
}

func TestHookSeesTheLifeCycle(t *testing.T) {
	cl := startNodes(t, 3)
	rec, second := &eventRecorder{}, &eventRecorder{}
	c := newClient(t, cl.clients, WithHook(JoinHooks(rec, second)), WithNodeTimeout(100*time.Millisecond))
	// Each call's context reaches the hook with its events.
	ctx := context.WithValue(context.Background(), ctxKey{}, "holder")
	waiterCtx := context.WithValue(context.Background(), ctxKey{}, "waiter")

	held, err := c.TryObtain(ctx, "observed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A contender waits, and is woken by the release.
	done := make(chan error, 1)
	go func() {
		l, err := c.Obtain(waiterCtx, "observed", time.Minute, WithRetryDelay(time.Minute, 2*time.Minute))
		if err == nil {
			err = l.Release(waiterCtx)
		}
		done <- err
	}()
	// The holder's attempt, then the contender's first (refused); once it
	// is subscribed, it waits for the release.
	eventually(t, "the contender waits", func() bool {
		rec.mu.Lock()
		attempts := len(rec.attempts)
		rec.mu.Unlock()
		return attempts >= 2 && subscribed(t, cl.clients, "observed")
	})
	if err := held.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A lock that runs out.
	short, err := c.TryObtain(ctx, "short", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()         // closed once the hook has seen the loss
	_ = short.Release(ctx) // its ReleaseEvent says it was lost before

	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) < 4 || !rec.attempts[0].Obtained || rec.attempts[0].Token <= 0 || len(rec.attempts[0].Nodes) != 3 {
		t.Fatalf("attempts %+v: want the first obtained with a token and three node results", rec.attempts)
	}
	var refused bool
	for _, a := range rec.attempts {
		for _, n := range a.Nodes {
			if errors.Is(n.Err, ErrHeld) {
				refused = true
			}
		}
	}
	if !refused {
		t.Error("no attempt recorded a node answering ErrHeld")
	}
	var byRelease bool
	for _, w := range rec.waits {
		byRelease = byRelease || w.WokenBy == "release"
	}
	if !byRelease {
		t.Errorf("waits %+v: want one woken by the release", rec.waits)
	}
	if len(rec.obtains) != 3 || rec.obtains[1].Attempts < 2 || rec.obtains[1].Err != nil {
		t.Errorf("obtains %+v: want three, the contender's with several attempts", rec.obtains)
	}
	if len(rec.refreshs) != 1 || rec.refreshs[0].Auto || rec.refreshs[0].Err != nil {
		t.Errorf("refreshes %+v: want one manual, successful", rec.refreshs)
	}
	// The waiter, woken by the holder's release, may release (and report
	// it) before the holder's Release has reported its own.
	holderRelease := slices.IndexFunc(rec.releases, func(e ReleaseEvent) bool { return e.Token == held.Token() })
	if len(rec.releases) != 3 || holderRelease < 0 || holderRelease == 2 {
		t.Fatalf("releases %+v: want three, one the holder's, the last the short lock's", rec.releases)
	}
	for i, r := range rec.releases {
		if r.Lost != (r.Name == "short") {
			t.Errorf("release %d of %q: Lost is %v; want true for the lost lock only", i, r.Name, r.Lost)
		}
	}
	if r := rec.releases[holderRelease]; r.Held <= r.Elapsed || r.Elapsed <= 0 {
		t.Errorf("holder's release %+v: want the release's duration, and held longer than that", r)
	}
	if len(rec.lost) != 1 || rec.lost[0].Name != "short" || !errors.Is(rec.lost[0].Err, ErrLost) || rec.lost[0].Token != short.Token() {
		t.Errorf("lost %+v: want the short lock, with its token", rec.lost)
	}
	// The attempts and waits of an obtain carry its ObtainID and context.
	ids := map[uint64]any{}
	for i, o := range rec.obtains {
		if o.ObtainID == 0 || ids[o.ObtainID] != nil {
			t.Fatalf("obtain %d: ObtainID %d, want unique and not 0", i, o.ObtainID)
		}
		ids[o.ObtainID] = rec.ctxs["Obtain"][i]
	}
	for i, a := range rec.attempts {
		if want := ids[a.ObtainID]; want == nil || rec.ctxs["Attempt"][i] != want {
			t.Errorf("attempt %d: obtain %d and context %v; want an obtain's ID and its context %v", i, a.ObtainID, rec.ctxs["Attempt"][i], want)
		}
	}
	for i, w := range rec.waits {
		if ids[w.ObtainID] != "waiter" || rec.ctxs["Wait"][i] != "waiter" {
			t.Errorf("wait %d: obtain %d with context %v, want the waiter's", i, w.ObtainID, rec.ctxs["Wait"][i])
		}
	}
	if want := []any{"holder"}; !slices.Equal(rec.ctxs["Refresh"], want) {
		t.Errorf("refresh contexts %v, want %v", rec.ctxs["Refresh"], want)
	}
	if got := rec.ctxs["Release"]; len(got) != 3 || got[holderRelease] != "holder" || got[1-holderRelease] != "waiter" || got[2] != "holder" {
		t.Errorf("release contexts %v, want the holder's and the waiter's, then the holder's", got)
	}
	if want := []any{nil}; !slices.Equal(rec.ctxs["Lost"], want) {
		t.Errorf("lost contexts %v, want %v: no call's", rec.ctxs["Lost"], want)
	}
	second.mu.Lock()
	defer second.mu.Unlock()
	if len(second.attempts) != len(rec.attempts) || len(second.releases) != len(rec.releases) {
		t.Errorf("JoinHooks: the second hook saw %d attempts and %d releases, the first %d and %d",
			len(second.attempts), len(second.releases), len(rec.attempts), len(rec.releases))
	}
}

// orderHook notes the ObtainEvent (when its Observe returns) and the
// ReleaseEvent (when its Observe starts) it hears; see
// TestHookHearsALocksObtainFirst.
type orderHook struct {
	mu       sync.Mutex
	heard    []string
	inObtain chan struct{}
	released chan struct{}
}

func (h *orderHook) Observe(_ context.Context, ev Event) {
	switch ev.(type) {
	case ObtainEvent:
		close(h.inObtain)
		select {
		case <-h.released:
		case <-time.After(2 * time.Second):
		}
		h.note("obtain")
	case ReleaseEvent:
		h.note("release")
		h.released <- struct{}{}
	}
}

func (h *orderHook) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heard = append(h.heard, s)
}

func TestHookSeesAutomaticRefresh(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithHook(rec), WithNodeTimeout(100*time.Millisecond))
	l, err := c.TryObtain(context.Background(), "auto", 600*time.Millisecond, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "an automatic refresh is reported", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.refreshs) > 0 && rec.refreshs[0].Auto && rec.refreshs[0].Err == nil
	})
	_ = l.Release(context.Background())
}

func TestLoggerReportsLossAndRecovery(t *testing.T) {
	cl := startNodes(t, 1)
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	guardedClient := newClient(t, cl.clients, WithLogger(logger), WithRestartGuard(GuardOn))
	for range 3 {
		_, _ = guardedClient.TryObtain(context.Background(), "x", time.Second)
	}
	c := newClient(t, cl.clients, WithLogger(logger), WithNodeTimeout(50*time.Millisecond))
	l, err := c.TryObtain(context.Background(), "logged", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	eventually(t, "the loss is logged", func() bool {
		out := buf.String()
		return strings.Contains(out, "lock lost") && strings.Contains(out, "name=logged")
	})
	if n := strings.Count(buf.String(), "node recovering"); n != 1 {
		t.Errorf("%d lines about the recovering node after three attempts, want 1 (rate-limited):\n%s", n, buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// With no hook and no logger, observing costs no allocation: an
// obtain-release cycle on one node allocates no more than it did before
// hooks existed (80, measured by BenchmarkCycle before they were added; 72
// without -race since the guard's script arguments are encoded once).
func TestNoHookNoAllocation(t *testing.T) {
	cl := startNodes(t, 1)
	ctx := context.Background()
	cycle := func(c *Client) float64 {
		return testing.AllocsPerRun(200, func() {
			l, err := c.TryObtain(ctx, "allocs", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	bare := cycle(newClient(t, cl.clients))
	hooked := cycle(newClient(t, cl.clients, WithHook(&eventRecorder{})))
	if bare > 80 {
		t.Errorf("a cycle without a hook allocates %v times, more than the 80 measured before hooks", bare)
	}
	t.Logf("allocations per cycle: %v without a hook, %v with one", bare, hooked)
}

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
