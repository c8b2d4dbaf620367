// Command fenced-storage shows what a fencing token is for. Two workers
// update a record under one lock. The first pauses past its lock's TTL (as
// a long GC pause would), the second takes the lock and writes, and when the
// first wakes up and writes with its old token, the store refuses it.
//
//	go run ./examples/fenced-storage
//
// It starts three local redis-server processes as lock nodes and one as the
// store. The store is package fence: the record and its fence in one hash,
// checked in one script with each operation. (Its subpackage store is the
// fault and robustness suites' record, over the same package.)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redisproc"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	var servers []*redisproc.Server
	defer func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}()
	var nodes []redis.UniversalClient
	for range 4 {
		s, err := redisproc.StartServer(redisproc.Options{})
		if err != nil {
			return err
		}
		servers = append(servers, s)
		c := s.Client()
		defer c.Close()
		nodes = append(nodes, c)
	}
	db := fence.NewRedis(nodes[3])
	const record = "account:7"
	// The servers were just started: the restart guard would keep them
	// out of locking for the recovery window. Keep it on in production.
	c, err := redlock.New(nodes[:3], redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()

	slow, err := c.Obtain(ctx, "account:7", time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("worker A holds the lock with token %d, then pauses for 2s (TTL 1s)\n", slow.Token())
	time.Sleep(2 * time.Second)

	fast, err := c.Obtain(ctx, "account:7", time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("worker B obtains the lock with token %d and writes\n", fast.Token())
	if err := db.Set(ctx, record, fast.Sequencer(), "balance=90"); err != nil {
		return err
	}
	_ = fast.Release(ctx)

	fmt.Println("worker A wakes up and writes with its old token")
	err = db.Set(ctx, record, slow.Sequencer(), "balance=150")
	switch {
	case errors.Is(err, fence.ErrStale):
		fmt.Println("the store refused it:", err)
	case err != nil:
		return err
	default:
		return errors.New("the store accepted a stale write")
	}
	st, err := db.Inspect(ctx, record)
	if err != nil {
		return err
	}
	fmt.Printf("stored: %s (token %d; %d stale write refused)\n", st.Value, st.Fence, st.Refused)
	return nil
}
