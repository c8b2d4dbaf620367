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
func ExampleWithOwner() {
	nodes, stop := exampleNodes(3)
	defer stop()
	a, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	outer, err := a.Obtain(ctx, "invoice:7", 10*time.Second, redlock.WithOwner("job-1234"))
	if err != nil {
		log.Fatal(err)
	}
	inner, err := b.Obtain(ctx, "invoice:7", 10*time.Second, redlock.WithOwner("job-1234"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Kind(), "hold, same token:", inner.Token() == outer.Token())

	_, err = b.TryObtain(ctx, "invoice:7", 10*time.Second, redlock.WithOwner("job-5678"))
	fmt.Println("another owner:", err != nil)

	_ = inner.Release(ctx)
	_ = outer.Release(ctx) // the last hold: the lock is free
	other, err := b.TryObtain(ctx, "invoice:7", 10*time.Second, redlock.WithOwner("job-5678"))
	if err != nil {
		log.Fatal(err)
	}
	defer other.Release(ctx)
	fmt.Println("then another owner, with a higher token:", other.Token() > outer.Token())
	// Output:
	// reentrant hold, same token: true
	// another owner: true
	// then another owner, with a higher token: true
}

// A read-write lock: readers share it, a writer excludes them.
func ExampleWithShared() {
	nodes, stop := exampleNodes(1)
	defer stop()
	c, err := redlock.New(nodes, redlock.WithRestartGuard(GuardOff))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	r1, err := c.Obtain(ctx, "catalog", 10*time.Second, redlock.WithShared())
	if err != nil {
		log.Fatal(err)
	}
	r2, err := c.Obtain(ctx, "catalog", 10*time.Second, redlock.WithShared())
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.TryObtain(ctx, "catalog", 10*time.Second, redlock.WithExclusive())
	fmt.Println("two readers; a writer now:", err != nil)

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := c.Obtain(ctx, "catalog", 10*time.Second, redlock.WithExclusive())
	if err != nil {
		log.Fatal(err)
	}
	defer w.Release(ctx)
	fmt.Println(w.Kind(), "lock, token above the readers':", w.Token() > r2.Token())
	// Output:
	// two readers; a writer now: true
	// write lock, token above the readers': true
}
