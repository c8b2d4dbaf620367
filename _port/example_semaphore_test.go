package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redlock-go/redlock"
)

// At most two exports at a time across a fleet: each takes one of the two
// permits of the semaphore "exports". A third is refused while both are
// held, and gets a permit once one is released.
func ExampleClient_ObtainPermit() {
	nodes, stop := exampleNodes(5)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	first, err := c.ObtainPermit(ctx, "exports", 2, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	second, err := c.ObtainPermit(ctx, "exports", 2, 10*time.Second, redlock.WithAutoRefresh())
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println(first.Kind(), "and", second.Kind(), "held")

	_, err = c.TryObtainPermit(ctx, "exports", 2, 10*time.Second)
	fmt.Println("a third:", errors.Is(err, redlock.ErrNotObtained))

	_ = first.Release(ctx)
	third, err := c.ObtainPermit(ctx, "exports", 2, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer third.Release(ctx)
	fmt.Println("after a release, a third with a higher token:", third.Token() > first.Token())
	// Output:
	// permit and permit held
	// a third: true
	// after a release, a third with a higher token: true
}

// The quorum of a permit, and the nodes a semaphore can lose: on five
// independent nodes, a semaphore of four or more permits needs every node.
func ExamplePermitQuorum() {
	for _, k := range []int{1, 2, 3, 4, 10} {
		q := redlock.PermitQuorum(5, k)
		fmt.Printf("k=%d: %d of 5 nodes, survives %d down\n", k, q, 5-q)
	}
	fmt.Println("one node, k=10:", redlock.PermitQuorum(1, 10))
	// Output:
	// k=1: 3 of 5 nodes, survives 2 down
	// k=2: 4 of 5 nodes, survives 1 down
	// k=3: 4 of 5 nodes, survives 1 down
	// k=4: 5 of 5 nodes, survives 0 down
	// k=10: 5 of 5 nodes, survives 0 down
	// one node, k=10: 1
}
