// Package keepalive schedules the deadlines of many held locks on one
// goroutine: a heap of entries ordered by their next deadline. It knows
// nothing of locks; the owner's fire function decides what a deadline means
// (refresh, or the end of validity) and reschedules.
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
	// and index are kept small, as there is one Entry per held lock.
	at    int64
	index int32 // in the heap, or -1
	live  bool
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

	mu      sync.Mutex
	h       entries[T]
	started bool
	stopped bool
	wake    chan struct{} // buffered 1: the earliest deadline changed
	quit    chan struct{}
	done    chan struct{}
}

// New returns a Scheduler. fire is called on the scheduler's goroutine with
// the entries that are due, already removed from the schedule; it must not
// block for long (start slow work on goroutines of its own).
func New[T any](window time.Duration, now func() time.Time, fire func(due []*Entry[T])) *Scheduler[T] {
	if now == nil {
		now = time.Now
	}
	return &Scheduler[T]{
		window: window,
		fire:   fire,
		now:    now,
		origin: now(),
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
	e.at = s.since(at)
	if e.live {
		heap.Fix(&s.h, int(e.index))
	} else {
		e.live = true
		heap.Push(&s.h, e)
	}
	if e.index == 0 {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// since is t in nanoseconds from the Scheduler's origin (saturated, as
// time.Time.Sub is, about 292 years away).
func (s *Scheduler[T]) since(t time.Time) int64 { return int64(t.Sub(s.origin)) }

// Origin is the Scheduler's origin: the time of New.
func (s *Scheduler[T]) Origin() time.Time { return s.origin }

// Cancel removes e from the schedule, if it is scheduled.
func (s *Scheduler[T]) Cancel(e *Entry[T]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.live {
		heap.Remove(&s.h, int(e.index))
		e.live = false
	}
}

// Len is the number of scheduled entries.
func (s *Scheduler[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h)
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
	for _, e := range s.h {
		e.live = false
	}
	s.h = nil
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
		e := heap.Pop(&s.h).(*Entry[T])
		e.live = false
		due = append(due, e)
	}
	return due, time.Time{}, false
}

// entries is a min-heap by deadline.
type entries[T any] []*Entry[T]

func (h entries[T]) Len() int           { return len(h) }
func (h entries[T]) Less(i, j int) bool { return h[i].at < h[j].at }
func (h entries[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
func (h *entries[T]) Push(x any) {
	e := x.(*Entry[T])
	e.index = int32(len(*h))
	*h = append(*h, e)
}
func (h *entries[T]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
