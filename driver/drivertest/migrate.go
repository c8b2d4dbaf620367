package drivertest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
)

// migrationWake bounds how long after a release a waiter may take to
// obtain the lock when its slot has moved: a notification takes
// milliseconds, the waiter's retry delay (migrationRetry) far longer.
const (
	migrationWake  = 5 * time.Second
	migrationRetry = 30 * time.Second
)

// A waiter subscribed before its lock's slot moves to another master of
// a Redis Cluster wakes at a release after the move, not on its retry
// timer: the former owner ends the slot's sharded subscriptions (it sends
// sunsubscribe), and the Notifier subscribes again, on the new owner.
func testClusterSlotMigration(t *testing.T, d Driver) {
	rc := redistest.StartClusterT(t, 2)
	ctx := ctxFor(t, 6*patience)
	holder := newClient(t, []driver.Node{d.Cluster(t, rc.Addrs())})
	rec := &recorder{}
	waiter := newClient(t, []driver.Node{d.Cluster(t, rc.Addrs())}, redlock.WithHook(rec))
	servers := make([]*redis.Client, len(rc.Servers))
	for i, s := range rc.Servers {
		servers[i] = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = servers[i].Close() })
	}
	subscribers := func(i int, channel string) int64 {
		m, err := servers[i].PubSubShardNumSub(ctx, channel).Result()
		must(t, "PUBSUB SHARDNUMSUB", err)
		return m[channel]
	}

	name := unique("migrate")
	key := lockKey(t, name)
	channel := keys.Channel(key)
	slot, err := rc.KeySlot(ctx, key)
	must(t, "CLUSTER KEYSLOT", err)
	from, err := rc.Owner(ctx, slot)
	must(t, "the slot's owner", err)
	to := (from + 1) % len(rc.Servers)

	l1, err := holder.Obtain(ctx, name, time.Minute)
	must(t, "Obtain", err)
	type result struct {
		l   *redlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Obtain(ctx, name, time.Minute, redlock.WithRetryDelay(migrationRetry, migrationRetry))
		got <- result{l, err}
	}()
	eventually(t, "the waiter subscribes on the slot's owner", patience, func() bool { return subscribers(from, channel) == 1 })
	// Let the waiter look for a missed release after subscribing: from
	// then on, only a notification (or a broken subscription) wakes it.
	time.Sleep(300 * time.Millisecond)

	must(t, "migrate the slot", rc.MigrateSlot(ctx, slot, to))
	if n := subscribers(from, channel); n != 0 {
		t.Errorf("the former owner still has %d sharded subscriptions to %s after the move", n, channel)
	}
	// The Notifier subscribes again on the new owner in its own time;
	// the release below is checked whether it has or not.
	resubscribed := false
	deadline := time.Now().Add(patience)
	for !resubscribed && time.Now().Before(deadline) {
		resubscribed = subscribers(to, channel) == 1
		if !resubscribed {
			time.Sleep(10 * time.Millisecond)
		}
	}

	released := time.Now()
	must(t, "Release after the move", l1.Release(ctx))
	timer := time.NewTimer(migrationWake)
	defer timer.Stop()
	var r result
	select {
	case r = <-got:
	case <-timer.C:
		t.Fatalf("the waiter did not obtain the lock within %v of its release after the slot moved (retry delay %v; subscribed again on the new owner: %v; waits ended by %v)",
			migrationWake, migrationRetry, resubscribed, rec.woken())
	}
	must(t, "the waiter's Obtain", r.err)
	t.Logf("obtained %v after the release; subscribed again on the new owner: %v; waits ended by %v", time.Since(released), resubscribed, rec.woken())
	if !resubscribed {
		t.Errorf("the Notifier did not subscribe to %s on the slot's new owner within %v", channel, patience)
	}
	must(t, "Release of the waiter's lock", r.l.Release(ctx))
}
