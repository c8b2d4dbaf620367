package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-go/redlock"
)

// ttlPrinter is a hook that prints the TTL the Client chose, and why.
type ttlPrinter struct{}

func (ttlPrinter) Observe(_ context.Context, ev redlock.Event) {
	switch e := ev.(type) {
	case redlock.ObtainEvent:
		fmt.Printf("obtain %s: TTL %v (%v)\n", e.Name, e.TTL, e.TTLReason)
	case redlock.RefreshEvent:
		fmt.Printf("refresh %s: TTL %v (%v)\n", e.Name, e.TTL, e.TTLReason)
	}
}

// The Client picks each TTL within [Min, Max]: the TTL given is the base,
// lowered when the name is contended, raised to cover the nodes' round
// trip, and never above Max.
func ExampleWithAdaptiveTTL() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), // fresh example servers
		redlock.WithAdaptiveTTL(redlock.AdaptiveTTL{Min: 2 * time.Second, Max: 30 * time.Second}),
		redlock.WithHook(ttlPrinter{}))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	lock, err := c.Obtain(ctx, "order:42", 10*time.Second) // uncontended, fast nodes: the base
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	if err := lock.Refresh(ctx, 45*time.Second); err != nil { // above Max
		log.Fatal(err)
	}
	fmt.Println("lock TTL:", lock.TTL())

	// WithFixedTTL takes the TTL as given.
	fixed, err := c.Obtain(ctx, "order:43", 5*time.Second, redlock.WithFixedTTL())
	if err != nil {
		log.Fatal(err)
	}
	defer fixed.Release(ctx)
	// Output:
	// obtain order:42: TTL 10s (base)
	// refresh order:42: TTL 30s (max)
	// lock TTL: 30s
	// obtain order:43: TTL 5s (given)
}
