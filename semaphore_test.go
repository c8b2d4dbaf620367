package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// limits.PermitQuorum is the smallest q with (k+1)q > n*k: enough (k+1 permits
// would need more votes than n nodes of k permits can give) and no more
// (with q-1, k+1 sets fit on the nodes without any node in more than k).
func TestPermitQuorum(t *testing.T) {
	for _, tc := range []struct{ n, k, want int }{
		{1, 1, 1}, {1, 2, 1}, {1, limits.MaxPermits, 1},
		{3, 1, 2}, {3, 2, 3}, {3, 5, 3},
		{5, 1, 3}, {5, 2, 4}, {5, 3, 4}, {5, 4, 5}, {5, 100, 5},
		{7, 2, 5}, {0, 1, 0}, {5, 0, 0},
	} {
		if got := limits.PermitQuorum(tc.n, tc.k); got != tc.want {
			t.Errorf("limits.PermitQuorum(%d, %d) = %d, want %d", tc.n, tc.k, got, tc.want)
		}
	}
	for n := 1; n <= limits.MaxNodes; n++ {
		for k := 1; k <= 70; k++ {
			q := limits.PermitQuorum(n, k)
			if q > n || q < n/2+1 || (k+1)*q <= n*k || (k+1)*(q-1) > n*k {
				t.Fatalf("limits.PermitQuorum(%d, %d) = %d: not the least q with (k+1)q > nk, within a majority and n", n, k, q)
			}
			// With q-1, k+1 sets fit round-robin on the nodes, each node
			// in at most k of them: so q-1 would be unsafe.
			if q > 1 {
				count := make([]int, n)
				for s := range (k + 1) * (q - 1) {
					count[s%n]++
				}
				for i, c := range count {
					if c > k {
						t.Fatalf("n=%d k=%d: node %d in %d of the sets", n, k, i, c)
					}
				}
			}
		}
	}
}

// Many clients hammer one semaphore of k permits; a checker sees that never
// more than k holders are valid at once, and that each permit's token is
// above that of every permit granted before its obtain began.
func TestPermitHammer(t *testing.T) {
	for _, n := range []int{1, 5} {
		for _, k := range []int{1, 2, 5} {
			t.Run(fmt.Sprintf("%d nodes/k=%d", n, k), func(t *testing.T) {
				cl := startNodes(t, n)
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				var (
					mu       sync.Mutex
					holders  int
					most     int
					maxToken int64
					bad      []string
				)
				report := func(format string, args ...any) {
					mu.Lock()
					bad = append(bad, fmt.Sprintf(format, args...))
					mu.Unlock()
				}
				var wg sync.WaitGroup
				for range 6 {
					// A loaded machine under -race: generous node timeouts.
					c := newClient(t, cl.clients, WithNodeTimeout(time.Second))
					for range 2 {
						wg.Go(func() {
							for range 12 {
								mu.Lock()
								before := maxToken
								mu.Unlock()
								l, err := c.Semaphore("hammer", k).Obtain(ctx, 10*time.Second, WithRetryDelay(time.Millisecond, 20*time.Millisecond))
								if err != nil {
									report("obtain: %v", err)
									return
								}
								mu.Lock()
								holders++
								most = max(most, holders)
								if holders > k {
									bad = append(bad, fmt.Sprintf("%d holders of %d permits", holders, k))
								}
								if l.Token() <= before {
									bad = append(bad, fmt.Sprintf("token %d not above %d, granted before the obtain began", l.Token(), before))
								}
								maxToken = max(maxToken, l.Token())
								mu.Unlock()
								time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
								// Still valid when it leaves: the count above
								// counted valid permits only.
								if err := l.Err(); err != nil {
									report("permit lost while counted: %v", err)
								}
								mu.Lock()
								holders--
								mu.Unlock()
								// A release that times out on nodes leaves the
								// permit to expire: slow, not unsafe. One that
								// finds the permit gone is a loss not seen.
								if err := l.Release(ctx); errors.Is(err, ErrNotHeld) {
									report("release: %v", err)
								}
							}
						})
					}
				}
				wg.Wait()
				for _, b := range bad {
					t.Error(b)
				}
				t.Logf("at most %d holders at once", most)
			})
		}
	}
}

