package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
)

// Redis-free tests of the waiter's pure decisions (waiter.go), then the
// segmented lock's tests (Client.Any: the wait loop over several candidate
// names) against Redis. The waits for one name run against Redis in
// waits_test.go, obtain_test.go and all_test.go.

func TestRankCandidates(t *testing.T) {
	rkeys := []string{"{a}", "{b}", "{c}", "{d}"}
	inGrace := func(k string) bool { return k == "{c}" }
	got := rankCandidates(rkeys, []string{keys.Channel("{d}"), "unknown-channel"}, inGrace)
	if want := []int{1, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("ranks %v, want %v (heard first, grace last)", got, want)
	}
	// A name both heard and in its grace period is heard: likely free.
	got = rankCandidates(rkeys, []string{keys.Channel("{c}")}, inGrace)
	if want := []int{1, 1, 0, 1}; !slices.Equal(got, want) {
		t.Fatalf("ranks %v, want %v", got, want)
	}
}

// arrange puts the candidates heard released first and the one in its
// grace period last, and the others in a random order between them.
func TestArrangeOrder(t *testing.T) {
	e := &engine{wiring: wiring{cfg: config{now: time.Now}}}
	rkeys := []string{"{a}", "{b}", "{c}", "{d}", "{e}"}
	now := time.Now()
	e.waits.queues.SetGrace("{e}", now.Add(time.Hour), now)
	heard := driver.NewTrackingWaiter()
	r := &request{keys: rkeys, names: []string{"a", "b", "c", "d", "e"}}
	w := waiter{e: e, r: r, heard: heard, order: []int{0, 1, 2, 3, 4}}
	seen := map[int]bool{} // the candidate tried second
	for range 200 {
		heard.Notify(keys.Channel("{c}"))
		rank := w.arrange()
		if w.order[0] != 2 || w.order[4] != 4 {
			t.Fatalf("order %v (ranks %v): want the heard candidate 2 first and the one in grace, 4, last", w.order, rank)
		}
		mid := slices.Clone(w.order[1:4])
		slices.Sort(mid)
		if !slices.Equal(mid, []int{0, 1, 3}) {
			t.Fatalf("order %v is not a permutation", w.order)
		}
		seen[w.order[1]] = true
	}
	if len(seen) != 3 {
		t.Errorf("in 200 passes, only %v came second: the candidates of one rank are not shuffled", seen)
	}
	// Nothing heard (a timer's pass): the heard mark is gone.
	w.arrange()
	if w.order[4] != 4 {
		t.Errorf("order %v: the candidate in grace is not last", w.order)
	}
	// One name has no order.
	one := waiter{e: e, r: &request{keys: rkeys[:1]}, order: []int{0}}
	if rank := one.arrange(); rank != nil {
		t.Errorf("one name ranked %v, want nil", rank)
	}
}

func TestSoonest(t *testing.T) {
	now := time.Now()
	held := []time.Time{{}, now.Add(-time.Second), now.Add(3 * time.Second), now.Add(time.Second)}
	if d := soonest(held, now); d != time.Second {
		t.Errorf("soonest %v, want 1s (zero and past times ignored)", d)
	}
	if d := soonest([]time.Time{{}, now.Add(-time.Second)}, now); d != -1 {
		t.Errorf("soonest %v with no future holder, want -1", d)
	}
}

