package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A single-name holder of one of the names blocks ObtainAll, which holds
// the names before it meanwhile, until its release wakes it.
func TestMultiWaitsForSingleNameHolder(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			other := newClient(t, cl.clients)
			ctx := context.Background()
			holder, err := other.TryObtain(ctx, "w-2", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				m   *Lock
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				// Timers of a minute: only the release can wake it in time.
				m, err := c.All("w-3", "w-2", "w-1").Obtain(ctx, time.Minute, slowRetry)
				done <- result{m, err}
			}()
			eventually(t, "ObtainAll waits for w-2", func() bool { return subscribed(t, cl.clients, "w-2") })
			if _, err := other.TryObtain(ctx, "w-1", time.Minute); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("w-1 while ObtainAll waits for w-2: %v, want held (ErrNotObtained)", err)
			}
			select {
			case r := <-done:
				t.Fatalf("ObtainAll returned while w-2 was held: %v", r.err)
			default:
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("the release of w-2 did not wake ObtainAll")
			}
			if r.err != nil {
				t.Fatalf("ObtainAll: %v", r.err)
			}
			for _, name := range []string{"w-1", "w-2", "w-3"} {
				if partToken(r.m, name) <= 0 {
					t.Errorf("Token(%q) = %d", name, partToken(r.m, name))
				}
			}
			if err := r.m.Release(ctx); err != nil {
				t.Fatal(err)
			}
			assertFree(t, cl.clients, "w-1", "w-2", "w-3")
		})
	}
}

// The names obtained first are kept alive while ObtainAll waits longer than
// their TTL; automatic refresh stays on afterwards only when asked for.
func TestMultiKeepsEarlierLocksAliveWhileWaiting(t *testing.T) {
	cl := startNodes(t, 3)
	// A 3 s TTL with 300 ms node timeouts: refreshes every second leave a
	// loaded machine room (1 s and 100 ms failed once under load).
	opts := []Option{WithNodeTimeout(300 * time.Millisecond)}
	c := newClient(t, cl.clients, opts...)
	other := newClient(t, cl.clients, opts...)
	ctx := context.Background()
	const ttl = 3 * time.Second
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			holder, err := other.TryObtain(ctx, "ka-2", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var obtainOpts []ObtainOption
			if auto {
				obtainOpts = append(obtainOpts, WithAutoRefresh())
			}
			type result struct {
				m   *Lock
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				m, err := c.All("ka-1", "ka-2").Obtain(ctx, ttl, obtainOpts...)
				done <- result{m, err}
			}()
			eventually(t, "ObtainAll waits for ka-2", func() bool { return subscribed(t, cl.clients, "ka-2") })
			// Past ka-1's TTL: only its refreshes keep it.
			time.Sleep(2 * ttl)
			if _, err := other.TryObtain(ctx, "ka-1", time.Minute); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("ka-1 two TTLs into ObtainAll's wait: %v, want still held", err)
			}
			if err := holder.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("ObtainAll: %v", r.err)
			}
			defer r.m.Release(ctx)
			if err := r.m.Err(); err != nil {
				t.Fatalf("Err after ObtainAll: %v", err)
			}
			for _, l := range r.m.Parts() {
				l.mu.Lock()
				on := l.auto
				l.mu.Unlock()
				if on != auto {
					t.Errorf("%s: automatic refresh %v, want %v", l.Name(), on, auto)
				}
			}
			if left := time.Until(r.m.ValidUntil()); left <= 0 || left > ttl {
				t.Errorf("ValidUntil %v from now, want in (0, %v]", left, ttl)
			}
			if err := r.m.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lock already held that is lost while ObtainAll waits for a later name
// ends the wait: everything is released and the error says why.
func TestMultiLostWhileWaiting(t *testing.T) {
	cl := startNodes(t, 3)
	opts := []Option{WithNodeTimeout(100 * time.Millisecond)}
	c := newClient(t, cl.clients, opts...)
	other := newClient(t, cl.clients, opts...)
	ctx := context.Background()
	holder, err := other.TryObtain(ctx, "lw-2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		m, err := c.All("lw-2", "lw-1").Obtain(ctx, 600*time.Millisecond, slowRetry)
		if err == nil {
			_ = m.Release(ctx)
		}
		done <- err
	}()
	eventually(t, "ObtainAll waits for lw-2", func() bool { return subscribed(t, cl.clients, "lw-2") })
	steal(t, cl.clients, "lw-1")
	var err2 error
	select {
	case err2 = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("ObtainAll still waits after lw-1 was lost")
	}
	if !errors.Is(err2, ErrNotObtained) || !errors.Is(err2, ErrLost) || errors.Is(err2, context.Canceled) ||
		!strings.Contains(err2.Error(), `"lw-1"`) || !strings.Contains(err2.Error(), `"lw-2"`) {
		t.Fatalf("ObtainAll: %v; want ErrNotObtained and ErrLost naming lw-1 and lw-2", err2)
	}
	if err := holder.Err(); err != nil {
		t.Fatalf("the holder of lw-2: %v", err)
	}
	if v, _ := rawGet(t, cl.clients[0], "lw-1"); v != "thief" {
		t.Fatalf("lw-1 is %q, want the thief's", v)
	}
}

