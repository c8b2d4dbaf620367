package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redistest"
)

// Re-entry past a depth of 100, through two Clients: every hold keeps the
// token, another owner is refused until the last hold is released, and the
// next owner's token is higher.
func TestReentrantDepth(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			a := newClient(t, cl.clients)
			b := newClient(t, cl.clients)
			ctx := context.Background()
			first, err := a.Reentrant("job", "run-1").TryObtain(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if first.sp.label != "reentrant" || first.Token() <= 0 {
				t.Fatalf("kind %v, token %d", first.sp.label, first.Token())
			}
			holds := []*Lock{first}
			for i := range 120 {
				c := a
				if i%2 == 1 {
					c = b // re-entry through another Client
				}
				l, err := c.Reentrant("job", "run-1").TryObtain(ctx, time.Minute)
				if err != nil {
					t.Fatalf("re-entry %d: %v", i, err)
				}
				if l.Token() != first.Token() {
					t.Fatalf("re-entry %d: token %d, want %d", i, l.Token(), first.Token())
				}
				holds = append(holds, l)
			}
			if _, err := b.Reentrant("job", "run-2").TryObtain(ctx, time.Minute); !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrHeld) {
				t.Fatalf("another owner: %v, want held", err)
			}
			if _, err := reader(b, "job").TryObtain(ctx, time.Minute); !errors.Is(err, ErrHeld) {
				t.Fatalf("a reader: %v, want held", err)
			}
			rand.Shuffle(len(holds), func(i, j int) { holds[i], holds[j] = holds[j], holds[i] })
			for i, l := range holds {
				if i == len(holds)-1 {
					if _, err := b.Reentrant("job", "run-2").TryObtain(ctx, time.Minute); !errors.Is(err, ErrHeld) {
						t.Fatalf("another owner with one hold left: %v, want held", err)
					}
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("release %d: %v", i, err)
				}
			}
			next, err := b.Reentrant("job", "run-2").TryObtain(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if next.Token() <= first.Token() {
				t.Fatalf("next owner's token %d, want above %d", next.Token(), first.Token())
			}
			_ = next.Release(ctx)
		})
	}
}

// A re-entry after the owner's lock expired opens a new tenure: a higher
// token, and the expired hold is lost.
func TestReentryAfterExpiry(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	old, err := c.Reentrant("job", "run").TryObtain(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hold's loss", func() bool { return errors.Is(old.Err(), ErrLost) })
	time.Sleep(300 * time.Millisecond) // and its keys' expiry
	again, err := c.Reentrant("job", "run").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release(ctx)
	if again.Token() <= old.Token() {
		t.Fatalf("token after expiry %d, want above %d", again.Token(), old.Token())
	}
	if err := old.Refresh(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("refresh of the expired hold: %v, want ErrNotHeld", err)
	}
}

// A node that lost the lock: a re-entry still succeeds, its token never goes
// down (it is kept when a quorum of the nodes still agree on it, else a new
// tenure begins with a higher one), and a refresh re-seeds the node.
func TestReentryWhenANodeLostTheLock(t *testing.T) {
	cl := startNodes(t, 5)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	first, err := c.Reentrant("job", "run").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release(ctx)
	if err := cl.clients[0].Del(ctx, "{"+limits.Prefix+"job}").Err(); err != nil {
		t.Fatal(err)
	}
	again, err := c.Reentrant("job", "run").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release(ctx)
	if again.Token() < first.Token() {
		t.Fatalf("re-entry with one node lost: token %d, below %d", again.Token(), first.Token())
	}
	third, err := c.Reentrant("job", "run").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Release(ctx)
	if third.Token() != again.Token() {
		t.Fatalf("re-entry on healthy nodes: token %d, want %d", third.Token(), again.Token())
	}
	if err := first.Refresh(ctx, time.Minute); err != nil {
		t.Fatalf("refresh: %v", err)
	}
}

// Readers share, a writer waits for them, readers that come after a waiting
// writer wait behind it, and tokens order reads and writes.
func TestReadWrite(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			r1, err := reader(c, "doc").TryObtain(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			r2, err := reader(c, "doc").TryObtain(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if r1.sp.label != "read" {
				t.Fatalf("kind %v", r1.sp.label)
			}
			type result struct {
				l   *Lock
				err error
			}
			wch := make(chan result, 1)
			go func() {
				l, err := writer(c, "doc").Obtain(ctx, 5*time.Second)
				wch <- result{l, err}
			}()
			// The writer waits; a reader that comes now waits behind it.
			eventually(t, "the writer's wait mark on a quorum", func() bool {
				marked := 0
				for _, node := range cl.clients {
					marked += int(node.Exists(ctx, "{"+limits.Prefix+"doc}:wwait").Val())
				}
				return marked >= n/2+1
			})
			if _, err := reader(c, "doc").TryObtain(ctx, time.Minute); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("a reader behind a waiting writer: %v, want not obtained", err)
			}
			rch := make(chan result, 1)
			go func() {
				l, err := reader(c, "doc").Obtain(ctx, time.Minute, WithRetryDelay(time.Millisecond, 20*time.Millisecond))
				rch <- result{l, err}
			}()
			_ = r1.Release(ctx)
			_ = r2.Release(ctx)
			w := <-wch
			if w.err != nil {
				t.Fatalf("writer: %v", w.err)
			}
			if w.l.Token() <= max(r1.Token(), r2.Token()) {
				t.Fatalf("writer's token %d, want above the readers' %d, %d", w.l.Token(), r1.Token(), r2.Token())
			}
			select {
			case r := <-rch:
				t.Fatalf("a reader got in while the writer holds the lock: %v", r.err)
			case <-time.After(100 * time.Millisecond):
			}
			if err := w.l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-rch
			if r.err != nil {
				t.Fatalf("reader after the writer: %v", r.err)
			}
			if r.l.Token() <= w.l.Token() {
				t.Fatalf("reader's token %d, want above the writer's %d", r.l.Token(), w.l.Token())
			}
			_ = r.l.Release(ctx)
		})
	}
}

