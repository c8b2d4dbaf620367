package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tests of the retry rules (retry.go): on Redis, the obtain's attempts as
// WithMaxAttempts, WithRetryDelay and WithBackoff space them; then
// Redis-free, the backoff on its own. A manual Refresh's retries are
// tested in refresh_test.go.

func TestMaxAttempts(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "attempts", time.Minute); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	cl.clients[0].AddHook(countEval{&calls})
	_, err := c.Obtain(ctx, "attempts", time.Minute, WithMaxAttempts(3), WithRetryDelay(time.Millisecond, 2*time.Millisecond))
	if !errors.Is(err, ErrNotObtained) {
		t.Fatalf("Obtain: %v, want ErrNotObtained", err)
	}
	if got := calls.Load(); got != 3 {
		t.Fatalf("%d acquire scripts ran, want 3", got)
	}
}

// WithMaxAttempts counts the attempts that follow a wait of the retry
// delay, with notifications and with polling: two attempts of a lock that
// another client holds for 50 ms get it; two of a lock held for a minute
// fail after exactly two acquire rounds, the second after the delay.
func TestMaxAttemptsAreSpacedByTheRetryDelay(t *testing.T) {
	for _, notified := range []bool{true, false} {
		t.Run(fmt.Sprintf("notify=%v", notified), func(t *testing.T) {
			cl := startNodes(t, 1)
			rec := &eventRecorder{}
			opts := []Option{WithHook(rec)}
			if !notified {
				opts = append(opts, withoutNotify())
			}
			holders, c := newClient(t, cl.clients), newClient(t, cl.clients, opts...)
			ctx := context.Background()
			const delay = 150 * time.Millisecond
			retry := []ObtainOption{WithMaxAttempts(2), WithRetryDelay(delay, delay)}

			short, err := holders.TryObtain(ctx, "short-hold", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = short.Release(ctx)
			}()
			l, err := c.Obtain(ctx, "short-hold", time.Minute, retry...)
			if err != nil {
				t.Fatalf("Obtain with two attempts %v apart of a lock held for 50 ms: %v", delay, err)
			}
			_ = l.Release(ctx)

			if _, err := holders.TryObtain(ctx, "long-hold", time.Minute); err != nil {
				t.Fatal(err)
			}
			var scripts atomic.Int32
			cl.clients[0].AddHook(countEval{&scripts})
			start := time.Now()
			_, err = c.Obtain(ctx, "long-hold", time.Minute, retry...)
			elapsed := time.Since(start)
			if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrHeld) {
				t.Fatalf("Obtain of a lock held for a minute: %v, want ErrNotObtained and ErrHeld", err)
			}
			if got := scripts.Load(); got != 2 {
				t.Errorf("%d acquire scripts ran, want 2", got)
			}
			if elapsed < delay {
				t.Errorf("Obtain gave up after %v, before the retry delay %v", elapsed, delay)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			ob := rec.obtains[len(rec.obtains)-1]
			attempts := 0
			for _, a := range rec.attempts {
				if a.ObtainID == ob.ObtainID {
					attempts++
				}
			}
			var waits []WaitEvent
			for _, w := range rec.waits {
				if w.ObtainID == ob.ObtainID {
					waits = append(waits, w)
				}
			}
			if ob.Attempts != 2 || attempts != 2 {
				t.Errorf("ObtainEvent.Attempts %d and %d AttemptEvents, want 2 and 2", ob.Attempts, attempts)
			}
			if len(waits) != 1 || waits[0].WokenBy != "timer" || waits[0].Waited < delay {
				t.Errorf("waits %+v, want one of the retry delay %v, ended by its timer", waits, delay)
			}
		})
	}
}

// countEval counts EVALSHA, EVAL and FCALL commands sent through a client,
// alone or in a pipeline.
type countEval struct{ n *atomic.Int32 }

func (countEval) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) && !bookkeeping(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h countEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isScript(cmd) && !bookkeeping(cmd) {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

func TestBackoffBounds(t *testing.T) {
	b := newBackoff(retryConfig{minDelay: 10 * time.Millisecond, maxDelay: 100 * time.Millisecond})
	for n := range 50 {
		d, ok := b.next()
		if !ok {
			t.Fatalf("wait %d: the retries ended", n)
		}
		hi := 100 * time.Millisecond
		if n < 3 {
			hi = 10 * time.Millisecond << (n + 1)
		}
		if d < 10*time.Millisecond || d > hi {
			t.Fatalf("wait %d = %v, want in [10ms, %v]", n, d, hi)
		}
	}
}

// WithBackoff replaces the retry delay with the caller's strategy: its
// waits space the attempts, and a negative one ends the obtain.
func TestWithBackoff(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	holder := newClient(t, cl.clients)
	c := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	if _, err := New(cl.clients, WithBackoff(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("New with a nil backoff: %v, want ErrInvalid", err)
	}
	if _, err := c.Obtain(ctx, "x", time.Minute, WithBackoff(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Obtain with a nil backoff: %v, want ErrInvalid", err)
	}
	l, err := holder.TryObtain(ctx, "strategy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var asked []int
	linear := WithBackoff(func(n int) time.Duration {
		asked = append(asked, n)
		if n == 2 {
			return -1 // stop after three attempts
		}
		return time.Duration(n+1) * 20 * time.Millisecond
	})
	start := time.Now()
	_, err = c.Obtain(ctx, "strategy", time.Minute, linear)
	if !errors.Is(err, ErrHeld) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain ended by its backoff: %v, want the last attempt's ErrHeld", err)
	}
	if !slices.Equal(asked, []int{0, 1, 2}) {
		t.Fatalf("the strategy was asked for waits %v, want [0 1 2]", asked)
	}
	if n := rec.attemptCount(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if d := time.Since(start); d < 60*time.Millisecond {
		t.Fatalf("three attempts took %v, less than the strategy's waits (20 ms + 40 ms)", d)
	}
}

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

func TestAutoRetryAt(t *testing.T) {
	now := time.Now()
	if at := autoRetryAt(now, 4*time.Second, 100*time.Millisecond); !at.Equal(now.Add(time.Second)) {
		t.Errorf("retry at +%v, want a quarter of the 4s interval", at.Sub(now))
	}
	if at := autoRetryAt(now, 200*time.Millisecond, 100*time.Millisecond); !at.Equal(now.Add(100 * time.Millisecond)) {
		t.Errorf("retry at +%v, want the 100ms per-node timeout, above a quarter of the interval", at.Sub(now))
	}
}
