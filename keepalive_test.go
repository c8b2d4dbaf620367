package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestAutoRefreshExtendsValidity(t *testing.T) {
	cl := startNodes(t, 3)
	// Margins for a loaded machine: each refresh has 500 ms to answer
	// (600 ms and 100 ms failed at load 10 to 17: issue 43's sweep).
	c := newClient(t, cl.clients, WithNodeTimeout(500*time.Millisecond))
	lock, err := c.TryObtain(context.Background(), "auto", 3*time.Second, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	first := lock.ValidUntil()
	eventually(t, "ValidUntil moves forward", func() bool { return lock.ValidUntil().After(first) })
	if err := lock.Err(); err != nil {
		t.Fatalf("Err while auto-refreshed: %v", err)
	}
	if err := lock.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lock.Done():
	default:
		t.Fatal("Done not closed after Release")
	}
	if err := lock.Err(); !errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLost) {
		t.Fatalf("Err after Release: %v, want ErrNotHeld", err)
	}
}

func TestLostWhenAMajorityFreezes(t *testing.T) {
	const nodeTimeout = 200 * time.Millisecond
	freezeMajority := func(t *testing.T, cl *cluster) {
		cl.pause(t, 0, 2, 4)
	}
	t.Run("Obtain", func(t *testing.T) {
		cl := startNodes(t, 5)
		c := newClient(t, cl.clients, WithNodeTimeout(nodeTimeout))
		lock, err := c.TryObtain(context.Background(), "frozen-majority", 2*time.Second, WithAutoRefresh())
		if err != nil {
			t.Fatal(err)
		}
		freezeMajority(t, cl)
		// A refresh in flight at the freeze may still have won; past one
		// node timeout none can.
		time.Sleep(2 * nodeTimeout)
		validUntil := lock.ValidUntil()
		select {
		case <-lock.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed with three of five nodes frozen")
		}
		if now := time.Now(); !now.Before(validUntil) {
			t.Fatalf("Done closed %v after the validity ended; want before", now.Sub(validUntil))
		}
		if err := lock.Err(); !errors.Is(err, ErrLost) {
			t.Fatalf("Err: %v, want ErrLost", err)
		}
		if !lock.ValidUntil().IsZero() {
			t.Fatal("ValidUntil of a lost lock is not zero")
		}
	})
	t.Run("Do", func(t *testing.T) {
		cl := startNodes(t, 5)
		c := newClient(t, cl.clients, WithNodeTimeout(nodeTimeout))
		var cause error
		err := c.Do(context.Background(), "frozen-majority-do", 2*time.Second, func(ctx context.Context) error {
			freezeMajority(t, cl)
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return errors.New("job interrupted")
			case <-time.After(10 * time.Second):
				return errors.New("fn's context was never cancelled")
			}
		})
		if !errors.Is(cause, ErrLost) {
			t.Fatalf("fn's context cause: %v, want ErrLost", cause)
		}
		if !errors.Is(err, ErrLost) || err.Error() == "" || !strings.Contains(err.Error(), "job interrupted") {
			t.Fatalf("Do: %v, want fn's error joined with ErrLost", err)
		}
	})
}

func TestDoneWithoutAutoRefreshClosesAtLossDeadline(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients, WithNodeTimeout(50*time.Millisecond))
	lock, err := c.TryObtain(context.Background(), "plain", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	validUntil := lock.ValidUntil()
	select {
	case <-lock.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the TTL")
	}
	if !time.Now().Before(validUntil) {
		t.Fatalf("Done closed after the validity ended")
	}
	if err := lock.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err: %v, want ErrLost", err)
	}
	if err := lock.Refresh(context.Background(), time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Refresh of a lost lock: %v, want ErrNotHeld", err)
	}
}

func TestMaxHold(t *testing.T) {
	cl := startNodes(t, 1)
	// Margins for a loaded machine: a refresh has half a second to
	// answer, and the lock is refreshed several times before the limit.
	c := newClient(t, cl.clients, WithNodeTimeout(500*time.Millisecond))
	const ttl, maxHold = 1500 * time.Millisecond, 4 * time.Second
	start := time.Now()
	lock, err := c.TryObtain(context.Background(), "capped", ttl, WithAutoRefresh(), WithMaxHold(maxHold))
	if err != nil {
		t.Fatal(err)
	}
	limit := start.Add(maxHold)
	deadline := time.After(30 * time.Second)
	var latest time.Time
	for done := false; !done; {
		// The behaviour, not the speed: no refresh ever makes the lock
		// valid past the hold limit, however late this loop observes it.
		vu := lock.ValidUntil()
		if vu.After(limit) {
			t.Fatalf("valid until %v, past the hold limit %v", vu.Sub(start), maxHold)
		}
		if vu.After(latest) {
			latest = vu
		}
		select {
		case <-lock.Done():
			done = true
		case <-deadline:
			t.Fatalf("an auto-refreshed lock with a %v hold limit was still held after 30s", maxHold)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !latest.After(start.Add(ttl)) {
		t.Fatalf("never refreshed: valid until %v at the latest, the TTL %v", latest.Sub(start), ttl)
	}
	if err := lock.Err(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "hold limit") {
		t.Fatalf("Err: %v, want ErrLost naming the hold limit", err)
	}
}

// countPipelines counts pipelines and the refresh scripts inside them.
type countPipelines struct{ pipelines, scripts *atomic.Int32 }

func (countPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (countPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h countPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelines.Add(1)
		for _, cmd := range cmds {
			if isScript(cmd) && !bookkeeping(cmd) {
				h.scripts.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func TestCloseReleasesAutoRefreshedLocks(t *testing.T) {
	cl := startNodes(t, 3)
	// A release's request to a node is bounded by the per-node timeout; a
	// loaded machine (-race, 60 requests at once, new connections dialled)
	// can miss 100 ms, and a release that misses it leaves the key to its
	// TTL. A generous timeout makes a left key mean Close did not release.
	c, err := New(cl.clients, WithNodeTimeout(2*time.Second), WithRestartGuard(GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	var locks []*Lock
	for i := range 20 {
		l, err := c.TryObtain(context.Background(), fmt.Sprintf("close-auto-%d", i), 10*time.Second, WithAutoRefresh())
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i, l := range locks {
		if err := l.Err(); !errors.Is(err, ErrNotHeld) {
			t.Errorf("lock %d after Close: %v, want ErrNotHeld", i, err)
		}
	}
	for i, node := range cl.clients {
		if keys := node.Keys(context.Background(), "{redlock:close-auto-*}").Val(); len(keys) != 0 {
			t.Errorf("node %d: %d keys left after Close", i, len(keys))
		}
	}
}

// refreshHook records the automatic refreshes' outcomes by lock name.
type refreshHook struct {
	mu   sync.Mutex
	errs map[string][]error
}

func (h *refreshHook) Observe(_ context.Context, ev Event) {
	if e, ok := ev.(RefreshEvent); ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.errs[e.Name] = append(h.errs[e.Name], e.Err)
	}
}
