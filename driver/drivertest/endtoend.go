package drivertest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// recorder is a redlock.Hook that keeps what ended each wait.
type recorder struct {
	mu     sync.Mutex
	wokeBy []string
}

func (r *recorder) Observe(_ context.Context, e redlock.Event) {
	if w, ok := e.(redlock.WaitEvent); ok {
		r.mu.Lock()
		r.wokeBy = append(r.wokeBy, string(w.WokenBy))
		r.mu.Unlock()
	}
}

func (r *recorder) woken() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.wokeBy)
}

// newClient returns a redlock Client over nodes, closed when the test
// ends: a node timeout that a loaded machine meets, and the restart guard
// off (the suite's servers were just started, and would recover for a
// minute).
func newClient(t *testing.T, nodes []driver.Node, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(250 * time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff)}, opts...)
	c, err := redlock.NewFromNodes(nodes, opts...)
	if err != nil {
		t.Fatalf("NewFromNodes: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockKey is the key of the lock name under the default prefix.
func lockKey(t testing.TB, name string) string {
	t.Helper()
	k, err := keys.Layout{Prefix: limits.Prefix}.Lock(name)
	must(t, "lock key", err)
	return k
}

// handover has holder obtain name, waiter wait for it in another Client,
// holder refresh and release, and checks that the waiter obtains it at
// once, woken by the release's notification, with a larger fencing token.
// sharded reads the subscriptions with PUBSUB SHARDNUMSUB, on masters.
func handover(t *testing.T, holder, waiter *redlock.Client, rec *recorder, subscribers func(channel string) int64) {
	t.Helper()
	ctx := ctxFor(t, 6*patience)
	name := unique("handover")
	l1, err := holder.Obtain(ctx, name, time.Minute)
	must(t, "Obtain", err)
	if l1.Token() <= 0 {
		t.Errorf("token %d, want a positive fencing token", l1.Token())
	}
	// The waiter's retry delay and the holder's TTL are far longer than
	// the test waits: only a notification can wake it in time.
	type result struct {
		l   *redlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Obtain(ctx, name, time.Minute, redlock.WithRetryDelay(time.Minute, time.Minute))
		got <- result{l, err}
	}()
	channel := keys.Channel(lockKey(t, name))
	eventually(t, "the waiter subscribes", patience, func() bool { return subscribers(channel) >= 1 })
	// Give the waiter time to look for a missed release after
	// subscribing: from then on, only the release's message wakes it.
	time.Sleep(300 * time.Millisecond)
	must(t, "Refresh", l1.Refresh(ctx, time.Minute))
	if l1.TTL() <= 0 || l1.Err() != nil {
		t.Fatalf("after Refresh: TTL %v, Err %v", l1.TTL(), l1.Err())
	}
	released := time.Now()
	must(t, "Release", l1.Release(ctx))
	timer := time.NewTimer(patience)
	defer timer.Stop()
	var r result
	select {
	case r = <-got:
	case <-timer.C:
		t.Fatalf("the waiter did not obtain the lock within %v of its release (woken by: %v)", patience, rec.woken())
	}
	must(t, "the waiter's Obtain", r.err)
	t.Logf("handover in %v, waits ended by %v", time.Since(released), rec.woken())
	if !slices.Contains(rec.woken(), "release") {
		t.Errorf("the waiter's waits ended by %v, want one by a release", rec.woken())
	}
	if r.l.Token() <= l1.Token() {
		t.Errorf("the next holder's token %d is not above the previous %d", r.l.Token(), l1.Token())
	}
	must(t, "Refresh of the new holder", r.l.Refresh(ctx, time.Minute))
	must(t, "Release of the new holder", r.l.Release(ctx))
	if err := r.l.Release(ctx); err != nil {
		t.Errorf("a second Release: %v, want nil", err)
	}
	// Do: under the lock, with automatic refresh.
	ran := false
	must(t, "Do", waiter.Do(ctx, name, time.Minute, func(ctx context.Context) error {
		ran = ctx.Err() == nil
		return nil
	}))
	if !ran {
		t.Error("Do did not run its function under a live context")
	}
}

// A redlock Client over the driver's nodes obtains, waits (notified),
// refreshes and releases, with fencing tokens, on n nodes.
func testEndToEnd(t *testing.T, d Driver, n int) {
	servers := redistest.Start(t, n)
	nodes := func() []driver.Node {
		var ns []driver.Node
		for _, s := range servers {
			ns = append(ns, d.Standalone(t, s.Addr()))
		}
		return ns
	}
	admin := nodes()
	holder := newClient(t, admin)
	rec := &recorder{}
	waiter := newClient(t, nodes(), redlock.WithHook(rec))
	handover(t, holder, waiter, rec, func(channel string) int64 {
		least := int64(-1)
		for _, a := range admin {
			if c := numsub(t, a, channel, false); least < 0 || c < least {
				least = c
			}
		}
		return least
	})

	// Without configuration records the acquires read each node's
	// identity in their own pipelines (driver.Node.Pipe), with no first
	// contact: a first obtain through the driver locks, and one server
	// under a second spelling of its address is refused by the first
	// obtain.
	if n > 1 {
		ctx := ctxFor(t, 4*patience)
		plain := newClient(t, nodes(), redlock.WithConfigRecords(false))
		l, err := plain.TryObtain(ctx, unique("fold"), 10*time.Second)
		must(t, "the first obtain without records", err)
		must(t, "its release", l.Release(ctx))
		twice := newClient(t, []driver.Node{d.Standalone(t, servers[0].Addr()), d.Standalone(t, "localhost:"+strconv.Itoa(servers[0].Port())), d.Standalone(t, servers[1].Addr())},
			redlock.WithConfigRecords(false))
		if _, err := twice.TryObtain(ctx, unique("twice"), 10*time.Second); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "are one redis-server process") {
			t.Errorf("one server under two spellings, without records: %v, want ErrInvalid", err)
		}
	}

	// Bad input: the same node twice, a nil node.
	if _, err := redlock.NewFromNodes([]driver.Node{admin[0], admin[0]}); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("NewFromNodes with one node twice: %v, want ErrInvalid", err)
	}
	if _, err := redlock.NewFromNodes([]driver.Node{admin[0], d.Standalone(t, servers[0].Addr())}); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("NewFromNodes with one server twice: %v, want ErrInvalid", err)
	}
	if _, err := redlock.NewFromNodes([]driver.Node{nil}); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("NewFromNodes with a nil node: %v, want ErrInvalid", err)
	}
}