// Readers and writers hammer one name through several Clients; a checker
// sees that no writer ever overlaps a reader or another writer, and that
// every writer's token is above every earlier hold's.
func TestReadWriteHammer(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var (
				mu               sync.Mutex
				readers, writers int
				maxToken         int64
				bad              []string
			)
			var wg sync.WaitGroup
			for g := range 6 {
				c := newClient(t, cl.clients)
				wg.Go(func() {
					for i := range 25 {
						h := reader(c, "hammer")
						write := (g+i)%3 == 0
						if write {
							h = writer(c, "hammer")
						}
						l, err := h.Obtain(ctx, 5*time.Second, WithRetryDelay(time.Millisecond, 10*time.Millisecond))
						if err != nil {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("obtain: %v", err))
							mu.Unlock()
							return
						}
						mu.Lock()
						if write {
							if readers > 0 || writers > 0 {
								bad = append(bad, fmt.Sprintf("writer in with %d readers, %d writers", readers, writers))
							}
							if l.Token() <= maxToken {
								bad = append(bad, fmt.Sprintf("writer's token %d not above %d", l.Token(), maxToken))
							}
							writers++
						} else {
							if writers > 0 {
								bad = append(bad, "reader in with a writer")
							}
							readers++
						}
						maxToken = max(maxToken, l.Token())
						mu.Unlock()
						time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
						mu.Lock()
						if write {
							writers--
						} else {
							readers--
						}
						mu.Unlock()
						if err := l.Release(ctx); err != nil {
							mu.Lock()
							bad = append(bad, fmt.Sprintf("release: %v", err))
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

// Kinds do not mix on one name, and an empty owner is refused.
func TestFamilyBadInput(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	plain, err := c.TryObtain(ctx, "mixed", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = reader(c, "mixed").Obtain(ctx, time.Minute)
	if !errors.Is(err, ErrWrongKind) || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("a reader over a plain lock: %v, want ErrWrongKind", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("Obtain waited %v for a holder of another kind", time.Since(start))
	}
	_ = plain.Release(ctx)
	r, err := c.Reentrant("mixed", "me").TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryObtain(ctx, "mixed", time.Minute); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("a plain lock over a reentrant one: %v, want ErrWrongKind", err)
	}
	_ = r.Release(ctx)
	if _, err := c.Reentrant("bad", "").TryObtain(ctx, time.Minute); !errors.Is(err, ErrInvalid) {
		t.Errorf("a reentrant lock of an empty owner: %v, want ErrInvalid", err)
	}
}

// The lock family on a Redis Cluster node: each name's keys (the hash,
// the wait mark, the counter, the waiters mark) share its slot, so every
// script runs in one slot, over names in several slots.
func TestFamilyRedisCluster(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	c := newClient(t, []redis.UniversalClient{node})
	other := newClient(t, []redis.UniversalClient{node})
	ctx := context.Background()
	slots := map[int64]bool{}
	for i := range 6 {
		name := fmt.Sprintf("cluster-family-%d", i)
		slot, err := node.ClusterKeySlot(ctx, "{"+limits.Prefix+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		outer, err := c.Reentrant(name, "job").TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("%s: owner: %v", name, err)
		}
		inner, err := other.Reentrant(name, "job").TryObtain(ctx, time.Minute)
		if err != nil || inner.Token() != outer.Token() {
			t.Fatalf("%s: re-entry through another Client: %v (token %d, want %d)", name, err, inner.Token(), outer.Token())
		}
		if _, err := reader(other, name).TryObtain(ctx, time.Minute); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("%s: a reader while the owner holds: %v", name, err)
		}
		for _, l := range []*Lock{inner, outer} {
			if err := l.Refresh(ctx, time.Minute); err != nil {
				t.Fatalf("%s: Refresh: %v", name, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("%s: Release: %v", name, err)
			}
		}
		r1, err := reader(c, name).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("%s: reader: %v", name, err)
		}
		r2, err := reader(other, name).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("%s: second reader: %v", name, err)
		}
		if _, err := writer(c, name).TryObtain(ctx, time.Minute); !errors.Is(err, ErrNotObtained) {
			t.Fatalf("%s: a writer while readers hold: %v", name, err)
		}
		_ = r1.Release(ctx)
		_ = r2.Release(ctx)
		w, err := writer(c, name).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatalf("%s: writer after the readers: %v", name, err)
		}
		if w.Token() <= max(r1.Token(), r2.Token()) {
			t.Fatalf("%s: writer's token %d, readers' %d, %d", name, w.Token(), r1.Token(), r2.Token())
		}
		_ = w.Release(ctx)
	}
	if len(slots) < 2 {
		t.Fatal("the names share one slot; the test needs several")
	}
}

// A re-entry never waits behind a waiter of its own Client: here the head
// of the name's queue is a writer waiting for the owner's own lock, and a
// nested Do of the owner must run at once, not wait until its context ends.
func TestReentryDoesNotWaitBehindALocalWaiter(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			key, err := c.e.layout.redisKey("nested")
			if err != nil {
				t.Fatal(err)
			}
			err = c.Reentrant("nested", "job-1").Do(ctx, 30*time.Second, func(ctx context.Context) error {
				wctx, stop := context.WithCancel(ctx)
				defer stop()
				writerDone := make(chan error, 1)
				go func() {
					l, err := writer(c, "nested").Obtain(wctx, 30*time.Second)
					_ = l.Release(context.Background())
					writerDone <- err
				}()
				eventually(t, "the writer queued behind the owner's lock", func() bool { return c.e.waits.queues.Queued(key) })
				// Generous: a re-entry takes a round trip, and the bug
				// made it wait for this context to end.
				ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				inner := c.Reentrant("nested", "job-1").Do(ictx, 30*time.Second, func(context.Context) error { return nil })
				stop()
				if werr := <-writerDone; werr == nil {
					t.Error("the writer obtained the lock while the owner held it")
				}
				return inner
			})
			if err != nil {
				t.Fatalf("nested Do of the owner: %v", err)
			}
		})
	}
}

