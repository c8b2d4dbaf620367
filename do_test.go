package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Tests of Do's function under its lock (do.go): the lock kept for many
// TTLs, and the function not run without it.

func TestDoKeepsTheLockForTenTTLs(t *testing.T) {
	cl := startNodes(t, 5)
	// Generous node timeout: refreshes must not time out on a loaded
	// machine; the loss deadline is ValidUntil minus this (100 ms of a
	// 500 ms TTL failed at load 10 to 17: issue 43's sweep).
	opts := []Option{WithNodeTimeout(250 * time.Millisecond)}
	c := newClient(t, cl.clients, opts...)
	other := newClient(t, cl.clients, opts...)
	const ttl = time.Second
	var stolen atomic.Int32
	err := c.Do(context.Background(), "long-job", ttl, func(ctx context.Context) error {
		end := time.Now().Add(10 * ttl)
		for time.Now().Before(end) {
			if _, err := other.TryObtain(context.Background(), "long-job", time.Minute); err == nil {
				stolen.Add(1)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("fn's context ended: %w", context.Cause(ctx))
			case <-time.After(50 * time.Millisecond):
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("another client obtained the lock %d times while Do held it", n)
	}
	// Released afterwards.
	lock, err := other.TryObtain(context.Background(), "long-job", time.Minute)
	if err != nil {
		t.Fatalf("TryObtain after Do: %v", err)
	}
	_ = lock.Release(context.Background())
}

func TestDoWithoutTheLock(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "busy", time.Minute); err != nil {
		t.Fatal(err)
	}
	ran := false
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := c.Do(wctx, "busy", time.Minute, func(context.Context) error { ran = true; return nil })
	if ran || !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do on a held lock: ran=%v err=%v; want not run, ErrNotObtained and DeadlineExceeded", ran, err)
	}
	if err := c.Do(ctx, "x", time.Second, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Do with nil fn: %v, want ErrInvalid", err)
	}
	fnErr := errors.New("boom")
	if err := c.Do(ctx, "free", time.Second, func(context.Context) error { return fnErr }); err != fnErr {
		t.Fatalf("Do: %v, want fn's error as is", err)
	}
}
