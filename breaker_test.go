package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/faultproxy"
)

// majorityFault is a way to take nodes 0..2 of five away and give them
// back: killed, frozen, or cut off by a partition.
type majorityFault struct {
	name    string
	proxied bool
	down    func(t *testing.T, cl *cluster, proxies []*faultproxy.Proxy, i int)
	up      func(t *testing.T, cl *cluster, proxies []*faultproxy.Proxy, i int)
}

var majorityFaults = []majorityFault{
	{
		name: "kill",
		down: func(t *testing.T, cl *cluster, _ []*faultproxy.Proxy, i int) {
			if err := cl.servers[i].Kill(); err != nil {
				t.Fatal(err)
			}
		},
		up: func(t *testing.T, cl *cluster, _ []*faultproxy.Proxy, i int) {
			if err := cl.servers[i].Restart(); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name: "freeze",
		down: func(t *testing.T, cl *cluster, _ []*faultproxy.Proxy, i int) {
			if err := cl.servers[i].Pause(); err != nil {
				t.Fatal(err)
			}
		},
		up: func(t *testing.T, cl *cluster, _ []*faultproxy.Proxy, i int) {
			if err := cl.servers[i].Resume(); err != nil {
				t.Fatal(err)
			}
		},
	},
	{
		name:    "partition",
		proxied: true,
		down: func(_ *testing.T, _ *cluster, p []*faultproxy.Proxy, i int) {
			p[i].SetBlackhole(true)
		},
		up: func(_ *testing.T, _ *cluster, p []*faultproxy.Proxy, i int) {
			p[i].Heal()
		},
	},
}

// proxiedClients returns a client per node that reaches it through a fault
// proxy, and the proxies; both are closed when the test ends.
func proxiedClients(t *testing.T, cl *cluster) ([]redis.UniversalClient, []*faultproxy.Proxy) {
	t.Helper()
	var clients []redis.UniversalClient
	var proxies []*faultproxy.Proxy
	for _, s := range cl.servers {
		p, err := faultproxy.New(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close(); _ = p.Close() })
		clients = append(clients, c)
		proxies = append(proxies, p)
	}
	return clients, proxies
}

// untilBreakerOpen makes TryObtain attempts (at most 40, within 20 s)
// until one is refused by the breaker, and returns that error.
func untilBreakerOpen(t *testing.T, c *Client, name string) *QuorumError {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for i := 0; i < 40 && time.Now().Before(deadline); i++ {
		var l *Lock
		l, err = c.TryObtain(context.Background(), name, 10*time.Second)
		if err == nil {
			_ = l.Release(context.Background())
			continue
		}
		var be *QuorumError
		if errors.Is(err, ErrBreakerOpen) && errors.As(err, &be) {
			return be
		}
	}
	t.Fatalf("the breaker did not open: last error %v", err)
	return nil
}

func TestBreakerOpensAndClosesOnRealNodes(t *testing.T) {
	for _, f := range majorityFaults {
		t.Run(f.name, func(t *testing.T) {
			cl := startNodes(t, 5)
			nodes := cl.clients
			var proxies []*faultproxy.Proxy
			if f.proxied {
				nodes, proxies = proxiedClients(t, cl)
			}
			rec := &eventRecorder{}
			c := newClient(t, nodes, WithNodeTimeout(150*time.Millisecond), WithBreaker(2, 300*time.Millisecond), WithHook(rec))
			ctx := context.Background()
			l, err := c.TryObtain(ctx, "before", 10*time.Second)
			if err != nil {
				t.Fatalf("TryObtain with every node up: %v", err)
			}
			_ = l.Release(ctx)

			for i := range 3 {
				f.down(t, cl, proxies, i)
			}
			be := untilBreakerOpen(t, c, "during")
			if !errors.Is(be, ErrBreakerOpen) || !errors.Is(be, ErrNotObtained) {
				t.Fatalf("breaker error %v: want ErrBreakerOpen and ErrNotObtained", be)
			}
			var down []int
			for _, n := range be.Nodes {
				down = append(down, n.Node)
			}
			if !slices.Equal(down, []int{0, 1, 2}) || be.Agreed != 2 || be.Need != 3 {
				t.Fatalf("breaker error names nodes %v, %d reachable of %d needed: want nodes [0 1 2], 2 of 3: %v", down, be.Agreed, be.Need, be)
			}
			if st := c.BreakerState(); st == "closed" {
				t.Fatalf("state %v after a refusal", st)
			}

			// Open: TryObtain fails without an acquire round.
			before := rec.attemptCount()
			for range 5 {
				if _, err := c.TryObtain(ctx, "during", 10*time.Second); !errors.Is(err, ErrBreakerOpen) {
					t.Fatalf("TryObtain while open: %v, want ErrBreakerOpen", err)
				}
			}
			if got := rec.attemptCount() - before; got != 0 {
				t.Fatalf("%d acquire rounds while the breaker was open, want 0", got)
			}
			// Obtain waits, bounded by its context.
			wctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
			_, err = c.Obtain(wctx, "during", 10*time.Second)
			cancel()
			if !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Obtain while open: %v, want ErrBreakerOpen, ErrNotObtained and DeadlineExceeded", err)
			}

			// Back: a probe closes the breaker, and the waiting Obtain gets
			// the lock.
			for i := range 3 {
				f.up(t, cl, proxies, i)
			}
			wctx, cancel = context.WithTimeout(ctx, 20*time.Second)
			l, err = c.Obtain(wctx, "after", 10*time.Second)
			cancel()
			if err != nil {
				t.Fatalf("Obtain after the nodes came back: %v (transitions %v)", err, rec.transitions())
			}
			if l.Degraded() || l.Token() <= 0 {
				t.Fatalf("lock after the breaker closed: degraded %v, token %d", l.Degraded(), l.Token())
			}
			_ = l.Release(ctx)
			if st := c.BreakerState(); st != "closed" {
				t.Fatalf("state %v after the nodes came back", st)
			}
			tr := rec.transitions()
			if len(tr) < 3 || tr[0] != "closed>open" || tr[1] != "open>half_open" || tr[len(tr)-1] != "half_open>closed" {
				t.Fatalf("transitions %v: want closed>open, open>half_open, …, half_open>closed", tr)
			}
		})
	}
}

