package redlock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// isFamilyAcquire recognises family.lua by its shape: three keys and ten
// arguments.
func isFamilyAcquire(cmd redis.Cmder) bool { return len(cmd.Args()) == 16 }

// TestReentryAfterCountersExpired plays, on three real nodes with the
// restart guard on, a re-entry that finds the name's fencing counters
// expired while the owner holds the lock (docs/lock-family.md, "Fencing
// tokens"; a counter expires FenceTTL, an hour, after the last token
// issued on its node):
//
//  1. Owner job-1 takes H1 on the name's first use. n1 and n2 vote first
//     with one counter, T; n3's vote arrives after the decision and
//     records its own, higher, counter as the owner's token there.
//  2. Refreshes and re-entries do not renew the counters (checked on
//     their expiries).
//  3. An hour passes: the counters expire (PEXPIRE here), while H1 is
//     held.
//  4. n2 goes down.
//  5. The owner re-enters (H2): n1 and n3 disagree on the recorded token,
//     so the client's rule 2 counts one more than each node's counter.
//
// A re-entry that reported a missing counter as 0 gave H2 token 1, below
// H1's, and its seal wrote 1 into both counters, so that another owner
// after it got the epoch's floor + 1, below T too. The re-entry must
// report the counter as a token's issue sees it (seeded from the node's
// time), so H2's token is above H1's, and so is the next owner's.
func TestReentryAfterCountersExpired(t *testing.T) {
	const (
		name  = "job"
		key   = "{redlock:" + name + "}" // the default prefix
		fence = key + ":fence"
		ttl   = 2 * time.Second // the max TTL: the guard's recovery
	)
	cl := startNodes(t, 3)
	ctx := context.Background()

	// The owner's Client has go-redis clients of its own, so that the hook
	// on n3 sees only its requests. Armed, it holds back the first family
	// acquire to n3 until the test lets it through: a late vote.
	var armed atomic.Bool
	late := newSignal()
	t.Cleanup(late.fire)
	var nodes []redis.UniversalClient
	for i, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		if i == 2 {
			c.AddHook(aroundEval(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				if isFamilyAcquire(cmd) && armed.CompareAndSwap(true, false) {
					select {
					case <-late.c:
					case <-time.After(20 * time.Second):
					}
					// The round has been decided by then: send it anyway.
					return next(context.WithoutCancel(ctx), cmd)
				}
				return next(ctx, cmd)
			}))
		}
		nodes = append(nodes, c)
	}
	c := guarded(t, nodes, ttl, WithNodeTimeout(500*time.Millisecond))

	// Counters as a name's first use seeds them from the nodes' clocks: n1
	// and n2 at one millisecond, n3 a millisecond later. The millisecond
	// is no earlier than the end of any node's recovery (the epoch's
	// floor; guarded waited only for a quorum of them), so that the votes
	// issue from the counters as written.
	var ms int64
	for _, n := range cl.clients {
		now, err := n.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		until, err := n.HGet(ctx, "{redlock:}:epoch", "until").Int64()
		if err != nil {
			t.Fatalf("the epoch record: %v", err)
		}
		ms = max(ms, now.UnixMilli(), until)
	}
	x := ms * 1024
	eventually(t, "every node is out of recovery", func() bool {
		for _, n := range cl.clients {
			if now, err := n.Time(ctx).Result(); err != nil || now.UnixMilli() <= ms {
				return false
			}
		}
		return true
	})
	for i, v := range []int64{x, x, x + 1024} {
		if err := cl.clients[i].Set(ctx, fence, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// 1. H1, decided on n1 and n2; then n3's late vote.
	armed.Store(true)
	h1, err := c.Reentrant(name, "job-1").TryObtain(ctx, ttl, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Release(ctx)
	if h1.Token() != x+1 {
		t.Fatalf("H1: token %d, want %d (n1 and n2's votes)", h1.Token(), x+1)
	}
	late.fire()
	var recorded map[string]string
	defer func() {
		if t.Failed() {
			t.Logf("n3's lock: %v (x = %d)", recorded, x)
		}
	}()
	eventually(t, "n3's late vote records its counter", func() bool {
		recorded = cl.clients[2].HGetAll(ctx, key).Val()
		return recorded["t"] == strconv.FormatInt(x+1025, 10)
	})

	// 2. A refresh and a re-entry (rule 1: n1 and n2 agree) renew no
	// counter.
	before := counterPTTLs(t, cl.clients, fence)
	time.Sleep(100 * time.Millisecond)
	if err := h1.Refresh(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	r, err := c.Reentrant(name, "job-1").TryObtain(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token() != h1.Token() {
		t.Fatalf("re-entry: token %d, want H1's %d", r.Token(), h1.Token())
	}
	for i, p := range counterPTTLs(t, cl.clients, fence) {
		if p >= before[i] {
			t.Fatalf("n%d: the counter's expiry went from %v to %v: renewed by a refresh or a re-entry", i+1, before[i], p)
		}
	}
	// (A release retires the hold's token: it raises the counters.)
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// 3. The counters expire; H1 is held. A request that outlived its
	// round (the re-entry's or the release's on a node that answered after
	// the node timeout, on a loaded machine) may still write a counter
	// after the first expiry: expire again until none is left.
	eventually(t, "the counters expire", func() bool {
		gone := true
		for _, n := range cl.clients {
			if n.Exists(ctx, fence).Val() != 0 {
				gone = false
				if err := n.PExpire(ctx, fence, time.Millisecond).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		return gone
	})
	if err := h1.Refresh(ctx, ttl); err != nil {
		t.Fatalf("H1 after the counters expired: %v", err)
	}

	// 4. n2 goes down.
	if err := cl.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}

	// 5. H2: n1 (t = T) and n3 (t = T + 1024) disagree: rule 2.
	h2, err := c.Reentrant(name, "job-1").TryObtain(ctx, ttl, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("H1 token %d, H2 (re-entry after the counters expired) token %d", h1.Token(), h2.Token())
	if h2.Token() <= h1.Token() {
		t.Errorf("H2, a re-entry granted after H1 while H1 is held, got token %d, not above H1's %d", h2.Token(), h1.Token())
	}
	// The next owner, once job-1 has let go.
	if err := h2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := c.Reentrant(name, "job-2").TryObtain(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	t.Logf("next owner's token %d", next.Token())
	if next.Token() <= max(h1.Token(), h2.Token()) {
		t.Errorf("the next owner got token %d, not above H1's %d and H2's %d", next.Token(), h1.Token(), h2.Token())
	}
}

// counterPTTLs reads a counter's remaining time on every node.
func counterPTTLs(t *testing.T, nodes []redis.UniversalClient, key string) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i, n := range nodes {
		p, err := n.PTTL(context.Background(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if p <= 0 {
			t.Fatalf("n%d: the counter %s has no expiry (PTTL %v)", i+1, key, p)
		}
		out = append(out, p)
	}
	return out
}