// A permit is a lock of kind Permit: its own quorum, token, validity,
// Done/Err and Release; the semaphore refuses the (k+1)th at once, and
// the hook sees the kind.
func TestPermitIsALock(t *testing.T) {
	cl := startNodes(t, 5)
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	var held []*Lock
	for i := range 2 {
		l, err := c.Semaphore("sem", 2).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("permit %d: %v", i, err)
		}
		if l.sp.label != "permit" || l.Token() <= 0 || l.Name() != "sem" || l.Err() != nil {
			t.Fatalf("permit %d: kind %v, token %d, key %q, err %v", i, l.sp.label, l.Token(), l.Name(), l.Err())
		}
		held = append(held, l)
	}
	if held[1].Token() <= held[0].Token() {
		t.Errorf("second permit's token %d, want above the first's %d", held[1].Token(), held[0].Token())
	}
	_, err := c.Semaphore("sem", 2).TryObtain(ctx, time.Minute)
	var qe *QuorumError
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrHeld) || !errors.As(err, &qe) || qe.Need != 4 {
		t.Fatalf("third permit of two: %v, want ErrNotObtained, ErrHeld, need 4", err)
	}
	if err := held[0].Refresh(ctx, 30*time.Second); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-held[0].Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	if !errors.Is(held[0].Err(), ErrNotHeld) {
		t.Fatalf("Err after release: %v", held[0].Err())
	}
	l, err := c.Semaphore("sem", 2).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatalf("a permit after a release: %v", err)
	}
	_ = l.Release(ctx)
	_ = held[1].Release(ctx)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.obtains) == 0 || len(rec.releases) == 0 || len(rec.refreshs) == 0 {
		t.Fatalf("hook saw %d obtains, %d releases, %d refreshes", len(rec.obtains), len(rec.releases), len(rec.refreshs))
	}
	for _, e := range rec.obtains {
		if e.Kind != "permit" {
			t.Errorf("obtain event of kind %v", e.Kind)
		}
	}
	for _, e := range rec.releases {
		if e.Kind != "permit" {
			t.Errorf("release event of kind %v", e.Kind)
		}
	}
}

// Bad input is refused with ErrInvalid, naming the problem, and writes
// nothing.
func TestPermitBadInput(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	for _, tc := range []struct {
		name, key string
		k         int
		ttl       time.Duration
		opts      []ObtainOption
		want      string
	}{
		{"k zero", "s", 0, time.Minute, nil, "0 permits"},
		{"k negative", "s", -3, time.Minute, nil, "-3 permits"},
		{"k above the maximum", "s", limits.MaxPermits + 1, time.Minute, nil, "1024"},
		{"empty name", "", 2, time.Minute, nil, "empty"},
		{"TTL below the minimum", "s", 2, time.Microsecond, nil, "minimum"},
		{"TTL above the maximum", "s", 2, 24 * time.Hour, nil, "maximum"},
		{"nil option", "s", 2, time.Minute, []ObtainOption{nil}, "nil"},
	} {
		for _, try := range []bool{false, true} {
			h := c.Semaphore(tc.key, tc.k)
			obtain := h.Obtain
			if try {
				obtain = h.TryObtain
			}
			l, err := obtain(ctx, tc.ttl, tc.opts...)
			if l != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (try %v): %v, %v; want ErrInvalid naming %q", tc.name, try, l, err, tc.want)
			}
		}
	}
	if n, err := cl.clients[0].DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("bad input wrote %d keys (%v)", n, err)
	}
}

