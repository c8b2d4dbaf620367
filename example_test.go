package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// exampleNodes starts n local redis-server processes for an example and
// returns a client for each and a function that stops them. In production
// the clients point at independent Redis deployments.
func exampleNodes(n int) ([]redis.UniversalClient, func()) { return redistest.ExampleNodes(n) }

// Five independent nodes: the classic Redlock deployment.
func ExampleNew() {
	nodes, stop := exampleNodes(5)
	defer stop()

	// The restart guard would keep the example's freshly started servers
	// out of locking for a minute (see WithMaxTTL). In production, keep it.
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	lock, err := c.Obtain(ctx, "order:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	fmt.Println("holding", lock.Name(), "with a fencing token:", lock.Token() > 0)
	// Output: holding order:42 with a fencing token: true
}

// A handle names a lock; each Obtain of it returns a new *Lock. Obtain
// waits until its context ends.
func ExampleClient_Mutex() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	report := c.Mutex("report:daily")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for day := range 2 {
		lock, err := report.Obtain(ctx, time.Minute)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("generating report", day+1, "token increased:", lock.Token() > 0)
		if err := lock.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// generating report 1 token increased: true
	// generating report 2 token increased: true
}

// Obtain is the shorthand of c.Mutex(name).Obtain: it waits for the lock
// until its context ends.
func ExampleClient_Obtain() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := c.Obtain(ctx, "report:daily", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	// Work only while the lock is valid.
	if time.Now().Before(lock.ValidUntil()) {
		fmt.Println("generating the report")
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: generating the report
}

// TryObtain makes one attempt: the way to say "someone else is doing it".
func ExampleClient_TryObtain() {
	nodes, stop := exampleNodes(3)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	first, err := c.TryObtain(ctx, "cron:cleanup", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer first.Release(ctx)

	_, err = c.TryObtain(ctx, "cron:cleanup", time.Minute)
	switch {
	case errors.Is(err, redlock.ErrHeld):
		fmt.Println("another instance runs the job")
	case errors.Is(err, redlock.ErrNotObtained):
		fmt.Println("no quorum of nodes answered:", err)
	}
	// Output: another instance runs the job
}

// The reasons of each node are in a *QuorumError.
func ExampleQuorumError() {
	nodes, stop := exampleNodes(3)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	held, err := c.TryObtain(ctx, "invoice:7", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	defer held.Release(ctx)

	_, err = c.TryObtain(ctx, "invoice:7", time.Minute)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		// Fewer than Need agreed: none, or the third node, which the
		// first obtain's request may not have reached yet.
		fmt.Printf("fewer than %d nodes agreed: %v\n", qe.Need, qe.Agreed < qe.Need)
		held := 0
		for _, n := range qe.Nodes {
			// The attempt is decided once two nodes refuse; the third
			// may not have answered yet (ErrNodePending).
			if errors.Is(n.Err, redlock.ErrHeld) {
				held++
			}
		}
		fmt.Println("nodes that named another owner:", min(held, 2), "or more")
	}
	// Output:
	// fewer than 2 nodes agreed: true
	// nodes that named another owner: 2 or more
}

// Refresh extends a lock before its validity ends.
func ExampleLock_Refresh() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Obtain(ctx, "batch:import", 2*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	if err := lock.Refresh(ctx, 10*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("lost the lock: stop working")
		return
	} else if err != nil {
		fmt.Println("not refreshed; still valid until", lock.ValidUntil())
		return
	}
	fmt.Println("refreshed for", lock.TTL())
	// Output: refreshed for 10s
}

// Release gives the lock back at once, so that the next owner need not wait
// for its TTL. A lock whose keys had already expired, or been taken, is
// released with an error wrapping ErrNotHeld.
func ExampleLock_Release() {
	nodes, stop := exampleNodes(3)
	defer stop()
	// The 1 s lock below would get a 50 ms per-node timeout, too tight for
	// a loaded test machine: set one.
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(300*time.Millisecond)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.TryObtain(ctx, "mailbox:9", time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	next, err := c.TryObtain(ctx, "mailbox:9", time.Minute)
	fmt.Println("taken again at once:", err == nil)
	_ = next.Release(ctx)

	short, err := c.TryObtain(ctx, "mailbox:10", time.Second)
	if err != nil {
		log.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // its keys expire
	err = short.Release(ctx)
	fmt.Println("release after expiry: not held:", errors.Is(err, redlock.ErrNotHeld))
	// Output:
	// taken again at once: true
	// release after expiry: not held: true
}

// WithAutoRefresh keeps a lock alive until Release, for work whose length
// is not known in advance; Done says when it is lost. (Do does this for a
// function.)
func ExampleWithAutoRefresh() {
	nodes, stop := exampleNodes(3)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Obtain(ctx, "feed:import", 2*time.Second, redlock.WithAutoRefresh())
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	for range 5 { // five batches of half a second: longer than the TTL
		select {
		case <-lock.Done():
			fmt.Println("lost the lock, stopping:", lock.Err())
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Println("imported 5 batches; still held:", lock.Err() == nil)
	// Output: imported 5 batches; still held: true
}

// Do holds the lock for as long as the function runs, and tells it when the
// lock is lost.
func ExampleClient_Do() {
	nodes, stop := exampleNodes(3)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.Do(context.Background(), "payment:8812", 2*time.Second, func(ctx context.Context) error {
		// Longer than the TTL: the lock is refreshed meanwhile.
		select {
		case <-time.After(3 * time.Second):
			fmt.Println("payment processed once")
			return nil
		case <-ctx.Done():
			return context.Cause(ctx) // redlock.ErrLost
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: payment processed once
}

// Done reports the loss of a lock held with automatic refresh.
func ExampleLock_Done() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lock, err := c.Obtain(ctx, "leader", 5*time.Second, redlock.WithAutoRefresh())
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = lock.Release(ctx) // stepping down
	}()
	<-lock.Done()
	fmt.Println(errors.Is(lock.Err(), redlock.ErrNotHeld), errors.Is(lock.Err(), redlock.ErrLost))
	// Output: true false
}

// requestID is the context key of the example's request IDs.
type requestID struct{}

// auditHook reports each obtain and release with the request that made
// it, as a tracing hook would make a span a child of the request's.
type auditHook struct{}

func (auditHook) Observe(ctx context.Context, ev redlock.Event) {
	switch e := ev.(type) {
	case redlock.ObtainEvent:
		fmt.Printf("request %v: obtain %s: %d attempt(s), err %v\n", ctx.Value(requestID{}), e.Name, e.Attempts, e.Err)
	case redlock.ReleaseEvent:
		fmt.Printf("request %v: release %s: err %v\n", ctx.Value(requestID{}), e.Name, e.Err)
	}
}

// A Hook sees every event with the context of the call it belongs to.
func ExampleWithHook() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithHook(auditHook{}), redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.WithValue(context.Background(), requestID{}, "r-17")
	lock, err := c.TryObtain(ctx, "invoice:3", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)
	// Output:
	// request r-17: obtain invoice:3: 1 attempt(s), err <nil>
	// request r-17: release invoice:3: err <nil>
}

// releases counts releases: a hook must be safe for concurrent use.
type releases struct {
	n atomic.Int64
}

func (r *releases) Observe(_ context.Context, ev redlock.Event) {
	if _, ok := ev.(redlock.ReleaseEvent); ok {
		r.n.Add(1)
	}
}

// JoinHooks installs several hooks on one Client: the Prometheus and the
// OpenTelemetry adapters, say, or here the audit hook above and a counter.
func ExampleJoinHooks() {
	nodes, stop := exampleNodes(1)
	defer stop()
	counted := &releases{}
	hook := redlock.JoinHooks(auditHook{}, counted)
	c, err := redlock.New(nodes, redlock.WithHook(hook), redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.WithValue(context.Background(), requestID{}, "r-18")
	lock, err := c.TryObtain(ctx, "invoice:4", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_ = lock.Release(ctx)
	fmt.Println("releases counted:", counted.n.Load())
	// Output:
	// request r-18: obtain invoice:4: 1 attempt(s), err <nil>
	// request r-18: release invoice:4: err <nil>
	// releases counted: 1
}
