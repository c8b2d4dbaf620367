package keepalive

import (
	"slices"
	"sync"
	"testing"
	"time"

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

func TestFiresInDeadlineOrder(t *testing.T) {
	r := newRecorder()
	s := New(0, nil, r.fire)
	defer s.Stop()
	now := time.Now()
	es := make([]*Entry[int], 5)
	// Scheduled out of order, 30 ms apart so that each fires alone.
	for _, i := range []int{3, 0, 4, 1, 2} {
		es[i] = &Entry[int]{Value: i}
		s.Schedule(es[i], now.Add(time.Duration(i+1)*30*time.Millisecond))
	}
	got := r.wait(t, 5)
	want := [][]int{{0}, {1}, {2}, {3}, {4}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if s.Len() != 0 {
		t.Fatalf("%d entries left after firing", s.Len())
	}
}

func TestWindowBatchesNearbyDeadlines(t *testing.T) {
	r := newRecorder()
	s := New(50*time.Millisecond, nil, r.fire)
	defer s.Stop()
	at := time.Now().Add(20 * time.Millisecond)
	for i := range 3 {
		s.Schedule(&Entry[int]{Value: i}, at.Add(time.Duration(i)*10*time.Millisecond))
	}
	s.Schedule(&Entry[int]{Value: 9}, at.Add(time.Second)) // outside the window
	got := r.wait(t, 1)
	if len(got) != 1 || len(got[0]) != 3 {
		t.Fatalf("fired %v, want the three nearby entries together", got)
	}
	if s.Len() != 1 {
		t.Fatalf("%d entries left, want the distant one", s.Len())
	}
}

func TestRescheduleAndCancel(t *testing.T) {
	r := newRecorder()
	s := New(0, nil, r.fire)
	defer s.Stop()
	far := &Entry[int]{Value: 1}
	s.Schedule(far, time.Now().Add(time.Hour))
	// Moving it earlier must wake the sleeping scheduler.
	s.Schedule(far, time.Now().Add(10*time.Millisecond))
	if got := r.wait(t, 1); !slices.Equal(got[0], []int{1}) {
		t.Fatalf("fired %v, want [1]", got)
	}
	gone := &Entry[int]{Value: 2}
	s.Schedule(gone, time.Now().Add(20*time.Millisecond))
	s.Cancel(gone)
	s.Cancel(gone) // twice is fine
	kept := &Entry[int]{Value: 3}
	s.Schedule(kept, time.Now().Add(40*time.Millisecond))
	if got := r.wait(t, 1); !slices.Equal(got[1], []int{3}) {
		t.Fatalf("fired %v, want the cancelled entry skipped", got)
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
	s := New(0, nil, r.fire)
	defer s.Stop()
	base := time.Now().Add(100 * time.Millisecond)
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
	got := r.wait(t, 4)
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
// keep-alive does once its refreshes are sent: the new bucket takes the
// list of the entries just fired, which the Scheduler reuses only once
// fire has returned, and each round fires the whole cohort, once.
func TestFiredListReused(t *testing.T) {
	const cohort, rounds = 50, 4
	var s *Scheduler[int]
	fired := make(chan []int, rounds)
	es := make([]*Entry[int], cohort)
	n := 0
	s = New(0, nil, func(due []*Entry[int]) {
		var vs []int
		for _, e := range due {
			vs = append(vs, e.Value)
		}
		slices.Sort(vs)
		if n++; n < rounds {
			for _, e := range es {
				s.Schedule(e, time.Now().Add(5*time.Millisecond))
			}
		}
		fired <- vs
	})
	defer s.Stop()
	for i := range es {
		es[i] = &Entry[int]{Value: i}
		s.Schedule(es[i], time.Now().Add(5*time.Millisecond))
	}
	want := make([]int, cohort)
	for i := range want {
		want[i] = i
	}
	for range rounds {
		var vs []int
		select {
		case vs = <-fired:
		case <-time.After(10 * time.Second):
			t.Fatal("scheduler did not fire within 10s")
		}
		if !slices.Equal(vs, want) {
			t.Fatalf("fired %v, want 0..%d once each", vs, cohort-1)
		}
	}
}