func TestWaiterDone(t *testing.T) {
	held := fmt.Errorf("redlock: obtain: %w", ErrNotObtained)
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{ErrClosed, true},
		{fmt.Errorf("x: %w", ErrWrongKind), true},
		{fmt.Errorf("x: %w", ErrConfigConflict), true},
		{fmt.Errorf("x: %w", errSameServer), true},
		{held, false},
		{fmt.Errorf("x: %w", ErrBreakerOpen), false},
	} {
		if got := final(c.err); got != c.want {
			t.Errorf("final(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := waiter{ctx: ctx, r: &request{passes: 2}}
	w.r.o.retry.maxAttempts = 3
	if w.done(held) {
		t.Error("done after 2 of 3 passes")
	}
	w.r.passes = 3
	if !w.done(held) {
		t.Error("not done after 3 of 3 passes")
	}
	w.r.o.retry.maxAttempts = 0
	if w.done(held) {
		t.Error("done with unlimited passes and a live context")
	}
	if err := w.fail(held); err != held {
		t.Errorf("fail with a live context = %v, want the pass's error as is", err)
	}
	cancel()
	if !w.done(held) {
		t.Error("not done after the context ended")
	}
	if err := w.fail(held); !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotObtained) {
		t.Errorf("fail after the context ended = %v, want both errors", err)
	}
	if err := w.fail(ErrClosed); err != ErrClosed {
		t.Errorf("fail(ErrClosed) = %v, want ErrClosed alone", err)
	}
}

func segmentNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return names
}

// Bad input is refused with ErrInvalid before any I/O: the node here does
// not even exist.
func TestAnyBadInput(t *testing.T) {
	c, cmds := offlineClient(t)
	ctx := context.Background()
	tests := badNames()
	for _, tt := range tests {
		for _, try := range []bool{false, true} {
			var (
				l   *Lock
				err error
			)
			if try {
				l, err = c.Any(tt.names...).TryObtain(ctx, tt.ttl, tt.opts...)
			} else {
				l, err = c.Any(tt.names...).Obtain(ctx, tt.ttl, tt.opts...)
			}
			if l != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s (try %v): %v, %v; want ErrInvalid saying %q", tt.what, try, l, err, tt.want)
			}
		}
	}
	if n := cmds.Load(); n != 0 {
		t.Errorf("%d commands sent for bad input, want none", n)
	}
	_ = c.Close()
	if _, err := c.Any("a").Obtain(ctx, time.Minute); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// Free segments are handed out one each, in a random order; once all are
// held, Any(...).TryObtain says they are held.
func TestAnyTryObtainTakesEachFreeSegment(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			c := newClient(t, cl.clients)
			ctx := context.Background()
			names := segmentNames("take", 4)
			got := make(map[string]int64)
			for range names {
				l, err := c.Any(names...).TryObtain(ctx, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if _, dup := got[l.Name()]; dup {
					t.Fatalf("segment %q handed out twice", l.Name())
				}
				if l.Token() <= 0 {
					t.Errorf("segment %q: token %d", l.Name(), l.Token())
				}
				got[l.Name()] = l.Token()
			}
			if len(got) != len(names) {
				t.Fatalf("got %v, want every one of %v", got, names)
			}
			l, err := c.Any(names...).TryObtain(ctx, time.Minute)
			if l != nil || !errors.Is(err, ErrNotObtained) || !errors.Is(err, ErrHeld) {
				t.Fatalf("every segment held: %v, %v; want ErrNotObtained and ErrHeld", l, err)
			}
			// Another client, with Obtain's waiting bounded by attempts.
			other := newClient(t, cl.clients, WithRetryDelay(time.Millisecond, 2*time.Millisecond))
			if _, err := other.Any(names...).Obtain(ctx, time.Minute, WithMaxAttempts(3)); !errors.Is(err, ErrNotObtained) {
				t.Fatalf("Any(...).Obtain with 3 passes, every segment held: %v", err)
			}
		})
	}
}

