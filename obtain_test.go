package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestFrozenSingleNodeTimesOutThenIsSkipped(t *testing.T) {
	cl := startNodes(t, 1)
	const nodeTimeout = 100 * time.Millisecond
	c := newClient(t, cl.clients, WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	cl.pause(t, 0)
	_, err := c.TryObtain(ctx, "frozen", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("attempt on a frozen node: %v, want ErrNotObtained and ErrNodeTimeout", err)
	}
	// Each failed attempt also sends a clean-up release, which times out
	// too; after three timeouts in a row the node is skipped.
	skipped := false
	for range 3 {
		_, err = c.TryObtain(ctx, "frozen", time.Minute)
		if errors.Is(err, ErrNodeSkipped) {
			skipped = true
			break
		}
		time.Sleep(2 * nodeTimeout) // let the clean-up time out as well
	}
	if !skipped {
		t.Fatalf("after repeated timeouts: %v, want ErrNodeSkipped", err)
	}
	if err := cl.servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	// After the cooldown one probe goes through and the node is back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lock, err := c.TryObtain(ctx, "frozen-after", time.Minute)
		if err == nil {
			_ = lock.Release(ctx)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node not used again after it resumed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A go-redis client whose timeouts are -2 sets no connection deadline,
// not even its context's, though ContextTimeoutEnabled is on: it does not
// honour deadlines, so an attempt on its frozen node still ends at the
// node timeout (the engine stops waiting for its request's goroutine),
// not when the node comes back.
func TestFrozenSingleNodeWithoutConnectionDeadlines(t *testing.T) {
	cl := startNodes(t, 1)
	rc := redis.NewClient(&redis.Options{Addr: cl.servers[0].Addr(), ContextTimeoutEnabled: true, ReadTimeout: -2, WriteTimeout: -2})
	t.Cleanup(func() { _ = rc.Close() })
	c := newClient(t, []redis.UniversalClient{rc}, WithNodeTimeout(100*time.Millisecond))
	ctx := context.Background()
	if l, err := c.TryObtain(ctx, "no-deadlines", time.Minute); err != nil {
		t.Fatal(err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 0)
	done := make(chan error, 1)
	go func() {
		_, err := c.TryObtain(ctx, "no-deadlines", time.Minute)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNodeTimeout) {
			t.Fatalf("attempt on a frozen node: %v, want ErrNodeTimeout", err)
		}
	case <-time.After(5 * time.Second): // 50 node timeouts
		_ = cl.servers[0].Resume()
		<-done
		t.Fatal("an attempt on a frozen node waited for the node to come back")
	}
}

func TestObtainWaitsForRelease(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	holder, err := c.TryObtain(ctx, "wait", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = holder.Release(ctx)
	}()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	lock, err := c.Obtain(wctx, "wait", time.Minute)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	_ = lock.Release(ctx)
}

func TestObtainNeverSleepsPastHolderTTL(t *testing.T) {
	cl := startNodes(t, 1)
	// Retry delays far longer than the holder's TTL: only the PTTL cap lets
	// the waiter in before its context ends.
	c := newClient(t, cl.clients, WithRetryDelay(30*time.Second, time.Minute))
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "pttl", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	lock, err := c.Obtain(wctx, "pttl", time.Minute)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	_ = lock.Release(ctx)
}

func TestObtainContextEnds(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	if _, err := c.TryObtain(ctx, "ctx", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Long enough for the first attempt to be answered on a loaded
	// machine: the error must carry its refusals.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := c.Obtain(wctx, "ctx", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Obtain past its deadline: %v, want ErrNotObtained and DeadlineExceeded", err)
	}
	var qe *QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, ErrHeld) {
		t.Fatalf("Obtain past its deadline: %v, want the last attempt's *QuorumError", err)
	}

	cctx, cancel2 := context.WithCancel(ctx)
	cancel2()
	_, err = c.TryObtain(cctx, "ctx-cancelled", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryObtain with a cancelled context: %v, want ErrNotObtained and Canceled", err)
	}

	// A cause is joined too, without hiding context.Canceled.
	why := errors.New("shutting down")
	kctx, cancel3 := context.WithCancelCause(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel3(why) }()
	_, err = c.Obtain(kctx, "ctx", time.Minute)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) || !errors.Is(err, why) {
		t.Fatalf("Obtain cancelled with a cause: %v, want ErrNotObtained, Canceled and the cause", err)
	}
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// TryObtain makes one attempt, whatever WithMaxAttempts says, on every
// handle: the Client's shorthand, a semaphore, a reentrant lock, a writer,
// and one pass of All and Any.
func TestTryObtainIsOneAttempt(t *testing.T) {
	cl := startNodes(t, 1)
	rec := &eventRecorder{}
	a := newClient(t, cl.clients)
	b := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	l, err := a.TryObtain(ctx, "one", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	p, err := a.Semaphore("sem", 1).TryObtain(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	f, err := a.Reentrant("fam", "job-a").TryObtain(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(ctx)
	_, writer := b.RWMutex("fam")
	tries := []struct {
		name string
		h    Locker
	}{
		{"the Client's TryObtain", nil},
		{"a semaphore", b.Semaphore("sem", 1)},
		{"a reentrant lock", b.Reentrant("fam", "job-b")},
		{"a writer", writer},
		{"All", b.All("one")},
		{"Any", b.Any("one")},
	}
	for _, tc := range tries {
		var err error
		if tc.h == nil {
			_, err = b.TryObtain(ctx, "one", 10*time.Second, WithMaxAttempts(3))
		} else {
			_, err = tc.h.TryObtain(ctx, 10*time.Second, WithMaxAttempts(3))
		}
		if !errors.Is(err, ErrHeld) {
			t.Fatalf("TryObtain of %s, held: %v, want ErrHeld", tc.name, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.attempts) != len(tries) {
		t.Fatalf("%d attempts for %d TryObtains with WithMaxAttempts(3), want %d", len(rec.attempts), len(tries), len(tries))
	}
}