// A writer that gives up withdraws its mark at once: readers are not kept
// out for the writer's TTL. A writer still waiting keeps them out.
func TestGivenUpWriterDoesNotBlockReaders(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			a := newClient(t, cl.clients)
			b := newClient(t, cl.clients)
			ctx := context.Background()
			r1, err := reader(a, "doc").TryObtain(ctx, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer r1.Release(ctx)
			// A refused TryObtain of the writer.
			if _, err := writer(b, "doc").TryObtain(ctx, time.Minute); !errors.Is(err, ErrHeld) {
				t.Fatalf("writer's TryObtain beside a reader: %v, want ErrHeld", err)
			}
			r2, err := reader(a, "doc").TryObtain(ctx, 30*time.Second)
			if err != nil {
				t.Fatalf("reader after a writer's refused TryObtain: %v", err)
			}
			_ = r2.Release(ctx)
			// An Obtain of the writer that ends with its context.
			octx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err = writer(b, "doc").Obtain(octx, time.Minute)
			cancel()
			if !errors.Is(err, ErrNotObtained) {
				t.Fatalf("writer's Obtain that timed out: %v", err)
			}
			r3, err := reader(a, "doc").TryObtain(ctx, 30*time.Second)
			if err != nil {
				t.Fatalf("reader after a writer's Obtain ended: %v", err)
			}
			_ = r3.Release(ctx)
			// A writer that still waits keeps new readers out.
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			writerDone := make(chan error, 1)
			go func() {
				l, err := writer(b, "doc").Obtain(wctx, time.Minute)
				_ = l.Release(context.Background())
				writerDone <- err
			}()
			eventually(t, "a waiting writer keeps readers out", func() bool {
				l, err := reader(a, "doc").TryObtain(ctx, 30*time.Second)
				_ = l.Release(ctx)
				return errors.Is(err, ErrHeld)
			})
			stop()
			<-writerDone
		})
	}
}
