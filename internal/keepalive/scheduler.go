// Package keepalive schedules the deadlines of many held locks on one
// goroutine. Entries that share a deadline share a bucket, and a small heap
// orders the buckets: the keep-alive places refreshes on a grid (so locks
// of one TTL fall into a few cohorts), so that scheduling or taking an
// entry costs a map lookup and an append, where a heap of one entry per
// lock cost a sift through about 17 levels of 100,000 entries, each a
// pointer to another lock (a cache miss), per refresh. It knows nothing of
// locks; the owner's fire function decides what a deadline means (refresh,
// or the end of validity) and reschedules.
package keepalive

import (
	"container/heap"
	"sync"
	"time"
)

// Entry is one scheduled item. Its zero value is unscheduled. An Entry is
// owned by one Scheduler at a time.
type Entry[T any] struct {
	Value T
	// at is the deadline, in nanoseconds from the Scheduler's origin; it
	// and pos are kept small, as there is one Entry per held lock.
	at   int64
	pos  int32 // in its bucket's entries
	live bool
}

// bucket is the entries of one deadline, in no order.
type bucket[T any] struct {
	at      int64
	entries []*Entry[T]
	index   int // in the heap of buckets
}

// Scheduler runs fire for entries whose deadline has come. One goroutine,
// started by the first Schedule and stopped by Stop.
type Scheduler[T any] struct {
	// window: entries due within it after the earliest are fired together,
	// so that refreshes due at about the same time share one round trip.
	window time.Duration
	fire   func(due []*Entry[T])
	now    func() time.Time
	origin time.Time // of the entries' deadlines: now at New

	mu sync.Mutex
	h  buckets[T]           // by deadline
	at map[int64]*bucket[T] // the buckets by deadline
	n  int                  // scheduled entries
	// spare is the list of the last entries fired, empty, for the next
	// new bucket: a cohort of thousands of locks fires, and its locks are
	// scheduled again into one bucket of about as many.
	spare   []*Entry[T]
	started bool
	stopped bool
	wake    chan struct{} // buffered 1: the earliest deadline changed
	quit    chan struct{}
	done    chan struct{}
}

// New returns a Scheduler. fire is called on the scheduler's goroutine with
// the entries that are due, already removed from the schedule; it must not
// block for long (start slow work on goroutines of its own), nor keep the
// slice, which the Scheduler reuses once fire returns.
func New[T any](window time.Duration, now func() time.Time, fire func(due []*Entry[T])) *Scheduler[T] {
	if now == nil {
		now = time.Now
	}
	return &Scheduler[T]{
		window: window,
		fire:   fire,
		now:    now,
		origin: now(),
		at:     map[int64]*bucket[T]{},
		wake:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
}

// Schedule sets e's deadline to at, adding it if it is not scheduled. It
// reports false after Stop.
func (s *Scheduler[T]) Schedule(e *Entry[T], at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	if !s.started {
		s.started = true
		go s.loop()
	}
	t := s.since(at)
	if e.live {
		if e.at == t {
			return true
		}
		s.remove(e)
	}
	if s.add(e, t) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// add schedules e at t; it reports whether t is now the earliest
// deadline.
func (s *Scheduler[T]) add(e *Entry[T], t int64) bool {
	b := s.at[t]
	if b == nil {
		b = &bucket[T]{at: t, entries: s.spare}
		s.spare = nil
		s.at[t] = b
		heap.Push(&s.h, b)
	}
	e.at, e.pos, e.live = t, int32(len(b.entries)), true
	b.entries = append(b.entries, e)
	s.n++
	return b.index == 0
}

// remove unschedules e, which is scheduled: the last entry of its bucket
// takes its place, and an empty bucket leaves the heap.
func (s *Scheduler[T]) remove(e *Entry[T]) {
	b := s.at[e.at]
	last := b.entries[len(b.entries)-1]
	b.entries[e.pos], last.pos = last, e.pos
	b.entries[len(b.entries)-1] = nil
	b.entries = b.entries[:len(b.entries)-1]
	if len(b.entries) == 0 {
		heap.Remove(&s.h, b.index)
		delete(s.at, b.at)
	}
	e.live = false
	s.n--
}

// since is t in nanoseconds from the Scheduler's origin (saturated, as
// time.Time.Sub is, about 292 years away).
func (s *Scheduler[T]) since(t time.Time) int64 { return int64(t.Sub(s.origin)) }

// Origin is the Scheduler's origin: the time of New.
func (s *Scheduler[T]) Origin() time.Time { return s.origin }

// Grid moves a time t of an event that recurs every interval down onto a
// grid of interval/16 steps from the origin, so that entries with the same
// interval fall into at most 16 cohorts per period and fire together; a
// step no longer than the batch window leaves t as it is (the window
// already gathers them). An event moved early by up to interval/16 fires
// that much sooner.
func (s *Scheduler[T]) Grid(t time.Time, interval time.Duration) time.Time {
	step := interval / 16
	if step <= s.window {
		return t
	}
	d := s.since(t) // only the grid's phase matters
	return t.Add(-time.Duration(d % int64(step)))
}

// Cancel removes e from the schedule, if it is scheduled.
func (s *Scheduler[T]) Cancel(e *Entry[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.live {
		s.remove(e)
	}
}

// Len is the number of scheduled entries.
func (s *Scheduler[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Stop stops the goroutine and waits for it. Entries still scheduled are
// dropped. It is safe to call more than once.
func (s *Scheduler[T]) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopped = true
	started := s.started
	for _, b := range s.h {
		for _, e := range b.entries {
			e.live = false
		}
	}
	s.h, s.at, s.n = nil, nil, 0
	s.mu.Unlock()
	close(s.quit)
	if started {
		<-s.done
	} else {
		close(s.done)
	}
}

func (s *Scheduler[T]) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, next, ok := s.takeDue()
		if len(due) > 0 {
			s.fire(due)
			clear(due)
			s.mu.Lock()
			if cap(due) > cap(s.spare) {
				s.spare = due[:0]
			}
			s.mu.Unlock()
			continue
		}
		wait := time.Hour
		if ok {
			wait = max(next.Sub(s.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-s.wake:
		case <-s.quit:
			return
		}
	}
}

// takeDue removes and returns the entries due now (within the window of the
// earliest), or the earliest deadline when none is due.
func (s *Scheduler[T]) takeDue() (due []*Entry[T], next time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.h) == 0 {
		return nil, time.Time{}, false
	}
	now := s.since(s.now())
	if s.h[0].at > now {
		return nil, s.origin.Add(time.Duration(s.h[0].at)), true
	}
	limit := now + int64(s.window)
	for len(s.h) > 0 && s.h[0].at <= limit {
		b := heap.Pop(&s.h).(*bucket[T])
		delete(s.at, b.at)
		for _, e := range b.entries {
			e.live = false
		}
		if due == nil {
			due = b.entries
		} else {
			due = append(due, b.entries...)
		}
		s.n -= len(b.entries)
	}
	return due, time.Time{}, false
}

// buckets is a min-heap by deadline.
type buckets[T any] []*bucket[T]

func (h buckets[T]) Len() int           { return len(h) }
func (h buckets[T]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h buckets[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *buckets[T]) Push(x any) {
	b := x.(*bucket[T])
	b.index = len(*h)
	*h = append(*h, b)
}
func (h *buckets[T]) Pop() any {
	old := *h
	b := old[len(old)-1]
	old[len(old)-1] = nil
	b.index = -1
	*h = old[:len(old)-1]
	return b
}
