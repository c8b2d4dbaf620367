package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tests of the retry rules (retry.go): on Redis, the obtain's attempts and
// a manual Refresh's rounds as WithMaxAttempts, WithRetryDelay and
// WithBackoff space them; then Redis-free, the backoff and the refresh
// retries on their own. Lock.Refresh and the keep-alive are tested against
// Redis in lock_test.go and keepalive_test.go too.

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

// A manual Refresh retries a round that failed for want of answers, within
// its context: a node frozen for a while does not fail a refresh that a
// later round can confirm.
func TestRefreshRetriesWithinItsContext(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond), WithRetryDelay(50*time.Millisecond, 100*time.Millisecond))
	// Obtain, not TryObtain: a first round on fresh connections may not
	// answer within 100 ms on a loaded machine.
	octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
	defer ocancel()
	lock, err := c.Obtain(octx, "retried", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1, 2)
	rec := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		rec <- lock.Refresh(rctx, time.Minute)
	}()
	time.Sleep(500 * time.Millisecond) // several rounds fail meanwhile
	for _, i := range []int{1, 2} {
		if err := cl.servers[i].Resume(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-rec; err != nil {
		t.Fatalf("Refresh across a pause of two of three nodes: %v, want a later round to confirm it", err)
	}
}

// A Client's WithBackoff spaces the rounds of a manual Refresh too, and a
// negative wait ends the Refresh with its last round's error, well before
// its context ends.
func TestRefreshFollowsTheClientsBackoff(t *testing.T) {
	cl := startNodes(t, 3)
	ctx := context.Background()
	var (
		mu    sync.Mutex
		asked []int
	)
	c := newClient(t, cl.clients, WithNodeTimeout(100*time.Millisecond), WithBackoff(func(n int) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, n)
		if n == 2 {
			return -1 // three rounds
		}
		return 50 * time.Millisecond
	}))
	// Obtain, not TryObtain: a first round on fresh connections may not
	// answer within 100 ms on a loaded machine.
	octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
	defer ocancel()
	lock, err := c.Obtain(octx, "refresh-strategy", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1, 2)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = lock.Refresh(rctx, time.Minute)
	if err == nil || rctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Refresh on one of three nodes: %v, want the last round's error, before the context ends", err)
	}
	mu.Lock()
	got := slices.Clone(asked)
	mu.Unlock()
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("the strategy was asked for waits %v, want [0 1 2]", got)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("three rounds took %v, less than the strategy's two waits of 50 ms", d)
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
