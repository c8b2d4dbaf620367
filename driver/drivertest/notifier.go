package drivertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
)

// channels is what the suite reads of a Notifier that counts its channels
// (driver.Hub does).
type channels interface{ Channels() int }

// publish sends PUBLISH through the node and returns its receivers.
func publish(t testing.TB, n driver.Node, channel string) int64 {
	t.Helper()
	v, ok := do(t, n, "PUBLISH", channel, "released").(int64)
	if !ok {
		t.Fatalf("PUBLISH %s: not an integer", channel)
	}
	return v
}

// drain empties a waiter's wake-up.
func drain(w *driver.Waiter) {
	select {
	case <-w.C:
	default:
	}
}

// heard waits up to limit for a message on channel to reach w, a tracking
// waiter; a wake-up that names no channel (a broken connection before the
// subscription was confirmed) does not count.
func heard(w *driver.Waiter, channel string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		if waitFor(w.C, left) && slices.Contains(w.Heard(), channel) {
			return true
		}
	}
}

// hears reports, within patience, that a message published on channel
// (by publish) reaches w, a tracking waiter: after a broken connection a
// Notifier subscribes again in its own time, and a client library may
// subscribe again by itself for a moment (go-redis's PubSub does, inside
// the Receive that reports the break), so the test publishes until one
// message arrives. A wake-up that names no channel (another break) does
// not count.
func hears(t testing.TB, w *driver.Waiter, channel string, publish func()) bool {
	t.Helper()
	return hearsWithin(t, w, channel, publish, patience)
}

// hearsWithin is hears with a limit of its own.
func hearsWithin(t testing.TB, w *driver.Waiter, channel string, publish func(), limit time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		drain(w)
		w.Heard()
		publish()
		if waitFor(w.C, 200*time.Millisecond) && slices.Contains(w.Heard(), channel) {
			return true
		}
	}
	return false
}

// Subscribe confirms, a message wakes every waiter of its channel and no
// other, the subscription is shared and counted, and the last waiter out
// unsubscribes on the server.
func testNotifier(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	hub := n.Notifier()
	defer hub.Close()
	ch, other := unique("notify"), unique("notify-other")

	w1 := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(ch, w1), patience) {
		t.Fatalf("the subscription to %s was not confirmed within %v", ch, patience)
	}
	if !hub.Subscribed(ch) {
		t.Error("Subscribed is false for a confirmed subscription")
	}
	wOther := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(other, wOther), patience) {
		t.Fatal("the subscription to a second channel was not confirmed")
	}
	w2 := driver.NewWaiter()
	select {
	case <-hub.Subscribe(ch, w2):
	default:
		t.Error("a second waiter of a confirmed channel is not confirmed at once")
	}
	if got := numsub(t, n, ch, false); got != 1 {
		t.Errorf("PUBSUB NUMSUB with two waiters: %d, want one subscription", got)
	}

	if got := publish(t, n, ch); got != 1 {
		t.Errorf("PUBLISH: %d receivers, want 1", got)
	}
	for i, w := range []*driver.Waiter{w1, w2} {
		if !waitFor(w.C, patience) {
			t.Fatalf("waiter %d was not woken by a message", i+1)
		}
	}
	if heard := w1.Heard(); !slices.Equal(heard, []string{ch}) {
		t.Errorf("Heard: %q, want [%s]", heard, ch)
	}
	if slices.Contains(wOther.Heard(), ch) {
		t.Error("a message on one channel reached a waiter of another")
	}

	// One waiter leaves: the other still hears, the one who left does
	// not (both would be woken by the same delivery).
	hub.Unsubscribe(ch, w1)
	w1.Heard()
	publish(t, n, ch)
	if !waitFor(w2.C, patience) {
		t.Fatal("the remaining waiter was not woken")
	}
	if slices.Contains(w1.Heard(), ch) {
		t.Error("a message reached a waiter that unsubscribed")
	}

	// The last one out unsubscribes on the server.
	hub.Unsubscribe(ch, w2)
	eventually(t, "the last waiter out unsubscribes", patience, func() bool {
		return numsub(t, n, ch, false) == 0 && !hub.Subscribed(ch)
	})
	// And subscribing again works at once.
	w3 := driver.NewWaiter()
	if !waitFor(hub.Subscribe(ch, w3), patience) {
		t.Fatal("a subscription after an unsubscription was not confirmed")
	}
	publish(t, n, ch)
	if !waitFor(w3.C, patience) {
		t.Fatal("a message after subscribing again did not wake the waiter")
	}
	hub.Unsubscribe(ch, w3)
	hub.Unsubscribe(other, wOther)
	if c, ok := hub.(channels); ok {
		eventually(t, "the notifier forgets its idle channels", patience, func() bool { return c.Channels() == 0 })
	}
	eventually(t, "no channel left on the server", patience, func() bool {
		return numsub(t, n, ch, false) == 0 && numsub(t, n, other, false) == 0
	})
}

