package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlock-go/redlock"
)

// A reentrant lock: the owner obtains it again while holding it, here
// through a second Client, and keeps its token. Another owner waits until
// every hold is released.
func ExampleClient_Reentrant() {
	nodes, stop := exampleNodes(3)
	defer stop()
	a, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	outer, err := a.Reentrant("invoice:7", "job-1234").Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	inner, err := b.Reentrant("invoice:7", "job-1234").Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second hold, same token:", inner.Token() == outer.Token())

	_, err = b.Reentrant("invoice:7", "job-5678").TryObtain(ctx, 10*time.Second)
	fmt.Println("another owner:", err != nil)

	_ = inner.Release(ctx)
	_ = outer.Release(ctx) // the last hold: the lock is free
	other, err := b.Reentrant("invoice:7", "job-5678").TryObtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer other.Release(ctx)
	fmt.Println("then another owner, with a higher token:", other.Token() > outer.Token())
	// Output:
	// second hold, same token: true
	// another owner: true
	// then another owner, with a higher token: true
}

// A read-write lock: readers share it, a writer excludes them.
func ExampleClient_RWMutex() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	reader, writer := c.RWMutex("catalog")
	r1, err := reader.Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := reader.Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	_, err = writer.TryObtain(ctx, 10*time.Second)
	fmt.Println("two readers; a writer now:", err != nil)

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := writer.Obtain(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer w.Release(ctx)
	fmt.Println("writer in, token above the readers':", w.Token() > r2.Token())
	// Output:
	// two readers; a writer now: true
	// writer in, token above the readers': true
}
