package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestObtainReleaseCycle(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			lock, err := c.TryObtain(ctx, "order:42", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if lock.Name() != "order:42" {
				t.Errorf("Key() = %q", lock.Name())
			}
			if left := time.Until(lock.ValidUntil()); left <= 9*time.Second || left > 10*time.Second {
				t.Errorf("validity left %v, want in (9s, 10s]", left)
			}
			// Obtain returns at quorum; the other nodes' yes arrives
			// later and joins the lock.
			for i, node := range cl.clients {
				eventually(t, fmt.Sprintf("node %d has the key", i), func() bool {
					v, ok := rawGet(t, node, "order:42")
					return ok && len(v) == 32
				})
			}
			if _, err := c.TryObtain(ctx, "order:42", 10*time.Second); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("second TryObtain: %v, want ErrNotObtained", err)
			}
			if err := lock.Refresh(ctx, 20*time.Second); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			for i, node := range cl.clients {
				eventually(t, fmt.Sprintf("node %d has the refreshed TTL", i), func() bool {
					return node.PTTL(ctx, "{redlock:order:42}").Val() > 10*time.Second
				})
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if !lock.ValidUntil().IsZero() {
				t.Errorf("ValidUntil after Release = %v, want the zero time", lock.ValidUntil())
			}
			if err := lock.Release(ctx); err != nil {
				t.Fatalf("second Release: %v, want nil (idempotent)", err)
			}
			assertReleased(t, cl.clients, "order:42")
			if err := lock.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
				t.Errorf("Refresh after Release: %v, want ErrNotHeld", err)
			}
			lock2, err := c.TryObtain(ctx, "order:42", 10*time.Second)
			if err != nil {
				t.Fatalf("TryObtain after Release: %v", err)
			}
			_ = lock2.Release(ctx)
		})
	}
}

func TestExpiryAndReleaseByNonOwner(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			// An explicit node timeout: the default for a 200 ms TTL
			// (10 ms) is too tight for a loaded machine under -race.
			c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond))
			ctx := context.Background()
			old, err := c.TryObtain(ctx, "expiry", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			// Wait well past the TTL for the keys to expire.
			time.Sleep(600 * time.Millisecond)
			if err := old.Refresh(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Refresh of an expired lock: %v, want ErrNotHeld", err)
			}
			cur, err := c.TryObtain(ctx, "expiry", time.Minute)
			if err != nil {
				t.Fatalf("TryObtain after expiry: %v", err)
			}
			// The old owner's release must not touch the new owner's keys.
			err = old.Release(ctx)
			if !errors.Is(err, ErrNotHeld) {
				t.Fatalf("Release by the old owner: %v, want ErrNotHeld", err)
			}
			var qe *QuorumError
			if !errors.As(err, &qe) || qe.Op != "release" || qe.Agreed != 0 || !errors.Is(err, ErrNotOwner) {
				t.Fatalf("Release error %#v, want a release *QuorumError with 0 agreed, nodes saying ErrNotOwner", err)
			}
			if _, err := c.TryObtain(ctx, "expiry", time.Minute); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("the new owner lost the lock to an old owner's release: %v", err)
			}
			if err := cur.Release(ctx); err != nil {
				t.Fatalf("Release by the owner: %v", err)
			}
		})
	}
}

func TestScriptFlushRecovery(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "flush", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range cl.clients {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("Refresh after SCRIPT FLUSH: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH: %v", err)
	}
	for _, n := range cl.clients {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lock, err = c.TryObtain(ctx, "flush", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain after SCRIPT FLUSH: %v", err)
	}
	_ = lock.Release(ctx)
}

// A nil *Lock, what a failed Obtain returns, is safe to use: "defer
// lock.Release(ctx)" before checking the error must not panic.
func TestNilLock(t *testing.T) {
	var l *Lock
	ctx := context.Background()
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release: %v, want ErrNotHeld", err)
	}
	if err := l.Refresh(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Refresh: %v, want ErrNotHeld", err)
	}
	if err := l.Err(); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Err: %v, want ErrNotHeld", err)
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done is not closed")
	}
	if k, tok, v, ttl := l.Name(), l.Token(), l.ValidUntil(), l.TTL(); k != "" || tok != 0 || !v.IsZero() || ttl != 0 {
		t.Errorf("Key %q, Token %d, ValidUntil %v, TTL %v: want zero values", k, tok, v, ttl)
	}
}

// TestHeapPerHeldLock bounds what a held lock keeps on the heap (its Lock,
// keys and secret; no auto-refresh), measured exactly as the heap in use
// before and after obtaining them: 480 B at 759f657, where a fencing
// counter key kept per lock had made it 560 (issue 50: no regression in
// the heap per held lock). BenchmarkHoldManyLocks measures the whole of
// holding, refreshes included.
func TestHeapPerHeldLock(t *testing.T) {
	const (
		n     = 5000
		bound = 520 // bytes per held lock
	)
	cl := startNodes(t, 1)
	c, err := New(cl.clients, WithNodeTimeout(5*time.Second), WithRestartGuard(GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	// The first obtain builds the Client's state for its nodes (their
	// identities, the recorder): not any held lock's.
	first, err := c.TryObtain(ctx, "held-first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	locks := make([]*Lock, n)
	before := heapInUse()
	for i := range locks {
		if locks[i], err = c.TryObtain(ctx, fmt.Sprintf("held-%d", i), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(heapInUse()-before) / n
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%.1f B per held lock", per)
	if per > bound {
		t.Errorf("a held lock keeps %.1f B of heap, more than %d", per, bound)
	}
}
