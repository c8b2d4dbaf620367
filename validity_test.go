package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// fakeClock is a clock for the validity arithmetic: it returns first each
// of next in turn, then t, which set changes.
type fakeClock struct {
	mu   sync.Mutex
	next []time.Time
	t    time.Time
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.next) > 0 {
		t := f.next[0]
		f.next = f.next[1:]
		return t
	}
	return f.t
}

func (f *fakeClock) set(t time.Time) {
	f.mu.Lock()
	f.t = t
	f.mu.Unlock()
}

func TestValidityArithmetic(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	t0 := time.Now()
	const ttl = 10 * time.Second
	tests := []struct {
		name    string
		elapsed time.Duration
		drift   float64
		ok      bool
		want    time.Time // ValidUntil
	}{
		// validity = TTL − elapsed − (TTL × drift + 2 ms), so ValidUntil =
		// start + TTL − TTL × drift − 2 ms whatever the elapsed time.
		{"fast", time.Millisecond, 0.01, true, t0.Add(ttl - 100*time.Millisecond - 2*time.Millisecond)},
		{"slow", 9 * time.Second, 0.01, true, t0.Add(ttl - 100*time.Millisecond - 2*time.Millisecond)},
		{"no drift", time.Second, 0, true, t0.Add(ttl - 2*time.Millisecond)},
		{"large drift", time.Second, 0.2, true, t0.Add(ttl - 2*time.Second - 2*time.Millisecond)},
		{"just expired", ttl - 102*time.Millisecond, 0.01, false, time.Time{}},
		{"expired", ttl, 0.01, false, time.Time{}},
		{"drift eats it", 5100 * time.Millisecond, 0.49, false, time.Time{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The clock reads t0 until the acquire script runs on a node,
			// and t0+elapsed from then on: the round took elapsed.
			clock := &fakeClock{t: t0}
			var nodes []redis.UniversalClient
			for _, s := range cl.servers {
				n := s.Client()
				t.Cleanup(func() { _ = n.Close() })
				n.AddHook(onEval(func(redis.Cmder, error) { clock.set(t0.Add(tt.elapsed)) }))
				nodes = append(nodes, n)
			}
			c := newClient(t, nodes, WithDriftFactor(tt.drift), WithClock(clock.now))
			name := fmt.Sprintf("validity-%d", i)
			lock, err := c.TryObtain(ctx, name, ttl)
			if !tt.ok {
				var qe *QuorumError
				if !errors.As(err, &qe) || !qe.Expired || !errors.Is(err, ErrNotObtained) {
					t.Fatalf("TryObtain: %v, want an expired *QuorumError", err)
				}
				// The keys of an attempt that ran out of validity are
				// released (a late node's in the background).
				for j, node := range cl.clients {
					eventually(t, fmt.Sprintf("node %d drops the key of an expired attempt", j), func() bool {
						_, ok := rawGet(t, node, name)
						return !ok
					})
				}
				return
			}
			if err != nil {
				t.Fatalf("TryObtain: %v", err)
			}
			if got := lock.ValidUntil(); !got.Equal(tt.want) {
				t.Errorf("ValidUntil = start + %v, want start + %v", got.Sub(t0), tt.want.Sub(t0))
			}
			_ = lock.Release(ctx)
		})
	}
}

func TestRefreshOnlyWithinValidity(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	t0 := time.Now()
	const ttl = 10 * time.Second
	// Acquire at t0; the refresh starts after the validity has ended.
	clock := &fakeClock{t: t0}
	c := newClient(t, cl.clients, WithClock(clock.now))
	lock, err := c.TryObtain(ctx, "refresh-late", ttl)
	if err != nil {
		t.Fatal(err)
	}
	clock.set(t0.Add(ttl))
	if err := lock.Refresh(ctx, ttl); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh after validity: %v, want ErrNotHeld", err)
	}
	_ = lock.Release(ctx)
}

// A refresh that does not win may still have run on some nodes, and a
// shorter TTL there shortens their keys: the lock's validity must not
// outlast that.
func TestFailedShorterRefreshLowersValidity(t *testing.T) {
	t.Run("past the new validity: lost", func(t *testing.T) {
		cl := startNodes(t, 3)
		ctx := context.Background()
		t0 := time.Now()
		clock := &fakeClock{t: t0}
		// A per-node timeout below the 100 ms refresh's validity (a longer
		// one is refused with ErrInvalid), but not so short that a loaded
		// machine misses it.
		c := newClient(t, cl.clients, WithClock(clock.now), WithNodeTimeout(60*time.Millisecond))
		var lock *Lock
		var err error
		for range 20 { // a loaded machine may still miss it: retry, after the clean-up
			if lock, err = c.TryObtain(ctx, "short", 30*time.Second); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The refresh starts at t0 and every node applies it, but the
		// quorum is seen only at t0+1s, past its 100 ms TTL.
		clock.mu.Lock()
		clock.next, clock.t = []time.Time{t0}, t0.Add(time.Second)
		clock.mu.Unlock()
		err = lock.Refresh(ctx, 100*time.Millisecond)
		if !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Refresh: %v, want ErrNotHeld: the keys now expire within 100 ms", err)
		}
		if !lock.ValidUntil().IsZero() {
			t.Fatalf("ValidUntil = t0%+v, want the zero time of a lost lock", lock.ValidUntil().Sub(t0))
		}
	})
	t.Run("nodes silent: lowered", func(t *testing.T) {
		cl := startNodes(t, 3)
		ctx := context.Background()
		c := newClient(t, cl.clients, WithNodeTimeout(200*time.Millisecond))
		lock, err := c.TryObtain(ctx, "short", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		cl.pause(t, 1, 2)
		before := time.Now()
		// Refresh retries until its context ends.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = lock.Refresh(rctx, 5*time.Second)
		// Its last round finds the frozen nodes timed out, or skipped
		// after three timeouts in a row.
		if err == nil || errors.Is(err, ErrNotHeld) || !(errors.Is(err, ErrNodeTimeout) || errors.Is(err, ErrNodeSkipped)) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Refresh with two of three frozen: %v, want a *QuorumError of timeouts and the context's end", err)
		}
		// Node 0 now expires the key 5 s after the refresh was sent.
		if left := lock.ValidUntil().Sub(before); left > 5*time.Second || left <= 0 {
			t.Fatalf("ValidUntil = refresh + %v, want at most 5s", left)
		}
	})
}