func TestBreakerOptions(t *testing.T) {
	cl := startNodes(t, 1)
	for _, opts := range [][]Option{
		{WithBreaker(-1, 0)},
		{WithBreaker(0, -time.Second)},
		{WithoutBreaker(), WithDegradedMode(NewLocalLeases())},
	} {
		if _, err := New(cl.clients, opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("New with bad breaker options: %v, want ErrInvalid", err)
		}
	}
	// Off: a dead node is asked every time.
	if err := cl.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, cl.clients, WithoutBreaker())
	for range 2 * defaultBreakerFailures {
		_, err := c.TryObtain(context.Background(), "off", 10*time.Second)
		if errors.Is(err, ErrBreakerOpen) || !errors.Is(err, ErrNotObtained) {
			t.Fatalf("TryObtain with the breaker off: %v", err)
		}
	}
	if st := c.BreakerState(); st != "closed" {
		t.Fatalf("state %v with the breaker off", st)
	}
}

// degradedPair starts three nodes and two Clients that share one lease
// store, with the breaker's probes every 200 ms, and kills two nodes.
func degradedPair(t *testing.T, store LeaseStore, opts ...Option) (*cluster, *Client, *Client, *eventRecorder) {
	t.Helper()
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	base := []Option{WithNodeTimeout(150 * time.Millisecond), WithBreaker(2, 200*time.Millisecond), WithDegradedMode(store)}
	a := newClient(t, cl.clients, append(append(base[:len(base):len(base)], WithHook(rec)), opts...)...)
	// b has clients of its own to the same servers.
	var bn []redis.UniversalClient
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		bn = append(bn, c)
	}
	b := newClient(t, bn, append(base[:len(base):len(base)], opts...)...)
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	return cl, a, b, rec
}

// obtainDegraded makes TryObtain attempts (at most 40, within 20 s) until
// one returns a lock, which must be degraded.
func obtainDegraded(t *testing.T, c *Client, name string, ttl time.Duration, opts ...ObtainOption) *Lock {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for i := 0; i < 40 && time.Now().Before(deadline); i++ {
		var l *Lock
		if l, err = c.TryObtain(context.Background(), name, ttl, opts...); err == nil {
			if !l.Degraded() {
				t.Fatalf("lock %q obtained with a majority of nodes dead is not degraded (token %d)", name, l.Token())
			}
			return l
		}
		if errors.Is(err, ErrHeld) {
			t.Fatalf("TryObtain %q: %v", name, err)
		}
	}
	t.Fatalf("no degraded lock %q: last error %v", name, err)
	return nil
}

