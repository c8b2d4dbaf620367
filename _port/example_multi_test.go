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
func ExampleClient_ObtainAll() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lock, err := c.ObtainAll(ctx, []string{"account:bob", "account:alice"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)
	for _, l := range lock.Locks() {
		// Each account's store checks its own fencing token.
		fmt.Println("holding", l.Name(), "token", lock.Token(l.Name()) > 0)
	}
	// Output:
	// holding account:alice token true
	// holding account:bob token true
}

// DoAll keeps every lock alive while the function runs, and cancels its
// context if any of them is lost.
func ExampleClient_DoAll() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff)) // fresh example servers
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.DoAll(context.Background(), []string{"account:alice", "account:bob"}, 10*time.Second,
		func(ctx context.Context) error {
			fmt.Println("moving 10 from alice to bob")
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	// Output: moving 10 from alice to bob
}
