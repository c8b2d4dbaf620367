package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redisproc"
	"github.com/redlock-go/redlock/internal/redistest"
)

// deadlineOnly is a context with a deadline and no Done channel, as
// redlock gives a node whose client honours deadlines in a round of
// several nodes.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// Under the load of 64 goroutines, requests to one node leave in
// pipelines, and each gets its own reply; with the node frozen, each
// request returns at its own deadline (a node timeout), not when its
// batch does; once the node is back, requests are answered again. With
// go-redis's default options a request that goes straight out (alone on
// its node) reads until go-redis's ReadTimeout, as without
// auto-pipelining (Info.HonoursDeadline is false, and redlock stops
// waiting for it at its deadline: TestAutoPipeliningFrozenNodeRedlock);
// there only the queued requests are held to their deadlines here, which
// the test cannot tell from the others, so it checks the replies only.
func TestAutoPipeliningFrozenNode(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
	const (
		goroutines  = 64
		nodeTimeout = 250 * time.Millisecond
		margin      = 2 * time.Second // a loaded machine's scheduling, not the node
	)
	for _, deadline := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", deadline), func(t *testing.T) {
			s := redistest.Start(t, 1)[0]
			rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: deadline})
			defer rc.Close()
			n := New(rc)
			if n.ap == nil {
				t.Fatal("a standalone node is not auto-pipelined by default")
			}

			// Healthy: every reply is the request's own.
			load := func(rounds int) {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range rounds {
							want := fmt.Sprintf("g%d-%d", g, i)
							ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
							v, err := n.Do(ctx, "ECHO", want)
							cancel()
							if err != nil || v != want {
								t.Errorf("ECHO %s: %v, %v", want, v, err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			load(200)
			if t.Failed() {
				return
			}
			batches, batched := n.ap.batches.Load(), n.ap.batched.Load()
			t.Logf("healthy: %d requests, %d in %d pipelines", goroutines*200, batched, batches)
			if batched <= batches {
				t.Errorf("%d requests in %d pipelines: no pipeline carried more than one request", batched, batches)
			}

			// Frozen: each request returns within its node timeout.
			if err := s.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					_ = s.Resume()
				}
			}()
			rounds := 3
			if !deadline {
				rounds = 1 // a request alone on its node reads for seconds
			}
			for round := range rounds {
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						start := time.Now()
						var ctx context.Context = deadlineOnly{context.Background(), start.Add(nodeTimeout)}
						if g%2 == 0 {
							var cancel context.CancelFunc
							ctx, cancel = context.WithTimeout(context.Background(), nodeTimeout)
							defer cancel()
						}
						v, err := n.Do(ctx, "ECHO", fmt.Sprintf("frozen-%d-%d", round, g))
						took := time.Since(start)
						if err == nil {
							t.Errorf("a frozen node answered %v", v)
						}
						if deadline && took > nodeTimeout+margin {
							t.Errorf("round %d, goroutine %d: a request to a frozen node returned after %v, with a node timeout of %v (%v)", round, g, took, nodeTimeout, err)
						}
						if err != nil && !isTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
							t.Errorf("a request to a frozen node: %v, want a timeout", err)
						}
					})
				}
				wg.Wait()
			}

			// Back: answered again, each with its own reply.
			resumed = true
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
			load(20)
		})
	}
}

// A batch that gets no connection: the node is frozen and the pool has
// none, so the pipeline's dial (its handshake) times out, and go-redis
// has no retry left (MaxRetries: -1, as redistest's clients). Before
// go-redis v9.22.0 the pipeline's commands were then left with no value
// and no error (only Exec's error said what happened), and the request
// got a nil reply from a frozen node: redlock read it as an answer, and
// a frozen node was never skipped (TestFrozenSingleNodeTimesOutThenIsSkipped
// failed on v9.16.0, v9.19.0 and v9.21.0). Each request of the batch must
// get the timeout.
func TestAutoPipeliningBatchWithoutConnection(t *testing.T) {
	if !redisproc.FreezeSupported() {
		t.Skip("freezing a process needs SIGSTOP")
	}
	s := redistest.Start(t, 1)[0]
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rc.Close()
	n := New(rc)
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Resume() }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	batch := []*request{
		{ctx: ctx, args: []any{"ECHO", "a"}, done: make(chan struct{}, 1)},
		{ctx: ctx, args: []any{"ECHO", "b"}, done: make(chan struct{}, 1)},
	}
	n.ap.send(batch)
	for i, r := range batch {
		select {
		case <-r.done:
		default:
			t.Fatalf("request %d: not answered", i)
		}
		if r.err == nil {
			t.Errorf("request %d: a frozen node answered %v", i, r.val)
		} else if !isTimeout(r.err) && !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("request %d: %v, want a timeout", i, r.err)
		}
	}
	if got := rc.PoolStats().TotalConns; got != 0 {
		t.Errorf("%d connections in the pool: the batch was not the one without a connection", got)
	}
}