func TestDegradedLocalLeases(t *testing.T) {
	_, a, b, rec := degradedPair(t, NewLocalLeases())
	ctx := context.Background()
	la := obtainDegraded(t, a, "job", 10*time.Second)
	if tok := la.Token(); tok >= 0 {
		t.Fatalf("degraded token %d: want negative", tok)
	}
	if nd := len(rec.degraded()); nd != 1 {
		t.Fatalf("%d ObtainEvents of a degraded lock, want 1", nd)
	}
	// b fell back to the same store: it is excluded.
	untilBreakerOpenOrDegraded(t, b)
	if _, err := b.TryObtain(ctx, "job", 10*time.Second); !errors.Is(err, ErrHeld) || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("second client on the shared store: %v, want ErrHeld", err)
	}
	if err := la.Refresh(ctx, 10*time.Second); err != nil {
		t.Fatalf("refresh of a degraded lock while the breaker is open: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	lb := obtainDegraded(t, b, "job", 10*time.Second)
	if lb.Token() <= la.Token() {
		t.Fatalf("degraded tokens %d then %d: want increasing", la.Token(), lb.Token())
	}
	_ = lb.Release(ctx)

	// Do's function sees the degraded mode in its context.
	var seen bool
	if err := a.Do(ctx, "do", 10*time.Second, func(ctx context.Context) error {
		seen = IsDegraded(ctx)
		return nil
	}); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if !seen {
		t.Fatal("Do's function did not see IsDegraded")
	}
	if IsDegraded(ctx) {
		t.Fatal("IsDegraded on a plain context")
	}
}

// untilBreakerOpenOrDegraded makes attempts on a throwaway name until c's
// breaker is open.
func untilBreakerOpenOrDegraded(t *testing.T, c *Client) {
	t.Helper()
	for i := 0; i < 40 && c.BreakerState() == "closed"; i++ {
		l, _ := c.TryObtain(context.Background(), fmt.Sprintf("probe-%d", i), 10*time.Second)
		_ = l.Release(context.Background())
	}
	if c.BreakerState() == "closed" {
		t.Fatal("the breaker did not open")
	}
}

func TestDegradedLockRunsOut(t *testing.T) {
	store := NewLocalLeases()
	_, a, b, _ := degradedPair(t, store)
	// Not refreshed: it runs out at its validity, and the lease with it.
	l := obtainDegraded(t, a, "short", 400*time.Millisecond)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("degraded lock did not run out")
	}
	if err := l.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err of a degraded lock that ran out: %v, want ErrLost", err)
	}
	untilBreakerOpenOrDegraded(t, b)
	// The lease outlives the lock's loss deadline by the per-node timeout
	// and the drift allowance; then it is free.
	time.Sleep(time.Second)
	lb := obtainDegraded(t, b, "short", 10*time.Second)
	_ = lb.Release(context.Background())
}

func TestDegradedLockNotUpgradedWhenBreakerCloses(t *testing.T) {
	cl, a, _, rec := degradedPair(t, NewLocalLeases())
	ctx := context.Background()
	l := obtainDegraded(t, a, "held", 2*time.Second, WithAutoRefresh())
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// The breaker closes at a probe; the lock is not extended any more
	// and runs out, with ErrDegraded.
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("degraded lock still held 20 s after the nodes came back (breaker %v)", a.BreakerState())
	}
	if err := l.Err(); !errors.Is(err, ErrLost) || !errors.Is(err, ErrDegraded) {
		t.Fatalf("Err: %v, want ErrLost and ErrDegraded", err)
	}
	if err := l.Refresh(ctx, 2*time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after the run-out: %v, want ErrNotHeld", err)
	}
	_ = l.Release(ctx)
	rec.mu.Lock()
	lost := len(rec.lost)
	rec.mu.Unlock()
	if lost != 1 {
		t.Fatalf("%d LostEvents, want 1", lost)
	}
	// Obtained again, on the nodes.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l2, err := a.Obtain(wctx, "held", 2*time.Second)
	if err != nil {
		t.Fatalf("Obtain after the breaker closed: %v", err)
	}
	if l2.Degraded() || l2.Token() <= 0 {
		t.Fatalf("lock after the breaker closed: degraded %v, token %d", l2.Degraded(), l2.Token())
	}
	_ = l2.Release(ctx)
}