// A broken connection wakes every waiter; the Notifier subscribes again on
// a new connection, and messages reach the waiters again.
func testNotifierBroken(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	hub := n.Notifier()
	defer hub.Close()
	chs := []string{unique("broken"), unique("broken")}
	ws := []*driver.Waiter{driver.NewTrackingWaiter(), driver.NewTrackingWaiter()}
	for i, ch := range chs {
		if !waitFor(hub.Subscribe(ch, ws[i]), patience) {
			t.Fatal("not confirmed")
		}
		defer hub.Unsubscribe(ch, ws[i])
	}
	for round := range 2 {
		killed, ok := do(t, n, "CLIENT", "KILL", "TYPE", "pubsub").(int64)
		if !ok || killed < 1 {
			t.Fatalf("CLIENT KILL TYPE pubsub killed %v connections", killed)
		}
		for i, w := range ws {
			if !waitFor(w.C, patience) {
				t.Fatalf("round %d: waiter %d was not woken when its connection broke", round, i)
			}
		}
		for i, ch := range chs {
			if !hears(t, ws[i], ch, func() { publish(t, n, ch) }) {
				t.Fatalf("round %d: no message reached waiter %d within %v of the break: not subscribed again", round, i, patience)
			}
			eventually(t, fmt.Sprintf("round %d: one subscription to %s", round, ch), patience, func() bool {
				return numsub(t, n, ch, false) == 1
			})
		}
		// A new waiter is confirmed on the new connection.
		w := driver.NewWaiter()
		ch := unique("after-break")
		if !waitFor(hub.Subscribe(ch, w), patience) {
			t.Fatalf("round %d: a subscription after the break was not confirmed", round)
		}
		hub.Unsubscribe(ch, w)
	}
}

// A server that restarts (empty, on the same port) wakes the waiters; the
// Notifier subscribes again once it is back.
func testNotifierRestart(t *testing.T, d Driver) {
	s, n := standalone(t, d)
	hub := n.Notifier()
	defer hub.Close()
	ch := unique("restart")
	w := driver.NewTrackingWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}
	defer hub.Unsubscribe(ch, w)
	must(t, "kill", s.Kill())
	if !waitFor(w.C, patience) {
		t.Fatal("the waiter was not woken when its server died")
	}
	must(t, "restart", s.Restart())
	publishAfterRestart := func() {
		// The node's own connection may need a request or two to
		// find its server back.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = n.Do(ctx, "PUBLISH", ch, "released")
	}
	if !hears(t, w, ch, publishAfterRestart) {
		t.Fatalf("no message reached the waiter within %v of the restart: not subscribed again", patience)
	}
}

// Goroutines subscribe, hear a message and unsubscribe, cycles times: each
// confirmation must come, and once it has, the message must arrive. With
// fresh, every cycle has a channel of its own; without, each goroutine
// subscribes to its channel again right after unsubscribing.
func testNotifierChurn(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			hub := n.Notifier()
			defer hub.Close()
			budget := time.Now().Add(8 * time.Second)
			var (
				wg   sync.WaitGroup
				done atomic.Int64
			)
			base := unique("churn")
			for g := range 4 {
				wg.Go(func() {
					for i := 0; i < 150 && time.Now().Before(budget); i++ {
						name := fmt.Sprintf("%s-%d", base, g)
						if fresh {
							name += fmt.Sprintf("-%d", i)
						}
						w := driver.NewWaiter()
						if !waitFor(hub.Subscribe(name, w), patience) {
							t.Errorf("%s, cycle %d: not confirmed within %v", name, i, patience)
							hub.Unsubscribe(name, w)
							return
						}
						ctx, cancel := context.WithTimeout(context.Background(), patience)
						_, err := n.Do(ctx, "PUBLISH", name, "released")
						cancel()
						if err != nil {
							t.Errorf("PUBLISH: %v", err)
							hub.Unsubscribe(name, w)
							return
						}
						if !waitFor(w.C, patience) {
							t.Errorf("%s, cycle %d: confirmed, but a message published after the confirmation did not arrive within %v", name, i, patience)
							hub.Unsubscribe(name, w)
							return
						}
						hub.Unsubscribe(name, w)
						done.Add(1)
					}
				})
			}
			wg.Wait()
			t.Logf("%d cycles", done.Load())
			if !t.Failed() && done.Load() < 4 {
				t.Fatalf("only %d cycles within the time budget", done.Load())
			}
		})
	}
}

// Close wakes the waiters, drops the subscriptions on the server, and a
// closed Notifier never confirms.
func testNotifierClose(t *testing.T, d Driver) {
	_, n := standalone(t, d)
	hub := n.Notifier()
	ch := unique("close")
	w := driver.NewWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}
	hub.Close()
	if !waitFor(w.C, patience) {
		t.Error("Close did not wake the waiter still registered")
	}
	hub.Close() // idempotent
	eventually(t, "the server forgets the subscription", patience, func() bool { return numsub(t, n, ch, false) == 0 })
	if waitFor(hub.Subscribe(unique("after-close"), driver.NewWaiter()), 300*time.Millisecond) {
		t.Error("a closed Notifier confirmed a subscription")
	}
}
