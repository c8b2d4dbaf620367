package keepalive

import (
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder collects fired entries' values in order.
type recorder struct {
	mu    sync.Mutex
	fired [][]int
	ch    chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 100)} }

func (r *recorder) fire(due []*Entry[int]) {
	var vs []int
	for _, e := range due {
		vs = append(vs, e.Value)
	}
	r.mu.Lock()
	r.fired = append(r.fired, vs)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

// batches is how many batches have fired so far.
func (r *recorder) batches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.fired)
}

func (r *recorder) wait(t *testing.T, batches int) [][]int {
	t.Helper()
	for range batches {
		select {
		case <-r.ch:
		case <-time.After(10 * time.Second):
			t.Fatal("scheduler did not fire within 10s")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.fired)
}

// clock is a time the test moves: a Scheduler built on it fires an entry
// only once the test has moved the clock past its deadline, however long
// the machine takes to run the test's own steps. advance pokes the
// scheduler's goroutine, which otherwise sleeps on a real timer until the
// deadline it computed from the clock, unless s is nil: then only a wake
// of the Scheduler's own (or that timer) makes it look at the clock again.
type clock struct {
	mu    sync.Mutex
	t     time.Time
	reads int
}

func newClock() *clock { return &clock{t: time.Unix(1_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return c.t
}

// waitReads waits until the clock has been read n times in all.
func (c *clock) waitReads(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		r := c.reads
		c.mu.Unlock()
		if r >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clock was read %d times within 10s, want %d", r, n)
		}
	}
}

func (c *clock) advance(s *Scheduler[int], d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	if s == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// TestFiresInDeadlineOrder schedules five entries out of order on five
// deadlines and moves the clock past one deadline at a time: each step
// fires exactly the entry of that deadline.
func TestFiresInDeadlineOrder(t *testing.T) {
	r := newRecorder()
	c := newClock()
	s := New(0, c.now, r.fire)
	defer s.Stop()
	now := c.now()
	es := make([]*Entry[int], 5)
	for _, i := range []int{3, 0, 4, 1, 2} {
		es[i] = &Entry[int]{Value: i}
		s.Schedule(es[i], now.Add(time.Duration(i+1)*30*time.Millisecond))
	}
	for i := range es {
		c.advance(s, 30*time.Millisecond)
		got := r.wait(t, 1)
		if !slices.Equal(got[i], []int{i}) {
			t.Fatalf("step %d fired %v, want [%d] (all batches: %v)", i, got[i], i, got)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("%d entries left after firing", s.Len())
	}
	if n := r.batches(); n != len(es) {
		t.Fatalf("%d batches fired, want %d", n, len(es))
	}
}

// TestWindowBatchesNearbyDeadlines: entries due within the window after
// the earliest fire with it; one outside the window waits.
func TestWindowBatchesNearbyDeadlines(t *testing.T) {
	r := newRecorder()
	c := newClock()
	s := New(50*time.Millisecond, c.now, r.fire)
	defer s.Stop()
	at := c.now().Add(20 * time.Millisecond)
	for i := range 3 {
		s.Schedule(&Entry[int]{Value: i}, at.Add(time.Duration(i)*10*time.Millisecond))
	}
	s.Schedule(&Entry[int]{Value: 9}, at.Add(time.Second)) // outside the window
	c.advance(s, 20*time.Millisecond)
	got := r.wait(t, 1)
	if len(got) != 1 || !slices.Equal(slices.Sorted(slices.Values(got[0])), []int{0, 1, 2}) {
		t.Fatalf("fired %v, want the three nearby entries together", got)
	}
	if s.Len() != 1 {
		t.Fatalf("%d entries left, want the distant one", s.Len())
	}
	c.advance(s, time.Second)
	if got := r.wait(t, 1); !slices.Equal(got[1], []int{9}) {
		t.Fatalf("fired %v, want the distant entry last", got)
	}
}

// TestRescheduleAndCancel: moving an entry earlier wakes the scheduler,
// and a cancelled entry never fires.
func TestRescheduleAndCancel(t *testing.T) {
	r := newRecorder()
	c := newClock()
	s := New(0, c.now, r.fire)
	defer s.Stop()
	far := &Entry[int]{Value: 1}
	soon := c.now().Add(10 * time.Millisecond) // the third read: New took the first
	s.Schedule(far, c.now().Add(time.Hour))
	// The loop reads the clock to find nothing due, then to size its
	// sleep: an hour. Moving the entry earlier must wake it (the clock is
	// moved without a poke), so that it sleeps 10 ms instead.
	c.waitReads(t, 5)
	s.Schedule(far, soon)
	c.advance(nil, 10*time.Millisecond)
	if got := r.wait(t, 1); !slices.Equal(got[0], []int{1}) {
		t.Fatalf("fired %v, want [1]", got)
	}
	gone := &Entry[int]{Value: 2}
	s.Schedule(gone, c.now().Add(20*time.Millisecond))
	s.Cancel(gone)
	s.Cancel(gone) // twice is fine
	kept := &Entry[int]{Value: 3}
	s.Schedule(kept, c.now().Add(40*time.Millisecond))
	c.advance(s, 40*time.Millisecond)
	if got := r.wait(t, 1); !slices.Equal(got[1], []int{3}) {
		t.Fatalf("fired %v, want the cancelled entry skipped", got)
	}
	if n := r.batches(); n != 2 {
		t.Fatalf("%d batches fired, want 2", n)
	}
}

// TestWakesOnRealTime: with the real clock, an entry due soon fires
// without any poke; the only wall-clock test here, with a 10 s margin.
func TestWakesOnRealTime(t *testing.T) {
	r := newRecorder()
	s := New(0, nil, r.fire)
	defer s.Stop()
	s.Schedule(&Entry[int]{Value: 5}, time.Now().Add(10*time.Millisecond))
	if got := r.wait(t, 1); !slices.Equal(got[0], []int{5}) {
		t.Fatalf("fired %v, want [5]", got)
	}
}

func TestStop(t *testing.T) {
	r := newRecorder()
	s := New(0, nil, r.fire)
	s.Stop() // never started: fine
	if s.Schedule(&Entry[int]{}, time.Now()) {
		t.Fatal("Schedule after Stop reported true")
	}
	s.Stop()

	s = New(0, nil, r.fire)
	e := &Entry[int]{Value: 7}
	s.Schedule(e, time.Now().Add(time.Hour))
	s.Stop()
	if s.Len() != 0 {
		t.Fatal("entries kept after Stop")
	}
	s.Cancel(e) // after Stop: no-op
}

// TestSharedDeadlines schedules many entries on a few deadlines (as the
// keep-alive's grid does), cancels and moves some from the middle of their
// buckets, and checks that each deadline fires exactly the entries left on
// it, every entry once, and that Len counts them throughout.
func TestSharedDeadlines(t *testing.T) {
	r := newRecorder()
	c := newClock()
	s := New(0, c.now, r.fire)
	defer s.Stop()
	base := c.now().Add(100 * time.Millisecond)
	at := func(k int) time.Time { return base.Add(time.Duration(k) * 60 * time.Millisecond) }
	es := make([]*Entry[int], 300)
	for i := range es {
		es[i] = &Entry[int]{Value: i}
		s.Schedule(es[i], at(i%3))
	}
	// Cancel every tenth; move every seventh (not cancelled) to the last
	// deadline; schedule some again at the deadline they have.
	want := map[int][]int{}
	for i, e := range es {
		switch {
		case i%10 == 0:
			s.Cancel(e)
		case i%7 == 0:
			s.Schedule(e, at(3))
			want[3] = append(want[3], i)
		default:
			if i%5 == 0 {
				s.Schedule(e, at(i%3))
			}
			want[i%3] = append(want[i%3], i)
		}
	}
	if n := len(want[0]) + len(want[1]) + len(want[2]) + len(want[3]); s.Len() != n {
		t.Fatalf("Len %d, want %d", s.Len(), n)
	}
	var got [][]int
	c.advance(s, 40*time.Millisecond)
	for k := range 4 {
		c.advance(s, 60*time.Millisecond) // to at(k)
		got = r.wait(t, 1)
		if len(got) != k+1 {
			t.Fatalf("after deadline %d: %d batches fired, want %d", k, len(got), k+1)
		}
	}
	for k := range 4 {
		g := slices.Sorted(slices.Values(got[k]))
		if !slices.Equal(g, want[k]) {
			t.Errorf("deadline %d fired %v, want %v", k, g, want[k])
		}
	}
	if s.Len() != 0 {
		t.Fatalf("%d entries left after firing", s.Len())
	}
}

// TestFiredListReused schedules a cohort again from its own fire, as the
// keep-alive does once its refreshes are sent, all on one deadline taken
// from a clock that stands still while the test works: the new bucket
// takes the list of the entries just fired, which the Scheduler reuses
// only once fire has returned, and each round fires the whole cohort,
// once, in one batch.
func TestFiredListReused(t *testing.T) {
	const cohort, rounds = 50, 4
	c := newClock()
	var s *Scheduler[int]
	type round struct {
		values  []int
		buckets int // after the cohort was scheduled again, or -1
		list    *(*Entry[int])
	}
	fired := make(chan round, rounds)
	es := make([]*Entry[int], cohort)
	n := 0
	s = New(0, c.now, func(due []*Entry[int]) {
		var vs []int
		for _, e := range due {
			vs = append(vs, e.Value)
		}
		slices.Sort(vs)
		buckets := -1
		if n++; n < rounds {
			at := c.now().Add(5 * time.Millisecond)
			for _, e := range es {
				s.Schedule(e, at)
			}
			s.mu.Lock()
			buckets = len(s.h)
			s.mu.Unlock()
		}
		fired <- round{vs, buckets, unsafe.SliceData(due)}
	})
	defer s.Stop()
	at := c.now().Add(5 * time.Millisecond)
	for i := range es {
		es[i] = &Entry[int]{Value: i}
		s.Schedule(es[i], at)
	}
	want := make([]int, cohort)
	for i := range want {
		want[i] = i
	}
	lists := make([]*(*Entry[int]), rounds)
	for i := range rounds {
		c.advance(s, 5*time.Millisecond)
		var r round
		select {
		case r = <-fired:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: scheduler did not fire within 10s", i)
		}
		if !slices.Equal(r.values, want) {
			t.Fatalf("round %d fired %v, want 0..%d once each", i, r.values, cohort-1)
		}
		if i < rounds-1 && r.buckets != 1 {
			t.Fatalf("round %d: the cohort scheduled again is in %d buckets, want 1", i, r.buckets)
		}
		// The cohort scheduled during round i's fire goes into the list
		// that round i-1 fired, which fire i+1 is then given.
		lists[i] = r.list
		if i >= 2 && lists[i] != lists[i-2] {
			t.Fatalf("round %d fired a new list, want round %d's list reused", i, i-2)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("%d entries left after the last round", s.Len())
	}
}

// TestGrid: a time moves down onto the grid of interval/16 steps from the
// origin, by less than a step, so that times within one step meet; a step
// no longer than the window leaves the time as it is.
func TestGrid(t *testing.T) {
	r := newRecorder()
	c := newClock()
	s := New(2*time.Millisecond, c.now, r.fire)
	defer s.Stop()
	origin := s.Origin()
	const interval = 16 * time.Second // a step of 1 s
	for _, off := range []time.Duration{0, 1, 999 * time.Millisecond, time.Second, 7*time.Second + 300*time.Millisecond, 90 * time.Hour} {
		at := origin.Add(off)
		g := s.Grid(at, interval)
		if g.After(at) || at.Sub(g) >= time.Second || g.Sub(origin)%time.Second != 0 {
			t.Errorf("Grid(origin+%v) = origin+%v: want the last whole second at or before it", off, g.Sub(origin))
		}
	}
	a, b := s.Grid(origin.Add(3100*time.Millisecond), interval), s.Grid(origin.Add(3900*time.Millisecond), interval)
	if !a.Equal(b) {
		t.Errorf("two times within one step: %v and %v, want one grid point", a.Sub(origin), b.Sub(origin))
	}
	at := origin.Add(1234567 * time.Microsecond)
	if g := s.Grid(at, 32*time.Millisecond); !g.Equal(at) {
		t.Errorf("a step of 2 ms, no longer than the window, moved the time by %v", at.Sub(g))
	}
}