// A random order spreads the callers over the segments: over many
// obtain-release cycles on free segments, every segment is taken often.
func TestAnySpreadsLoad(t *testing.T) {
	cl := startNodes(t, 1)
	c := newClient(t, cl.clients)
	ctx := context.Background()
	names := segmentNames("spread", 4)
	const cycles = 400
	count := make(map[string]int)
	for range cycles {
		l, err := c.Any(names...).TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		count[l.Name()]++
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Each segment's share is binomial(400, 1/4): mean 100, sd 8.7. Below
	// 50 is more than 5 sd away: a fixed order gives 400 and 0.
	for _, name := range names {
		if count[name] < 50 {
			t.Errorf("segment %q taken %d times of %d (%v): the order is not random", name, count[name], cycles, count)
		}
	}
}

// Many goroutines on several Clients hammer a few segments: never two
// holders of one segment at once, and each segment's fencing tokens
// increase from one holder to the next.
func TestAnyExclusivePerSegment(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			names := segmentNames("hammer", 3)
			clients := []*Client{
				newClient(t, cl.clients, WithNodeTimeout(2*time.Second)),
				newClient(t, cl.clients, WithNodeTimeout(2*time.Second)),
				newClient(t, cl.clients, WithNodeTimeout(2*time.Second)),
			}
			type segment struct {
				mu      sync.Mutex
				holders int
				token   int64
				uses    int
			}
			segs := make(map[string]*segment)
			for _, name := range names {
				segs[name] = &segment{}
			}
			var (
				wg       sync.WaitGroup
				overlaps atomic.Int32
				stale    atomic.Int32
				failures = make(chan error, 100)
			)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const goroutines, rounds = 8, 10 // per client
			for _, c := range clients {
				for range goroutines {
					wg.Go(func() {
						for range rounds {
							l, err := c.Any(names...).Obtain(ctx, time.Minute)
							if err != nil {
								failures <- err
								return
							}
							s := segs[l.Name()]
							s.mu.Lock()
							s.holders++
							if s.holders > 1 {
								overlaps.Add(1)
							}
							if l.Token() <= s.token {
								stale.Add(1)
							}
							s.token = l.Token()
							s.uses++
							s.mu.Unlock()
							time.Sleep(time.Millisecond) // work on the segment
							s.mu.Lock()
							s.holders--
							s.mu.Unlock()
							if err := l.Release(ctx); err != nil {
								failures <- err
								return
							}
						}
					})
				}
			}
			wg.Wait()
			close(failures)
			for err := range failures {
				t.Errorf("obtain or release: %v", err)
			}
			if o := overlaps.Load(); o != 0 {
				t.Errorf("%d times two holders of one segment at once", o)
			}
			if s := stale.Load(); s != 0 {
				t.Errorf("%d holders got a token no higher than the previous holder's", s)
			}
			total := 0
			for name, s := range segs {
				total += s.uses
				if s.uses == 0 {
					t.Errorf("segment %q never used", name)
				}
			}
			if want := len(clients) * goroutines * rounds; total != want && !t.Failed() {
				t.Errorf("%d uses, want %d", total, want)
			}
		})
	}
}

// With every segment held, a waiter wakes when any one of them is released,
// through this Client or another: its own timers are a minute long.
func TestAnyWakesOnReleaseOfAnySegment(t *testing.T) {
	for _, n := range []int{1, 5} {
		for _, same := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d nodes, waiter in the same client=%v", n, same), func(t *testing.T) {
				cl := startNodes(t, n)
				holderClient := newClient(t, cl.clients)
				waiterClient := holderClient
				if !same {
					waiterClient = newClient(t, cl.clients)
				}
				ctx := context.Background()
				names := segmentNames(fmt.Sprintf("wake-any-%v", same), 4)
				held := make(map[string]*Lock)
				for range names {
					l, err := holderClient.Any(names...).TryObtain(ctx, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					held[l.Name()] = l
				}
				type outcome struct {
					l   *Lock
					err error
				}
				done := make(chan outcome, 1)
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				go func() {
					l, err := waiterClient.Any(names...).Obtain(wctx, time.Minute, slowRetry)
					done <- outcome{l, err}
				}()
				for _, name := range names {
					eventually(t, "the waiter subscribes to "+name, func() bool { return subscribed(t, cl.clients, name) })
				}
				// Not the first name: the one the waiter would try first on
				// a timer is irrelevant, any segment must wake it.
				freed := names[2]
				if err := held[freed].Release(ctx); err != nil {
					t.Fatal(err)
				}
				select {
				case o := <-done:
					if o.err != nil {
						t.Fatalf("waiter: %v", o.err)
					}
					if o.l.Name() != freed {
						t.Fatalf("waiter got %q, want the released %q", o.l.Name(), freed)
					}
					if o.l.Token() <= held[freed].Token() {
						t.Errorf("token %d not above the previous holder's %d", o.l.Token(), held[freed].Token())
					}
					_ = o.l.Release(ctx)
				case <-time.After(15 * time.Second):
					t.Fatal("the waiter was not woken by the release of one segment (its timers are a minute long)")
				}
				for _, name := range names {
					eventually(t, "the subscriptions go with the waiter", func() bool { return !subscribed(t, cl.clients, name) })
				}
			})
		}
	}
}

