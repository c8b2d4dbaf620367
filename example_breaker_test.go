package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// deadNodes returns n clients of Redis servers that are down (nothing
// listens on their ports, so every request is refused), and a function
// that closes the clients.
func deadNodes(n int) ([]redis.UniversalClient, func()) {
	var out []redis.UniversalClient
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		out = append(out, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1}))
	}
	return out, func() {
		for _, c := range out {
			_ = c.Close()
		}
	}
}

// With two of three nodes down, the circuit breaker opens after a few
// attempts: TryObtain then fails at once, naming the unreachable nodes.
func ExampleWithBreaker() {
	nodes, stop := exampleNodes(1)
	defer stop()
	dead, closeDead := deadNodes(2)
	defer closeDead()
	nodes = append(nodes, dead...)
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(500*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	for range 10 {
		_, err = c.TryObtain(ctx, "report", 10*time.Second)
		var qe *redlock.QuorumError
		if errors.Is(err, redlock.ErrBreakerOpen) && errors.As(err, &qe) {
			fmt.Println("breaker", c.BreakerState(), "-", qe.Agreed, "of", qe.Need, "nodes reachable,", len(qe.Nodes), "named")
			fmt.Println(errors.Is(err, redlock.ErrNotObtained))
			break
		}
	}
	// Output:
	// breaker open - 1 of 2 nodes reachable, 2 named
	// true
}

// The degraded mode: while the breaker is open, a lock comes from the
// lease store, and says so. Two Clients that fall back to one store
// exclude each other; a client that still reaches a quorum of the nodes
// does not see these leases at all (docs/safety.md, section 7).
func ExampleWithDegradedMode() {
	nodes, stop := exampleNodes(1)
	defer stop()
	dead, closeDead := deadNodes(2)
	defer closeDead()
	nodes = append(nodes, dead...)
	leases := redlock.NewLocalLeases() // or the redlocksql module's SQLite or PostgreSQL store
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(500*time.Millisecond),
		redlock.WithDegradedMode(leases))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	var lock *redlock.Lock
	for range 10 { // the first attempts find too few nodes, then the breaker opens
		if lock, err = c.TryObtain(ctx, "report", 10*time.Second); err == nil {
			break
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	fmt.Println("degraded:", lock.Degraded(), "- token below every Redis token:", lock.Token() < 0)

	err = c.Do(ctx, "nightly", 10*time.Second, func(ctx context.Context) error {
		fmt.Println("Do's function sees it:", redlock.IsDegraded(ctx))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// degraded: true - token below every Redis token: true
	// Do's function sees it: true
}