func TestMultiCloseWhileWaiting(t *testing.T) {
	cl := startNodes(t, 1)
	c, err := New(cl.clients, WithRestartGuard(GuardOff)) // fresh servers
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, cl.clients)
	ctx := context.Background()
	holder, err := other.TryObtain(ctx, "cw-2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.All("cw-1", "cw-2").Obtain(ctx, time.Minute, slowRetry)
		done <- err
	}()
	eventually(t, "ObtainAll waits for cw-2", func() bool { return subscribed(t, cl.clients, "cw-2") })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("ObtainAll during Close: %v, want ErrClosed", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("ObtainAll still waits after Close")
	}
	assertFree(t, cl.clients, "cw-1")
	if _, err := c.All("cw-1").Obtain(ctx, time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("ObtainAll after Close: %v, want ErrClosed", err)
	}
}

// holders is the checker of mutual exclusion: how many goroutines believe
// they hold each name.
type holders struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *holders) enter(t *testing.T, who string, names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		h.n[name]++
		if h.n[name] > 1 {
			t.Errorf("%s: %d holders of %q at once", who, h.n[name], name)
		}
	}
}

func (h *holders) leave(names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		h.n[name]--
	}
}

// Multi-name obtains of random overlapping subsets, in random orders, and
// single-name obtains, each goroutine with its own Client, never deadlock
// and never overlap on a name.
func TestMultiNoDeadlockRandomOrders(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			names := []string{"dl-a", "dl-b", "dl-c", "dl-d", "dl-e", "dl-f"}
			const (
				multis     = 4
				singles    = 2
				iterations = 25
			)
			// A failure condition, not a speed assertion: a deadlock
			// would wait forever.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			h := &holders{n: map[string]int{}}
			var (
				wg       sync.WaitGroup
				obtained atomic.Int32
			)
			hold := func() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) }
			for g := range multis {
				c := newClient(t, cl.clients, WithNodeTimeout(time.Second))
				wg.Go(func() {
					who := fmt.Sprintf("multi %d", g)
					for range iterations {
						subset := slices.Clone(names)
						rand.Shuffle(len(subset), func(i, j int) { subset[i], subset[j] = subset[j], subset[i] })
						subset = subset[:2+rand.IntN(3)]
						m, err := c.All(subset...).Obtain(ctx, 10*time.Second)
						if err != nil {
							t.Errorf("%s: ObtainAll(%v): %v", who, subset, err)
							return
						}
						h.enter(t, who, subset)
						hold()
						if err := m.Err(); err != nil {
							t.Errorf("%s: held %v: %v", who, subset, err)
						}
						h.leave(subset)
						if err := m.Release(ctx); err != nil {
							t.Errorf("%s: Release(%v): %v", who, subset, err)
						}
						obtained.Add(1)
					}
				})
			}
			for g := range singles {
				c := newClient(t, cl.clients, WithNodeTimeout(time.Second))
				wg.Go(func() {
					who := fmt.Sprintf("single %d", g)
					for range iterations {
						name := names[rand.IntN(len(names))]
						l, err := c.Obtain(ctx, name, 10*time.Second)
						if err != nil {
							t.Errorf("%s: Obtain(%s): %v", who, name, err)
							return
						}
						h.enter(t, who, []string{name})
						hold()
						h.leave([]string{name})
						if err := l.Release(ctx); err != nil {
							t.Errorf("%s: Release(%s): %v", who, name, err)
						}
						obtained.Add(1)
					}
				})
			}
			wg.Wait()
			if got, want := obtained.Load(), int32((multis+singles)*iterations); got != want {
				t.Fatalf("%d of %d obtains completed", got, want)
			}
			assertFree(t, cl.clients, names...)
		})
	}
}
