package drivertest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

// A Sentinel node: Info does not claim to name the server; commands,
// notifications and a redlock handover reach the master; after a failover
// the node reaches the new master.
func testSentinel(t *testing.T, d Driver) {
	dep := redistest.StartSentinelT(t, "drivertest")
	n := d.Sentinel(t, dep.Name, dep.SentinelAddrs())
	if info := n.Info(); info.Unique || info.Sharded {
		t.Errorf("Info of a Sentinel node: %+v; want neither Unique (its address is not its master's) nor Sharded", info)
	}
	// The port of the server a node's commands reach.
	port := func(n driver.Node) int {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "INFO", "server")
		if err != nil {
			return -1
		}
		s, _ := v.(string)
		p, _ := strconv.Atoi(infoField(s, "tcp_port"))
		return p
	}
	if got := port(n); got != dep.Master.Port() {
		t.Fatalf("the Sentinel node reaches port %d, want the master's %d", got, dep.Master.Port())
	}
	hub := n.Notifier()
	defer hub.Close()
	ch := unique("sentinel")
	w := driver.NewWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}
	publish(t, n, ch)
	if !waitFor(w.C, patience) {
		t.Fatal("a message did not wake the waiter")
	}
	hub.Unsubscribe(ch, w)

	holder := newClient(t, []driver.Node{n})
	rec := &recorder{}
	waiter := newClient(t, []driver.Node{d.Sentinel(t, dep.Name, dep.SentinelAddrs())}, redlock.WithHook(rec))
	handover(t, holder, waiter, rec, func(channel string) int64 { return numsub(t, n, channel, false) })

	// Failover: the node follows the sentinels to the new master.
	ctx := ctxFor(t, 6*patience)
	must(t, "failover", dep.Failover(ctx))
	eventually(t, "the node reaches the new master", 3*patience, func() bool { return port(n) == dep.Master.Port() })
	eventually(t, "a write succeeds on the new master", patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "SET", unique("after-failover"), "v")
		return err == nil && v == "OK"
	})
}