// A semaphore and a lock of any other kind never share a name: each is
// refused with ErrWrongKind, without waiting. Changing k while permits
// are live is refused with ErrPermitCount; once they are gone, a new k
// is taken.
func TestPermitKindsAndCount(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	quick := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) || !errors.Is(err, ErrNotObtained) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	start := time.Now()
	plain, err := c.TryObtain(ctx, "mixed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Semaphore("mixed", 2).Obtain(ctx, time.Minute)
	quick("a permit over a plain lock", err, ErrWrongKind)
	_ = plain.Release(ctx)
	// Another name: the plain lock's release and the refused permit's
	// clean-up return at a quorum, and the other node's may still be on
	// its way.
	reader, err := reader(c, "mixed-read").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Semaphore("mixed-read", 2).Obtain(ctx, time.Minute)
	quick("a permit over a read lock", err, ErrWrongKind)
	_ = reader.Release(ctx)

	// A fresh name: a release returns once a quorum deleted, and the
	// other node's delete may still be on its way.
	p, err := c.Semaphore("sem", 2).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Obtain(ctx, "sem", time.Minute)
	quick("a plain lock over a permit", err, ErrWrongKind)
	r, w := c.RWMutex("sem")
	for _, h := range []Locker{r, w, c.Reentrant("sem", "o")} {
		_, err = h.Obtain(ctx, time.Minute)
		quick("a lock of the family over a permit", err, ErrWrongKind)
	}
	_, err = c.Semaphore("sem", 3).Obtain(ctx, time.Minute)
	quick("three permits over two", err, ErrWrongKind)
	if time.Since(start) > 20*time.Second {
		t.Errorf("the refusals took %v: they must not wait", time.Since(start))
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Until the release reached every node, some still hold k = 2: the
	// retry waits for them (ErrPermitCount stops ObtainPermit).
	eventually(t, "the release on every node", func() bool {
		for _, n := range cl.clients {
			if n.Exists(ctx, "{"+limits.Prefix+"sem}").Val() != 0 {
				return false
			}
		}
		return true
	})
	for i := range 3 {
		l, err := c.Semaphore("sem", 3).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("permit %d of a new k after the last release: %v", i, err)
		}
		defer func() { _ = l.Release(ctx) }()
	}
}

// A permit whose holder never comes back is taken back by the nodes when
// its TTL runs out: a waiter gets it, and the expired field is gone.
func TestPermitExpiryReclaim(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			crashed := newClient(t, cl.clients)
			c := newClient(t, cl.clients)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var gone []*Lock
			for range 2 {
				l, err := crashed.Semaphore("reclaim", 2).TryObtain(ctx, 600*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				gone = append(gone, l) // never refreshed nor released
			}
			start := time.Now()
			l, err := c.Semaphore("reclaim", 2).Obtain(ctx, time.Minute)
			if err != nil {
				t.Fatalf("waiting for an expired permit: %v", err)
			}
			defer func() { _ = l.Release(ctx) }()
			if waited := time.Since(start); waited < 300*time.Millisecond {
				t.Errorf("got a permit after %v, while both were valid", waited)
			}
			if gone[0].Err() == nil && gone[1].Err() == nil {
				t.Error("both expired permits still valid after a third was granted")
			}
			for i, node := range cl.clients {
				fields, err := node.HKeys(ctx, "{"+limits.Prefix+"reclaim}").Result()
				if err != nil {
					t.Fatal(err)
				}
				holds := 0
				for _, f := range fields {
					if strings.HasPrefix(f, "h:") {
						holds++
					}
				}
				if holds > 2 {
					t.Errorf("node %d keeps %d permit fields: %v", i, holds, fields)
				}
			}
		})
	}
}

// A waiter whose retry delay is far longer than the test wakes when a
// permit is released: by the release's notification.
func TestPermitNotifiedWait(t *testing.T) {
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	holder := newClient(t, cl.clients)
	c := newClient(t, cl.clients, WithHook(rec))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []*Lock
	for range 2 {
		l, err := holder.Semaphore("notify", 2).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Semaphore("notify", 2).Obtain(ctx, time.Minute, WithRetryDelay(time.Hour, time.Hour))
		if err == nil {
			err = l.Release(context.Background())
		}
		got <- err
	}()
	// Let the waiter fail its first attempt and subscribe: the release
	// must come after a node has its subscription, or nothing would be
	// published to it (a subscription that the nodes confirm later than
	// the node timeout is not waited for: docs/waiting.md).
	eventually(t, "the waiter's first attempt", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.attempts) > 0
	})
	eventually(t, "the waiter's subscription", func() bool { return subscribed(t, cl.clients, "notify") })
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not wake within 30 s of a release (its retry delay is an hour)")
	}
	t.Logf("woken %v after the release", time.Since(start))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	woken := false
	for _, w := range rec.waits {
		woken = woken || w.WokenBy == "release"
	}
	if !woken {
		t.Errorf("no wait woken by a release: %+v", rec.waits)
	}
	_ = held[0].Release(ctx)
}