// A waiter whose context ends returns ErrNotObtained and the context's
// error, and leaves no subscription and no key behind.
func TestAnyContextEnds(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			holder := newClient(t, cl.clients)
			waiter := newClient(t, cl.clients)
			ctx := context.Background()
			names := segmentNames("cancel-any", 3)
			for range names {
				if _, err := holder.Any(names...).TryObtain(ctx, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				l, err := waiter.Any(names...).Obtain(wctx, time.Minute, slowRetry)
				if l != nil {
					err = fmt.Errorf("obtained %q with every segment held", l.Name())
				}
				done <- err
			}()
			for _, name := range names {
				eventually(t, "the waiter subscribes", func() bool { return subscribed(t, cl.clients, name) })
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
					t.Fatalf("Any(...).Obtain after cancel: %v; want ErrNotObtained and context.Canceled", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Any(...).Obtain did not return when its context was cancelled")
			}
			for _, name := range names {
				eventually(t, "the subscriptions go", func() bool { return !subscribed(t, cl.clients, name) })
			}
			// A context ended before the call: no attempt, the same errors.
			_, err := waiter.Any(names...).Obtain(wctx, time.Minute)
			if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Any(...).Obtain with an ended context: %v", err)
			}
		})
	}
}

// The lock Any(...).Obtain returns has every option of a plain lock: automatic
// refresh keeps it past its TTL, hooks see the obtain with the name it got,
// and a name held by a lock of another kind is refused with ErrWrongKind.
func TestAnyOptions(t *testing.T) {
	cl := startNodes(t, 3)
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithHook(rec))
	ctx := context.Background()
	names := segmentNames("opts-any", 2)

	// A TTL well above the 250 ms node timeout: a loaded machine must not
	// lose the lock for want of one refresh.
	l, err := c.Any(names...).Obtain(ctx, 1200*time.Millisecond, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := l.Err(); err != nil {
		t.Fatalf("auto-refreshed segment lock after 3 TTLs: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	obtains := append([]ObtainEvent(nil), rec.obtains...)
	rec.mu.Unlock()
	if len(obtains) != 1 || obtains[0].Name != l.Name() || obtains[0].Token != l.Token() || obtains[0].Err != nil {
		t.Fatalf("hook saw %+v; want one obtain of %q with token %d", obtains, l.Name(), l.Token())
	}

	// A reentrant lock on one of the names: the plain Any(...).Obtain stops at
	// once when it reaches it (and may first take the other name).
	other := newClient(t, cl.clients)
	if _, err := other.Reentrant(names[0], "job-1").Obtain(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Obtain(ctx, names[1], time.Minute); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Any(names...).Obtain(wctx, time.Minute); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("a name held by a reentrant lock: %v, want ErrWrongKind", err)
	}
}

// A segment whose holder never releases it (a crash) is taken once its TTL
// runs out: the waiter never sleeps past the shortest remaining TTL of the
// holders, though its retry timers are a minute long and no release
// notification comes.
func TestAnyAfterHolderExpires(t *testing.T) {
	for _, n := range []int{1, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			cl := startNodes(t, n)
			holder := newClient(t, cl.clients)
			waiter := newClient(t, cl.clients)
			ctx := context.Background()
			names := segmentNames("crashed-any", 3)
			for i, name := range names {
				ttl := time.Minute
				if i == 1 {
					ttl = 800 * time.Millisecond
				}
				if _, err := holder.TryObtain(ctx, name, ttl); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			start := time.Now()
			l, err := waiter.Any(names...).Obtain(wctx, time.Minute, slowRetry)
			if err != nil {
				t.Fatalf("after %v: %v", time.Since(start), err)
			}
			if l.Name() != names[1] {
				t.Fatalf("got %q, want the expired %q", l.Name(), names[1])
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v for a holder's 800 ms TTL", d)
			}
		})
	}
}

// attemptSpans is a Hook that keeps, for each acquire attempt, the span
// in which it ran (its end, when the hook sees it, less its Elapsed), and
// counts the obtains.
type attemptSpans struct {
	mu       sync.Mutex
	spans    [][2]time.Time
	obtained int
}

func (c *attemptSpans) Observe(_ context.Context, e Event) {
	end := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e := e.(type) {
	case AttemptEvent:
		c.spans = append(c.spans, [2]time.Time{end.Add(-e.Elapsed), end})
	case ObtainEvent:
		if e.Err == nil {
			c.obtained++
		}
	}
}

// mostAtOnce is the largest number of attempts whose spans overlap.
func (c *attemptSpans) mostAtOnce() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	most := 0
	for _, a := range c.spans {
		n := 0
		for _, b := range c.spans {
			if !b[0].After(a[0]) && b[1].After(a[0]) {
				n++ // b runs at a's start
			}
		}
		most = max(most, n)
	}
	return most
}

