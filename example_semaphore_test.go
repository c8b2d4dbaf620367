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
func ExampleClient_Semaphore() {
	nodes, stop := exampleNodes(5)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	exports := c.Semaphore("exports", 2)
	first, err := exports.Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	second, err := exports.Obtain(ctx, 10*time.Second, redlock.WithAutoRefresh())
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("two permits held")

	_, err = exports.TryObtain(ctx, 10*time.Second)
	fmt.Println("a third:", errors.Is(err, redlock.ErrNotObtained))

	_ = first.Release(ctx)
	third, err := exports.Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer third.Release(ctx)
	fmt.Println("after a release, a third with a higher token:", third.Token() > first.Token())
	// Output:
	// two permits held
	// a third: true
	// after a release, a third with a higher token: true
}
