// Package waitq keeps the local queues of one Client's waiters
// (docs/waiting.md): the goroutines that wait for the same lock, or for any
// of the same set of locks, form one FIFO queue, and only its head makes
// attempts. A queue holds one subscription to its locks' release channels
// for as long as it exists, made by its first head (the Client does the
// I/O; this package keeps the state). It also keeps the grace periods after
// a release that other Clients heard.
package waitq

import (
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
)

// Queue is the local queue of waiters for one group: a lock, an owner's
// obtains of a lock, or a set of locks.
type Queue struct {
	// Group identifies the queue; Keys are the lock keys it waits for.
	Group string
	Keys  []string
	// Wake is woken by a release of any of Keys: a notification of the
	// node, or a release through this Client. It is made when the queue is
	// tracked (Track): a lone head's first attempt needs none.
	Wake *driver.Waiter
	// Confirmed holds each node's confirmation of the subscription to each
	// of Keys (node-major), once the first head has subscribed; Settled is
	// set once a head has waited for them until they came or its timeout
	// passed. Only the head touches them.
	Confirmed []<-chan struct{}
	Settled   bool
	// tracked: in Queues.of, with a Wake (guarded by Queues.mu). Beside
	// Settled, so that the two share a word.
	tracked bool
	// Late, once a head has stopped waiting with confirmations missing,
	// is closed when the queue's subscriptions are dropped: it stops the
	// goroutine that wakes the head as each of them comes (redlock's
	// watchLate). Only the head touches it.
	Late chan struct{}

	members []*Member
}

// Member is one waiter of a queue.
type Member struct {
	// Turn is closed when the member is the head of its queue.
	Turn chan struct{}
}

// Queues tracks the queues and the grace periods of one Client. The zero
// value is ready to use.
type Queues struct {
	mu     sync.Mutex
	groups map[string]*Queue
	of     map[string][]*Queue // lock key → the queues that wait for it
	grace  map[string]time.Time
}

// Queued reports whether anyone waits in group's queue.
func (w *Queues) Queued(group string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.groups[group] != nil
}

// Join adds a member at the tail of group's queue, which waits for the
// lock keys keys, creating the queue if needed; track makes its waiter
// record which channels woke it (for a queue of several keys).
func (w *Queues) Join(group string, keys []string) (*Queue, *Member) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.groups[group]
	if q == nil {
		q = &Queue{Group: group, Keys: keys}
		if w.groups == nil {
			w.groups = make(map[string]*Queue)
		}
		w.groups[group] = q
	}
	m := &Member{Turn: make(chan struct{})}
	q.members = append(q.members, m)
	if len(q.members) == 1 {
		close(m.Turn)
	} else {
		w.track(q) // someone waits behind the head
	}
	return q, m
}

// Track makes q's Wake and counts its members as waiting for its keys
// (Waiting, WakeLocal), if not done yet: its head calls it before it
// subscribes. Until then a queue is a lone head's, making its first
// attempt, which costs no Wake and is not counted as waiting.
func (w *Queues) Track(q *Queue) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.track(q)
}

func (w *Queues) track(q *Queue) {
	if q.tracked {
		return
	}
	q.tracked = true
	if q.Wake == nil {
		q.Wake = driver.NewWaiter()
		if len(q.Keys) > 1 {
			q.Wake = driver.NewTrackingWaiter()
		}
	}
	if w.of == nil {
		w.of = make(map[string][]*Queue)
	}
	for _, k := range q.Keys {
		w.of[k] = append(w.of[k], q)
	}
}

// Leave removes m from q and passes the turn on. It reports whether q is
// now empty and gone, in which case the caller must drop its
// subscriptions.
func (w *Queues) Leave(q *Queue, m *Member) (gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.members {
		if x != m {
			continue
		}
		q.members = append(q.members[:i], q.members[i+1:]...)
		if i == 0 && len(q.members) > 0 {
			close(q.members[0].Turn)
		}
		break
	}
	if len(q.members) > 0 {
		return false
	}
	delete(w.groups, q.Group)
	if !q.tracked {
		return true
	}
	for _, k := range q.Keys {
		qs := slices.DeleteFunc(w.of[k], func(x *Queue) bool { return x == q })
		if len(qs) == 0 {
			delete(w.of, k)
		} else {
			w.of[k] = qs
		}
	}
	return true
}

// Waiting is the number of goroutines queued for the lock key, in every
// queue that waits for it.
func (w *Queues) Waiting(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, q := range w.of[key] {
		n += len(q.members)
	}
	return n
}

// WakeLocal wakes the head of every queue that waits for key, as a
// message on its release channel would: the lock was released through this
// Client.
func (w *Queues) WakeLocal(key string) {
	w.mu.Lock()
	qs := slices.Clone(w.of[key])
	w.mu.Unlock()
	for _, q := range qs {
		q.Wake.Notify(keys.Channel(key))
	}
}

// SetGrace holds back this Client's next attempt on key until t.
func (w *Queues) SetGrace(key string, t, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.grace == nil {
		w.grace = make(map[string]time.Time)
	}
	if len(w.grace) >= 1024 {
		for k, until := range w.grace {
			if !until.After(now) {
				delete(w.grace, k)
			}
		}
	}
	w.grace[key] = t
}

// GraceUntil is the end of key's grace period at now, or the zero time.
func (w *Queues) GraceUntil(key string, now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.grace) == 0 {
		return time.Time{}
	}
	t, ok := w.grace[key]
	if ok && !t.After(now) {
		delete(w.grace, key)
		return time.Time{}
	}
	return t
}
