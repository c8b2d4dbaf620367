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

// countEval counts EVALSHA and EVAL commands sent through a client.
type countEval struct{ n *atomic.Int32 }

func (countEval) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (countEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
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
