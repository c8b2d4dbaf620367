package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Redis-free tests of the retry rules (retry.go). Lock.Refresh and the
// keep-alive are tested against Redis in keepalive_test.go and
// redlock_test.go.

// The jitter's bounds: TestBackoffBounds (redlock_test.go).

func TestBackoffNoJitter(t *testing.T) {
	lo := 10 * time.Millisecond
	b := newBackoff(retryConfig{minDelay: lo, maxDelay: lo})
	for range 5 {
		if d, ok := b.next(); d != lo || !ok {
			t.Fatalf("wait %v, %v with min = max = %v", d, ok, lo)
		}
	}
}

func TestBackoffStrategy(t *testing.T) {
	var asked []int
	b := newBackoff(retryConfig{strategy: func(n int) time.Duration {
		asked = append(asked, n)
		if n == 2 {
			return -1
		}
		return time.Duration(n) * time.Second
	}})
	for n := range 2 {
		if d, ok := b.next(); !ok || d != time.Duration(n)*time.Second {
			t.Fatalf("wait %d = %v, %v", n, d, ok)
		}
	}
	if _, ok := b.next(); ok {
		t.Fatal("a negative wait did not end the retries")
	}
	if fmt.Sprint(asked) != "[0 1 2]" {
		t.Errorf("strategy asked for %v, want [0 1 2]", asked)
	}
}

func TestRetryRefresh(t *testing.T) {
	ctx := context.Background()
	fast := retryConfig{minDelay: time.Millisecond, maxDelay: time.Millisecond}
	noAnswer := fmt.Errorf("redlock: refresh: %w", ErrNotObtained)
	forever := func() time.Duration { return time.Hour }

	t.Run("until a round wins", func(t *testing.T) {
		rounds := 0
		err := retryRefresh(ctx, fast, func() error {
			if rounds++; rounds < 4 {
				return noAnswer
			}
			return nil
		}, forever)
		if err != nil || rounds != 4 {
			t.Fatalf("err %v after %d rounds, want nil after 4", err, rounds)
		}
	})
	for _, end := range []error{ErrClosed, fmt.Errorf("x: %w", ErrNotHeld), fmt.Errorf("x: %w", ErrDegraded)} {
		t.Run(fmt.Sprintf("ends at %v", end), func(t *testing.T) {
			rounds := 0
			err := retryRefresh(ctx, fast, func() error { rounds++; return end }, forever)
			if err != end || rounds != 1 {
				t.Fatalf("err %v after %d rounds, want %v after 1", err, rounds, end)
			}
		})
	}
	t.Run("no wait past the loss deadline", func(t *testing.T) {
		// An hour's backoff, but no time left: the rounds follow at once,
		// until the round after the deadline ends the lock.
		slow := retryConfig{minDelay: time.Hour, maxDelay: time.Hour}
		rounds := 0
		err := retryRefresh(ctx, slow, func() error {
			if rounds++; rounds == 3 {
				return fmt.Errorf("x: %w", ErrNotHeld)
			}
			return noAnswer
		}, func() time.Duration { return -time.Second })
		if !errors.Is(err, ErrNotHeld) || rounds != 3 {
			t.Fatalf("err %v after %d rounds", err, rounds)
		}
	})
	t.Run("strategy ends", func(t *testing.T) {
		stop := retryConfig{strategy: func(n int) time.Duration { return -1 }}
		rounds := 0
		err := retryRefresh(ctx, stop, func() error { rounds++; return noAnswer }, forever)
		if err != noAnswer || rounds != 1 {
			t.Fatalf("err %v after %d rounds, want the round's error after 1", err, rounds)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		rounds := 0
		err := retryRefresh(cctx, fast, func() error {
			if rounds++; rounds == 2 {
				cancel()
			}
			return noAnswer
		}, forever)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotObtained) || rounds != 2 {
			t.Fatalf("err %v after %d rounds, want the round's error joined with ctx's after 2", err, rounds)
		}
		// The context ends during a wait.
		cctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		slow := retryConfig{minDelay: time.Hour, maxDelay: time.Hour}
		err = retryRefresh(cctx, slow, func() error { return noAnswer }, forever)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotObtained) {
			t.Fatalf("err %v, want the round's error joined with ctx's", err)
		}
	})
}

func TestAutoRetryAt(t *testing.T) {
	now := time.Now()
	if at := autoRetryAt(now, 4*time.Second, 100*time.Millisecond); !at.Equal(now.Add(time.Second)) {
		t.Errorf("retry at +%v, want a quarter of the 4s interval", at.Sub(now))
	}
	if at := autoRetryAt(now, 200*time.Millisecond, 100*time.Millisecond); !at.Equal(now.Add(100 * time.Millisecond)) {
		t.Errorf("retry at +%v, want the 100ms per-node timeout, above a quarter of the interval", at.Sub(now))
	}
}
