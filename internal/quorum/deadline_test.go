package quorum

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

type ctxKey struct{}

func TestSharedDeadlines(t *testing.T) {
	var ds deadlines
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	now := time.Now()
	const timeout = 160 * time.Millisecond // slack 10 ms
	a := ds.context(parent, now, timeout)
	b := ds.context(parent, now.Add(5*time.Millisecond), timeout)
	c := ds.context(parent, now.Add(50*time.Millisecond), timeout)
	if a.Done() != b.Done() {
		t.Error("deadlines 5 ms apart (slack 10 ms) got two Done channels")
	}
	if a.Done() == c.Done() {
		t.Error("deadlines 50 ms apart (slack 10 ms) share a Done channel")
	}
	for i, ctx := range []context.Context{a, b, c} {
		want := now.Add(timeout)
		if i == 1 {
			want = want.Add(5 * time.Millisecond)
		} else if i == 2 {
			want = want.Add(50 * time.Millisecond)
		}
		if d, ok := ctx.Deadline(); !ok || !d.Equal(want) {
			t.Errorf("context %d: Deadline() = %v, %v; want its own %v", i, d, ok, want)
		}
		if got := ctx.Value(ctxKey{}); got != "v" {
			t.Errorf("context %d: Value = %v, want the parent's", i, got)
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("context %d: Err() = %v before its deadline", i, err)
		}
	}
	for i, ctx := range []context.Context{a, b, c} {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatalf("context %d: Done never closed", i)
		}
		d, _ := ctx.Deadline()
		if time.Now().Before(d) {
			t.Errorf("context %d: Done closed before its deadline", i)
		}
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("context %d: Err() = %v after Done, want DeadlineExceeded", i, err)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
			t.Errorf("context %d: Cause = %v, want DeadlineExceeded", i, cause)
		}
	}
}

// A one-node round runs on the caller's goroutine when the node honours
// deadlines; a request that waits on its context (as go-redis does for a
// pooled connection) ends at the node timeout, counted as a timeout.
func TestSingleNodeRequestEndsByTheTimeout(t *testing.T) {
	var wg sync.WaitGroup
	ns := nodes(1)
	ns[0].HonoursDeadline = true
	r := &Round[bool]{
		Nodes: ns, Quorum: Count(1), Timeout: 100 * time.Millisecond,
		Call: func(ctx context.Context, _ *Node) (bool, error) {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(time.Minute):
				return true, nil
			}
		},
		Agree: func(v bool) bool { return v },
	}
	start := time.Now()
	res := r.Run(context.Background(), &wg)
	wg.Wait()
	if res.Won || !errors.Is(res.Replies[0].Err, ErrTimeout) || !errors.Is(res.Replies[0].Err, context.DeadlineExceeded) {
		t.Fatalf("round of a request blocked past its timeout: won=%v, %v; want ErrTimeout", res.Won, res.Replies[0].Err)
	}
	if el := time.Since(start); el < r.Timeout {
		t.Fatalf("request ended after %v, before its timeout %v", el, r.Timeout)
	}
}

func TestWorkersReuseAndStop(t *testing.T) {
	var wg sync.WaitGroup
	w := NewWorkers(&wg, time.Minute)
	ran := make(chan int, 2)
	w.Go(func() { ran <- 1 })
	<-ran
	// The first goroutine is idle now (or about to be): a second function
	// runs, on it or on a new one, and Stop ends both.
	w.Go(func() { ran <- 2 })
	if got := <-ran; got != 2 {
		t.Fatalf("ran %d", got)
	}
	w.Stop()
	w.Stop() // idempotent
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("workers did not end after Stop, with a minute of idle time left")
	}
	// After Stop, Go still runs its function, and its goroutine ends.
	w.Go(func() { ran <- 3 })
	if got := <-ran; got != 3 {
		t.Fatalf("ran %d", got)
	}
	wg.Wait()
}

func TestWorkersEndWhenIdle(t *testing.T) {
	var wg sync.WaitGroup
	w := NewWorkers(&wg, 10*time.Millisecond)
	for range 3 {
		w.Go(func() {})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("idle workers did not end")
	}
}
