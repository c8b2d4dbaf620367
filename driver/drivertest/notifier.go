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
// (driver.Hub and the go-redis driver's hub do).
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
	wOther := driver.NewWaiter()
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
	select {
	case <-wOther.C:
		t.Error("a message on one channel woke a waiter of another")
	default:
	}

	// One waiter leaves: the other still hears, the one who left does
	// not (both would be woken by the same delivery).
	hub.Unsubscribe(ch, w1)
	drain(w1)
	publish(t, n, ch)
	if !waitFor(w2.C, patience) {
		t.Fatal("the remaining waiter was not woken")
	}
	select {
	case <-w1.C:
		t.Error("a waiter that unsubscribed was woken")
	default:
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
	ws := []*driver.Waiter{driver.NewWaiter(), driver.NewWaiter()}
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
		for _, ch := range chs {
			eventually(t, fmt.Sprintf("round %d: %s subscribed again", round, ch), patience, func() bool {
				return numsub(t, n, ch, false) == 1
			})
		}
		for i, ch := range chs {
			drain(ws[i])
			publish(t, n, ch)
			if !waitFor(ws[i].C, patience) {
				t.Fatalf("round %d: a message after the new subscription did not wake waiter %d", round, i)
			}
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
	w := driver.NewWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}
	defer hub.Unsubscribe(ch, w)
	must(t, "kill", s.Kill())
	if !waitFor(w.C, patience) {
		t.Fatal("the waiter was not woken when its server died")
	}
	must(t, "restart", s.Restart())
	eventually(t, "subscribed again after the restart", 2*patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "PUBSUB", "NUMSUB", ch)
		a, ok := v.([]any)
		return err == nil && ok && len(a) == 2 && a[1] == int64(1)
	})
	drain(w)
	publish(t, n, ch)
	if !waitFor(w.C, patience) {
		t.Fatal("a message after the restart did not wake the waiter")
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
