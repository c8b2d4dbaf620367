package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-go/redlock"
)

// A transfer locks both accounts as one lock: all or nothing, in an order
// that cannot deadlock with a transfer the other way round.
func ExampleClient_All() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := c.All("account:bob", "account:alice").Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	for _, l := range lock.Parts() {
		// Each account's store checks its own fencing token.
		fmt.Println("holding", l.Name(), "token", l.Token() > 0)
	}
	// Output:
	// holding account:alice token true
	// holding account:bob token true
}

// Do keeps every lock of All alive while the function runs, and cancels
// its context if any of them is lost.
func ExampleClient_All_do() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.All("account:alice", "account:bob").Do(context.Background(), 10*time.Second, func(ctx context.Context) error {
		fmt.Println("moving 10 from alice to bob")
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: moving 10 from alice to bob
}