// Automatic refresh keeps a short permit past its TTL; a refresh re-seeds
// a node that lost the permit only where a permit is free.
func TestPermitKeepAliveAndReseed(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	l, err := c.Semaphore("alive", 1).TryObtain(ctx, 900*time.Millisecond, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if err := l.Err(); err != nil {
		t.Fatalf("auto-refreshed permit: %v", err)
	}
	if _, err := c.Semaphore("alive", 1).TryObtain(ctx, time.Minute); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second permit of one while it is kept alive: %v", err)
	}
	_ = l.Release(ctx)

	// Node 0 loses our permit, and another takes its only permit there.
	key := "{" + limits.Prefix + "reseed}"
	p, err := c.Semaphore("reseed", 1).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n0 := cl.clients[0]
	// The acquire has run on node 0 (TryObtain returns at a quorum).
	eventually(t, "node 0 has the permit", func() bool { return n0.HExists(ctx, key, "h:"+p.secret.id).Val() })
	fields, _ := n0.HKeys(ctx, key).Result()
	for _, f := range fields {
		if strings.HasPrefix(f, "h:") {
			n0.HDel(ctx, key, f)
		}
	}
	n0.HSet(ctx, key, "h:other", int64(1)<<50) // expires in the far future
	if err := p.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("refresh on two of three: %v", err)
	}
	fields, _ = n0.HKeys(ctx, key).Result()
	holds := 0
	for _, f := range fields {
		if strings.HasPrefix(f, "h:") {
			holds++
		}
	}
	if holds != 1 {
		t.Fatalf("node 0 holds %d permits of one after the refresh: %v", holds, fields)
	}
	// With the other permit gone, the next refresh re-seeds node 0: the
	// counter there is put at the permit's token, as on a node whose vote
	// made it (one ahead of the token, from a vote after the decision,
	// would refuse the re-seed: issue 44).
	n0.HDel(ctx, key, "h:other")
	n0.Set(ctx, key+":fence", p.Token(), time.Hour)
	if err := p.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if fields, _ = n0.HKeys(ctx, key).Result(); len(fields) != 3 {
		t.Fatalf("node 0 after the re-seed: %v, want mode, k and our permit", fields)
	}
	_ = p.Release(ctx)
}

// releaseOnRefusal is a hook that releases a permit right after the first
// refused attempt it sees: after the waiter's attempt, before its
// subscription, so that the release's notification reaches no one.
type releaseOnRefusal struct {
	once sync.Once
	p    *Lock
}

func (h *releaseOnRefusal) Observe(_ context.Context, ev Event) {
	if e, ok := ev.(AttemptEvent); ok && !e.Obtained {
		h.once.Do(func() { _ = h.p.Release(context.Background()) })
	}
}

// A permit released between a waiter's refused attempt and its
// subscription sends a notification nobody hears; the waiter, once
// subscribed, finds the free permit on the nodes (lookForRelease) instead
// of sleeping until its retry delay (an hour) or the other permit's expiry
// (a minute).
func TestPermitReleaseBeforeSubscription(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			holder := newClient(t, cl.clients)
			ctx := context.Background()
			var held []*Lock
			for range 2 {
				p, err := holder.Semaphore("missed", 2).TryObtain(ctx, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, p)
			}
			defer func() { _ = held[1].Release(ctx) }()
			h := &releaseOnRefusal{p: held[0]}
			c := newClient(t, cl.clients, WithHook(h))
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			p, err := c.Semaphore("missed", 2).Obtain(wctx, time.Minute, WithRetryDelay(time.Hour, time.Hour))
			if err != nil {
				t.Fatalf("the waiter missed the free permit: %v", err)
			}
			_ = p.Release(ctx)
		})
	}
}

// On one Redis Cluster node a permit needs that node only, for any k: the
// semaphore's keys share their hash tag, and a release wakes a waiter
// through the shard channel.
func TestPermitOnCluster(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	holder := newClient(t, []redis.UniversalClient{node})
	waiter := newClient(t, []redis.UniversalClient{node})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var held []*Lock
	for range 5 {
		p, err := holder.Semaphore("cluster-sem", 5).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	if _, err := holder.Semaphore("cluster-sem", 5).TryObtain(ctx, time.Minute); !errors.Is(err, ErrHeld) {
		t.Fatalf("a sixth permit of five: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		p, err := waiter.Semaphore("cluster-sem", 5).Obtain(ctx, time.Minute, WithRetryDelay(time.Hour, time.Hour))
		if err == nil {
			err = p.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // let the waiter be refused and wait
	if err := held[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter on a cluster: %v", err)
	}
	for _, p := range held[1:] {
		_ = p.Release(ctx)
	}
}
