package drivertest

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
)

// frozenWindow is how long the frozen node stays frozen while the suite
// waits for requests to return: a request that returns within it cannot
// have had a reply.
const frozenWindow = 5 * time.Second

// A frozen node (SIGSTOP) does not hold a request past its deadline when
// the driver says it honours deadlines, with a timeout error; many
// requests at once do not block one another; the Notifier's calls do not
// block and its Close returns; the node works again once resumed.
func testFrozen(t *testing.T, d Driver) {
	canFreeze(t)
	s, n := standalone(t, d)
	do(t, n, "PING")
	hub := n.Notifier()
	hubClosed := false
	defer func() {
		if !hubClosed {
			hub.Close()
		}
	}()
	ch := unique("frozen")
	w := driver.NewWaiter()
	if !waitFor(hub.Subscribe(ch, w), patience) {
		t.Fatal("not confirmed")
	}

	must(t, "pause", s.Pause())
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			must(t, "resume", s.Resume())
		}
	}
	defer resume()
	frozenAt := time.Now()
	info := n.Info()

	if info.HonoursDeadline {
		const deadline = 300 * time.Millisecond
		calls := map[string]func(ctx context.Context) error{
			"Do": func(ctx context.Context) error {
				_, err := n.Do(ctx, "SET", unique("frozen-key"), "v")
				return err
			},
			"Pipe": func(ctx context.Context) error {
				_, err := n.Pipe(ctx, [][]any{{"SET", unique("frozen-key"), "v"}, {"PTTL", "x"}})
				return err
			},
		}
		for name, call := range calls {
			const concurrent = 20
			errs := make(chan error, concurrent)
			for range concurrent {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					errs <- call(ctx)
				}()
			}
			timer := time.NewTimer(frozenWindow)
			for i := range concurrent {
				select {
				case err := <-errs:
					if err == nil || driver.IsReply(err) || !isTimeout(err) {
						t.Errorf("%s on a frozen node: %v (%T), want a timeout that is not a reply", name, err, err)
					}
				case <-timer.C:
					resume() // let the requests end before the test does
					for range concurrent - i {
						<-errs
					}
					t.Fatalf("%s on a frozen node: %d of %d requests did not return within %v of their %v deadline; Info says the driver honours deadlines",
						name, concurrent-i, concurrent, frozenWindow, deadline)
				}
			}
			timer.Stop()
		}
	} else {
		t.Logf("%s does not honour deadlines (Info.HonoursDeadline false): redlock runs each request on a goroutine of its own; EndToEndFrozenNode checks that", d.Name)
	}

	// The Notifier does not block on the frozen node.
	start := time.Now()
	w2 := driver.NewWaiter()
	hub.Subscribe(unique("frozen-sub"), w2)
	hub.Unsubscribe(ch, w)
	if took := time.Since(start); took > time.Second {
		t.Errorf("Subscribe and Unsubscribe took %v on a frozen node; they must not wait for the network", took)
	}
	closed := make(chan struct{})
	go func() { hub.Close(); close(closed) }()
	if !waitFor(closed, patience) {
		resume()
		<-closed
		t.Fatalf("the Notifier's Close did not return within %v while its node was frozen", patience)
	}
	hubClosed = true
	if time.Since(frozenAt) > frozenWindow+patience {
		t.Logf("the node was frozen for %v", time.Since(frozenAt))
	}
	resume()
	eventually(t, "the node answers once resumed", patience, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		v, err := n.Do(ctx, "PING")
		return err == nil && v == "PONG"
	})
}

// A node whose server is gone (a closed port) fails requests at once with
// the refusal, not with a timeout, and not as a reply.
func testRefused(t *testing.T, d Driver) {
	s, n := standalone(t, d)
	do(t, n, "PING")
	must(t, "stop", s.Stop())
	const deadline = 5 * time.Second
	var once sync.Once
	for i := range 6 {
		for _, pipe := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			start := time.Now()
			var err error
			if pipe {
				_, err = n.Pipe(ctx, [][]any{{"PING"}, {"PING"}})
			} else {
				_, err = n.Do(ctx, "PING")
			}
			took := time.Since(start)
			cancel()
			switch {
			case err == nil:
				t.Fatal("a request to a stopped server succeeded")
			case driver.IsReply(err):
				t.Fatalf("a connection failure reported as an error reply: %v", err)
			case isTimeout(err) || took > deadline/2:
				t.Fatalf("request %d to a closed port: %v after %v; want the refusal at once", i, err, took)
			case i == 0:
				// The first may find its pooled connection broken.
			case !errors.Is(err, syscall.ECONNREFUSED):
				t.Fatalf("request %d to a closed port: %v (%T); want an error that matches syscall.ECONNREFUSED", i, err, err)
			default:
				once.Do(func() { t.Logf("%s: %v", d.Name, err) })
			}
		}
	}
}