// Obtains of Client.Any that arrive together on one Client queue from the
// first pass on (issue #35, "Segments that pay off"): one of them attempts
// at a time, as later passes already did, instead of each sweeping every
// candidate at once, which split the nodes' votes, timed nodes out and
// left keys that blocked every segment until their TTL. The test counts
// the attempts that ran at once, not speed: an attempt is reported before
// its obtain leaves the queue, so spans of attempts made one at a time do
// not overlap, however loaded the machine. Before the fix, 24 goroutines
// over 4 segments ran up to 24 attempts at once, and made about 100
// attempts for 24 obtains (about 45 after).
func TestAnyConcurrentArrivalsAttemptOneAtATime(t *testing.T) {
	const (
		goroutines = 24
		segments   = 4
	)
	cl := startNodes(t, 3)
	spans := new(attemptSpans)
	c := newClient(t, cl.clients, WithHook(spans))
	names := segmentNames("arrive", segments)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		held  sync.Map // name -> holder: never two at once
		errs  = make(chan error, goroutines)
	)
	for g := range goroutines {
		wg.Go(func() {
			<-start
			l, err := c.Any(names...).Obtain(ctx, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			if other, dup := held.LoadOrStore(l.Name(), g); dup {
				errs <- fmt.Errorf("segment %q held by %v and %d at once", l.Name(), other, g)
			}
			time.Sleep(2 * time.Millisecond)
			held.Delete(l.Name())
			if err := l.Release(ctx); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if spans.obtained != goroutines {
		t.Fatalf("%d obtains, want %d", spans.obtained, goroutines)
	}
	t.Logf("%d attempts for %d obtains", len(spans.spans), spans.obtained)
	if most := spans.mostAtOnce(); most > 1 {
		t.Errorf("up to %d acquire attempts of one Client's Any obtains ran at once, want 1: concurrent arrivals swept the segments together", most)
	}
	// At most a pass over the held segments, then one after a release.
	if most := goroutines * (segments + 1); len(spans.spans) > most {
		t.Errorf("%d acquire attempts for %d obtains, want at most %d", len(spans.spans), goroutines, most)
	}
}