func TestDegradedModeOffChangesNothing(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients, WithNodeTimeout(150*time.Millisecond))
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	be := untilBreakerOpen(t, c, "x")
	if be == nil {
		t.Fatal("no breaker error")
	}
	// A bounded Obtain does not wait for the breaker: each refusal uses up
	// an attempt, and it ends without a context deadline.
	done := make(chan error, 1)
	go func() {
		_, err := c.Obtain(context.Background(), "x", 10*time.Second, WithMaxAttempts(4), WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrBreakerOpen) || !errors.Is(err, ErrNotObtained) {
			t.Fatalf("Obtain with WithMaxAttempts(4) while open: %v, want ErrBreakerOpen", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Obtain with WithMaxAttempts(4) still waiting for the breaker after 20 s")
	}
}

func TestLocalLeases(t *testing.T) {
	ctx := context.Background()
	s := NewLocalLeases()
	a, err := s.Acquire(ctx, "n", "a", time.Second)
	if err != nil || !a.Acquired || a.Version < 1 || a.Version >= MaxLeaseVersion {
		t.Fatalf("Acquire: %+v, %v", a, err)
	}
	again, _ := s.Acquire(ctx, "n", "a", time.Second)
	if !again.Acquired || again.Version != a.Version {
		t.Fatalf("idempotent Acquire: %+v, want version %d", again, a.Version)
	}
	b, _ := s.Acquire(ctx, "n", "b", time.Second)
	if b.Acquired || b.Remaining <= 0 {
		t.Fatalf("Acquire of a held lease: %+v", b)
	}
	if ok, _ := s.Extend(ctx, "n", "b", a.Version, time.Second); ok {
		t.Fatal("Extend by another owner succeeded")
	}
	if ok, _ := s.Extend(ctx, "n", "a", a.Version, time.Second); !ok {
		t.Fatal("Extend by the owner failed")
	}
	if ok, err := s.Release(ctx, "n", "b", a.Version); ok || err != nil {
		t.Fatalf("Release by another owner: %v, %v; want false", ok, err)
	}
	if ok, err := s.Release(ctx, "n", "a", a.Version); !ok || err != nil {
		t.Fatalf("Release by the owner: %v, %v; want true", ok, err)
	}
	if ok, _ := s.Release(ctx, "n", "a", a.Version); ok {
		t.Fatal("second Release: true, want false")
	}
	b, _ = s.Acquire(ctx, "n", "b", 20*time.Millisecond)
	if !b.Acquired || b.Version <= a.Version {
		t.Fatalf("Acquire after release: %+v, want a version above %d", b, a.Version)
	}
	time.Sleep(40 * time.Millisecond)
	if ok, _ := s.Extend(ctx, "n", "b", b.Version, time.Second); ok {
		t.Fatal("Extend of an expired lease succeeded")
	}
	if ok, _ := s.Release(ctx, "n", "b", b.Version); ok {
		t.Fatal("Release of an expired lease: true, want false")
	}
	c, _ := s.Acquire(ctx, "n", "c", time.Second)
	if !c.Acquired || c.Version <= b.Version {
		t.Fatalf("Acquire after expiry: %+v, want a version above %d", c, b.Version)
	}
}

// The breaker's opening reaches hooks joined by JoinHooks and the logger,
// and Close wakes an Obtain that waits for the breaker.
func TestBreakerLogsJoinedHooksAndClose(t *testing.T) {
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	var buf syncBuffer
	c, err := New(cl.clients, WithRestartGuard(GuardOff), WithNodeTimeout(150*time.Millisecond),
		WithHook(JoinHooks(&eventRecorder{}, rec)), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	untilBreakerOpen(t, c, "x")
	if tr := rec.transitions(); len(tr) == 0 || tr[0] != "closed>open" {
		t.Fatalf("joined hook saw transitions %v, want closed>open first", tr)
	}
	if log := buf.String(); !strings.Contains(log, "circuit breaker open") || !strings.Contains(log, cl.servers[0].Addr()) {
		t.Fatalf("log has no line about the breaker naming node 0:\n%s", log)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Obtain(context.Background(), "x", 10*time.Second)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // let Obtain start waiting (not needed for correctness)
	_ = c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Obtain waiting for the breaker, after Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake an Obtain waiting for the breaker")
	}
}

// A degraded lock is never extended once the breaker has closed after it
// was taken, even when the breaker opens again: a refresh refused with
// ErrDegraded is not followed by one that succeeds (lock d1), and a close
// and reopen between two refreshes is caught too (lock d2).
func TestDegradedLockNotExtendedAfterABreakerFlap(t *testing.T) {
	cl, a, _, _ := degradedPair(t, NewLocalLeases())
	ctx := context.Background()
	// A TTL that outlasts the flaps on a loaded machine: every refresh
	// below finds its lock valid and its lease in the store, so that only
	// the breaker's closing can refuse it.
	d1 := obtainDegraded(t, a, "flap-1", 30*time.Second)
	d2 := obtainDegraded(t, a, "flap-2", 30*time.Second)
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Restart(); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the breaker closes", func() bool { return a.BreakerState() == "closed" })
	if err := d1.Refresh(ctx, 30*time.Second); !errors.Is(err, ErrDegraded) {
		t.Fatalf("refresh of a degraded lock after the breaker closed: %v, want ErrDegraded", err)
	}
	for _, i := range []int{0, 1} {
		if err := cl.servers[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	untilBreakerOpenOrDegraded(t, a)
	for _, d := range []*Lock{d2, d1} {
		if err := d.Refresh(ctx, 30*time.Second); !errors.Is(err, ErrDegraded) {
			t.Fatalf("refresh of degraded lock %s once the breaker reopened: %v, want ErrDegraded", d.Name(), err)
		}
	}
}
