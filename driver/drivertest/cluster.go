package drivertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// A Redis Cluster node: Info says Sharded; scripts and pipelines reach
// the slot of their keys; Masters returns every master; notifications use
// sharded pub/sub; a redlock Client hands a lock over on it.
func testCluster(t *testing.T, d Driver) {
	rc := redistest.StartClusterT(t, 3)
	n := d.Cluster(t, rc.Addrs())
	if info := n.Info(); !info.Sharded {
		t.Fatalf("Info of a Cluster node: %+v, want Sharded", info)
	}
	ctx := ctxFor(t, 6*patience)

	// Masters: one node per master, each its own server.
	var masters []driver.Node
	eventually(t, "Masters lists the three masters", patience, func() bool {
		ms, err := n.Masters(ctx)
		masters = ms
		return err == nil && len(ms) == 3
	})
	var runIDs []string
	for _, m := range masters {
		if !slices.Contains(rc.Addrs(), m.Info().Addr) {
			t.Errorf("a master's Addr %q is not one of the cluster's %v", m.Info().Addr, rc.Addrs())
		}
		info, ok := do(t, m, "INFO", "server").(string)
		if !ok {
			t.Fatal("INFO server of a master: not a string")
		}
		runIDs = append(runIDs, infoField(info, "run_id"))
	}
	slices.Sort(runIDs)
	if len(slices.Compact(runIDs)) != 3 {
		t.Errorf("the masters' run_ids %v are not three servers", runIDs)
	}
	subscribers := func(channel string) int64 {
		var sum int64
		for _, m := range masters {
			sum += numsub(t, m, channel, true)
		}
		return sum
	}

	// Scripts on keys of many slots, with a fallback to EVAL.
	g := script.Guard{MaxTTL: time.Minute, Delta: 50 * time.Millisecond, Mode: '0', FenceTTL: time.Hour, RecordTTL: 24 * time.Hour}
	for _, m := range masters {
		do(t, m, "SCRIPT", "FLUSH")
	}
	for i := range 12 {
		lk := lockKey(t, unique(fmt.Sprintf("slot%d", i)))
		k := script.Keys{Lock: lk, Fence: keys.Fence(lk), Epoch: keys.ClusterEpoch(lk)}
		a, err := script.Acquire(ctx, n, k, "mine", time.Minute, g, script.Ack{})
		if err != nil || a.Status != script.Taken {
			t.Fatalf("Acquire of %s on the cluster: %+v, %v", lk, a, err)
		}
		replies, err := n.Pipe(ctx, [][]any{{"GET", lk}, {"PTTL", lk}, {"SET", keys.Waiters(lk), "1", "PX", 60000}})
		must(t, "Pipe on one slot", err)
		if replies[0].Val != "mine" || replies[0].Err != nil || replies[1].Err != nil || replies[2].Val != "OK" {
			t.Fatalf("Pipe on one slot: %+v", replies)
		}
		rel, err := script.Release(ctx, n, lk, "mine", script.Retire{Fence: keys.Fence(lk)}, true, true)
		if err != nil || !rel.Deleted {
			t.Fatalf("Release (SPUBLISH) on the cluster: %+v, %v", rel, err)
		}
	}

	// Sharded notifications, on channels of several slots.
	hub := n.Notifier()
	defer hub.Close()
	var chs []string
	var ws []*driver.Waiter
	for i := range 6 {
		ch := keys.Channel(lockKey(t, unique(fmt.Sprintf("sharded%d", i))))
		w := driver.NewTrackingWaiter()
		if !waitFor(hub.Subscribe(ch, w), patience) {
			t.Fatalf("the sharded subscription to %s was not confirmed", ch)
		}
		chs, ws = append(chs, ch), append(ws, w)
	}
	for i, ch := range chs {
		if got := subscribers(ch); got != 1 {
			t.Errorf("%s: %d sharded subscriptions on the masters, want 1", ch, got)
		}
		v, err := n.Do(ctx, "SPUBLISH", ch, "released")
		if err != nil || v != int64(1) {
			t.Fatalf("SPUBLISH %s: %v, %v; want 1 receiver", ch, v, err)
		}
		if !heard(ws[i], ch, patience) {
			t.Fatalf("SPUBLISH on %s did not reach its waiter", ch)
		}
		for j, other := range ws {
			if j != i && slices.Contains(other.Heard(), ch) {
				t.Errorf("SPUBLISH on %s reached the waiter of %s", ch, chs[j])
			}
		}
	}
	for i, ch := range chs {
		hub.Unsubscribe(ch, ws[i])
	}
	for _, ch := range chs {
		eventually(t, "the sharded subscriptions end", patience, func() bool { return subscribers(ch) == 0 })
	}

	// A broken sharded connection wakes its waiter, and the subscription
	// comes back.
	ch := keys.Channel(lockKey(t, unique("sharded-broken")))
	w := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}
	for _, m := range masters {
		if _, err := m.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
			t.Fatal(err)
		}
	}
	if !waitFor(w.C, patience) {
		t.Fatal("a broken sharded connection did not wake its waiter")
	}
	if !hears(t, w, ch, func() { _, _ = n.Do(ctx, "SPUBLISH", ch, "released") }) {
		t.Fatalf("no message reached the waiter within %v of the break: not subscribed again", patience)
	}
	eventually(t, "one sharded subscription", patience, func() bool { return subscribers(ch) == 1 })
	hub.Unsubscribe(ch, w)

	// redlock on the cluster: one node, a handover between two Clients.
	holder := newClient(t, []driver.Node{n})
	rec := &recorder{}
	waiter := newClient(t, []driver.Node{d.Cluster(t, rc.Addrs())}, redlock.WithHook(rec))
	handover(t, holder, waiter, rec, subscribers)

	// A node of the cluster answers the commands that name no key.
	if v, err := n.Do(ctx, "PING"); err != nil || !strings.EqualFold(fmt.Sprint(v), "PONG") {
		t.Errorf("PING on the cluster: %v, %v", v, err)
	}
	if _, err := n.Do(context.Background(), "TIME"); err != nil {
		t.Errorf("TIME on the cluster: %v", err)
	}
}
