package goredis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// patience bounds every wait of the churn tests: far longer than a
// confirmation or a message takes on loopback, even on a loaded machine.
const patience = 2 * time.Second

// churn has goroutines subscribe and unsubscribe, each on channels of its
// own, cycles times (or until the time budget is spent). In every cycle
// the confirmation must come, and once it has, a message published on the
// channel must reach the waiter: a confirmation that never comes stalls a
// waiter, and one that comes too early lets it miss a release. With fresh,
// each cycle subscribes to a new channel; without, each goroutine
// subscribes to one channel again and again, right after unsubscribing.
func churn(t *testing.T, h driver.Notifier, publish func(ctx context.Context, name string) error, goroutines, cycles int, fresh bool) {
	t.Helper()
	budget := time.Now().Add(8 * time.Second)
	var (
		wg   sync.WaitGroup
		done atomic.Int64
	)
	for g := range goroutines {
		wg.Go(func() {
			timer := time.NewTimer(patience)
			defer timer.Stop()
			wait := func(c <-chan struct{}) bool {
				timer.Reset(patience)
				select {
				case <-c:
					return true
				case <-timer.C:
					return false
				}
			}
			for i := 0; i < cycles && time.Now().Before(budget); i++ {
				name := fmt.Sprintf("churn-%d", g)
				if fresh {
					name += fmt.Sprintf("-%d", i)
				}
				w := driver.NewWaiter()
				if !wait(h.Subscribe(name, w)) {
					t.Errorf("%s, cycle %d: the subscription was not confirmed within %v", name, i, patience)
					h.Unsubscribe(name, w)
					return
				}
				if err := publish(context.Background(), name); err != nil {
					t.Errorf("publish: %v", err)
					h.Unsubscribe(name, w)
					return
				}
				if !wait(w.C) {
					t.Errorf("%s, cycle %d: confirmed, but a message published after the confirmation did not arrive within %v", name, i, patience)
					h.Unsubscribe(name, w)
					return
				}
				h.Unsubscribe(name, w)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("%d subscribe cycles", done.Load())
	if !t.Failed() && done.Load() < int64(goroutines) {
		t.Fatalf("only %d cycles within the time budget", done.Load())
	}
}

// Every subscription is confirmed, and only once it is in effect: one
// pub/sub connection for every channel (a standalone node).
func TestConfirmationsUnderChurn(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	defer c.Close()
	publish := func(ctx context.Context, name string) error { return c.Publish(ctx, name, "released").Err() }
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			h := newNotifier(c, false)
			defer h.Close()
			churn(t, h, publish, 4, 500, fresh)
		})
	}
}

// The same with sharded pub/sub (Redis Cluster), where each channel has a
// connection of its own.
func TestShardedConfirmationsUnderChurn(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	c := rc.Client()
	defer c.Close()
	publish := func(ctx context.Context, name string) error { return c.SPublish(ctx, name, "released").Err() }
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			h := newNotifier(c, true)
			defer h.Close()
			churn(t, h, publish, 4, 150, fresh)
		})
	}
}

// A subscription that was confirmed stays confirmed for the waiters that
// join it, and the last waiter out leaves nothing behind, on the server or
// in the hub: a new subscription of the name is confirmed (an
// unsubscription whose reply the hub still waited for would hold its
// confirmation back).
func TestHubForgetsIdleChannels(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	c := s.Client()
	defer c.Close()
	h := newNotifier(c, false)
	defer h.Close()
	a, b := driver.NewWaiter(), driver.NewWaiter()
	select {
	case <-h.Subscribe("idle", a):
	case <-time.After(patience):
		t.Fatal("no confirmation")
	}
	select {
	case <-h.Subscribe("idle", b):
	default:
		t.Fatal("a second waiter of a confirmed channel is not confirmed at once")
	}
	h.Unsubscribe("idle", a)
	h.Unsubscribe("idle", b)
	deadline := time.Now().Add(10 * time.Second)
	for {
		chans, err := c.PubSubChannels(context.Background(), "*").Result()
		if err == nil && len(chans) == 0 && h.Channels() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("channels left: %v on the server (err %v), %d in the hub", chans, err, h.Channels())
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-h.Subscribe("idle", a):
	case <-time.After(patience):
		t.Fatal("a channel subscribed again after it was forgotten is not confirmed")
	}
	h.Unsubscribe("idle", a)
}
