package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
)

// Redis-free tests of the waiter's pure decisions (waiter.go). The waits
// themselves run against Redis in waits_test.go, obtain_test.go and
// all_test.go.

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