// With one node of three frozen, a Client obtains, waits and releases;
// its Close returns.
func testEndToEndFrozen(t *testing.T, d Driver) {
	canFreeze(t)
	servers := redistest.Start(t, 3)
	var hs, ws []driver.Node
	for _, s := range servers {
		hs = append(hs, d.Standalone(t, s.Addr()))
		ws = append(ws, d.Standalone(t, s.Addr()))
	}
	holder, err := redlock.NewFromNodes(hs, redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff))
	must(t, "NewFromNodes", err)
	waiter, err := redlock.NewFromNodes(ws, redlock.WithNodeTimeout(250*time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff))
	must(t, "NewFromNodes", err)
	t.Cleanup(func() { _ = holder.Close(); _ = waiter.Close() }) // Close is idempotent
	ctx := ctxFor(t, 6*patience)
	// Subscriptions on every node first, so that the frozen one holds
	// one.
	l, err := holder.Obtain(ctx, unique("warm"), time.Minute)
	must(t, "Obtain", err)
	must(t, "Release", l.Release(ctx))

	must(t, "pause", servers[2].Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = servers[2].Resume()
		}
	}()
	for range 3 {
		start := time.Now()
		l, err := holder.TryObtain(ctx, unique("frozen"), time.Minute)
		if err != nil {
			t.Fatalf("TryObtain with one node of three frozen: %v", err)
		}
		if took := time.Since(start); took > patience {
			t.Errorf("TryObtain took %v with one node frozen", took)
		}
		must(t, "Release", l.Release(ctx))
	}
	// A wait with a frozen node: the waiter subscribes on the live ones.
	name := unique("frozen-wait")
	l1, err := holder.Obtain(ctx, name, time.Minute)
	must(t, "Obtain", err)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Obtain(ctx, name, time.Minute, redlock.WithRetryDelay(time.Minute, time.Minute))
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Release once the waiter waits: subscribed on both live nodes. (A
	// fixed second was too short on a loaded machine: the waiter's first
	// pass waits for the frozen node three times, its identity, its record
	// and its acquire, before it subscribes.)
	key, err := keys.Layout{Prefix: "redlock:"}.Lock(name)
	must(t, "the lock's key", err)
	for deadline := time.Now().Add(patience); ; {
		subscribed := 0
		for _, n := range hs[:2] {
			v, err := n.Do(ctx, "PUBSUB", "NUMSUB", keys.Channel(key))
			if a, ok := v.([]any); err == nil && ok && len(a) == 2 && a[1] != int64(0) {
				subscribed++
			}
		}
		if subscribed == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not subscribe on the live nodes within %v", patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, "Release", l1.Release(ctx))
	timer := time.NewTimer(3 * patience)
	defer timer.Stop()
	select {
	case err := <-got:
		must(t, "the waiter's Obtain", err)
	case <-timer.C:
		t.Fatal("the waiter did not obtain the lock after its release, with one node frozen")
	}
	closed := make(chan struct{})
	go func() { _ = waiter.Close(); close(closed) }()
	if !waitFor(closed, 3*patience) {
		resumed = true
		_ = servers[2].Resume()
		<-closed
		t.Fatal("Close did not return while a node was frozen")
	}
	resumed = true
	must(t, "resume", servers[2].Resume())
}
