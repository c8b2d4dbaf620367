package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redisproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestContenders checks each contender's worker on real redis-server
// nodes, on one node and on five, as the harness builds them: a second
// worker cannot take a held key, Unlock frees it, and Lock waits for it.
// redlock runs with its restart guard off, so that the new nodes take part
// at once (the harness waits for them instead).
func TestContenders(t *testing.T) {
	servers, err := redisproc.StartServers(5, redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redisproc.StopAll(servers) })
	addrs := redisproc.Addrs(servers)

	want := map[int][]string{
		1: {"floor/ctx", "redlock/ctx", "redsync/ctx", "redislock/ctx",
			"floor/defaults", "redlock/defaults", "redsync/defaults", "redislock/defaults",
			"floor/rueidis", "redlock/rueidis", "rueidislock"},
		5: {"floor/ctx", "redlock/ctx", "redsync/ctx", "floor/defaults", "redlock/defaults", "redsync/defaults", "redlock/rueidis"},
	}
	for _, n := range []int{1, 5} {
		var all []*redis.Client
		set, err := newSet(addrs[:n], 10*time.Second, time.Second, &all, redlock.WithRestartGuard(redlock.GuardOff))
		t.Cleanup(func() {
			for _, c := range set {
				c.close()
			}
			closeClients(all)
		})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range set {
			names = append(names, c.name)
		}
		if fmt.Sprint(names) != fmt.Sprint(want[n]) {
			t.Errorf("n=%d: contenders %v, want %v", n, names, want[n])
		}
		for _, c := range set {
			t.Run(fmt.Sprintf("n=%d/%s", n, c.name), func(t *testing.T) {
				checkWorker(t, c, fmt.Sprintf("test:%d:%s", n, c.name))
			})
		}
	}
}

func checkWorker(t *testing.T, c *contender, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w1, w2 := c.newWorker(key), c.newWorker(key)
	if err := w1.TryLock(ctx); err != nil {
		t.Fatalf("TryLock of a free key: %v", err)
	}
	if err := w2.TryLock(ctx); err == nil {
		t.Fatal("a second worker's TryLock took a held key")
	}
	if err := w1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := w2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if err := w2.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if c.lib == "floor" {
		return // the floor makes one attempt: it never waits, and runs serially in contended scenarios
	}

	if err := w1.TryLock(ctx); err != nil {
		t.Fatalf("TryLock of a free key: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- w2.Lock(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("Lock returned while the key was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := w1.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after the holder's Unlock: %v", err)
	}
	if err := w2.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
