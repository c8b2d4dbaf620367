package redlockotel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// The classification of outcomes is the same as redlockprom's, so that
// both adapters speak of the same things.

func nodeKind(err error) string {
	switch {
	case errors.Is(err, redlock.ErrHeld):
		return "held"
	case errors.Is(err, redlock.ErrNotOwner):
		return "not_owner"
	case errors.Is(err, redlock.ErrNodeRecovering):
		return "recovering"
	case errors.Is(err, redlock.ErrNodeTimeout):
		return "timeout"
	case errors.Is(err, redlock.ErrNodePending):
		return "pending"
	case errors.Is(err, redlock.ErrNodeSkipped):
		return "skipped"
	case errors.Is(err, redlock.ErrNodeOverloaded):
		return "overloaded"
	case errors.Is(err, redlock.ErrNotReplicated):
		return "not_replicated"
	}
	return "error"
}

func obtainResult(err error) string {
	var qe *redlock.QuorumError
	switch {
	case err == nil:
		return "obtained"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	case errors.Is(err, redlock.ErrHeld):
		return "held"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.As(err, &qe):
		return "no_quorum"
	}
	return "error"
}

func attemptResult(e redlock.AttemptEvent) string {
	var qe *redlock.QuorumError
	switch {
	case e.Obtained:
		return "obtained"
	case errors.Is(e.Err, redlock.ErrHeld):
		return "held"
	case errors.As(e.Err, &qe):
		return "no_quorum"
	}
	return "error"
}

func refreshResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redlock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, redlock.ErrClosed):
		return "closed"
	}
	return "failed"
}

func releaseResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redlock.ErrNotHeld):
		return "not_held"
	}
	return "failed"
}

// holdings counts, per lock name, the locks held and the locks lost but not
// yet released, so that a lost lock's later Release does not end its hold
// a second time.
//
// The events carry the lock's name but nothing that tells two locks of one
// name apart, so the count is exact while at most one lock per name is
// held through this Hook at a time. With more (several Clients sharing the
// Hook), a Release after a loss may end another lock's hold early, which
// the lost lock's own Release makes up for: the count is right again once
// every lock is released.
type holdings struct {
	mu   sync.Mutex
	held map[string]int
	gone map[string]int // lost, not yet released
}

func (h *holdings) obtained(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[string]int)
	}
	h.held[name]++
}

// lost reports whether a held lock of the name ended by the loss.
func (h *holdings) lost(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held[name] == 0 {
		return false // released already: its Release event came first
	}
	decr(h.held, name)
	if h.gone == nil {
		h.gone = make(map[string]int)
	}
	h.gone[name]++
	return true
}

// released reports whether a held lock of the name ended by the release;
// false when the release is that of a lock lost before.
func (h *holdings) released(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone[name] > 0 {
		decr(h.gone, name)
		return false
	}
	if h.held[name] == 0 {
		return false
	}
	decr(h.held, name)
	return true
}

func decr(m map[string]int, k string) {
	if m[k] <= 1 {
		delete(m, k)
		return
	}
	m[k]--
}

// A record is an attempt or a wait kept for the span of its obtain, which
// the Hook sees only when the obtain has ended.
type record struct {
	at      time.Time // when the Hook saw it
	attempt *redlock.AttemptEvent
	wait    *redlock.WaitEvent
}

// Bounds of a journal: records only outlive their obtain when obtains of
// one name overlap, but nothing else bounds them.
const (
	maxRecords = 64   // per lock name; the oldest go first
	maxNames   = 4096 // beyond, the obtains of new names show no attempts
)

// journal keeps the attempts and waits of obtains in progress, by lock
// name.
type journal struct {
	mu    sync.Mutex
	names map[string][]record
}

func (j *journal) add(name string, r record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.names == nil {
		j.names = make(map[string][]record)
	}
	rs, ok := j.names[name]
	if !ok && len(j.names) >= maxNames {
		return
	}
	if len(rs) >= maxRecords {
		rs = append(rs[:0], rs[1:]...)
	}
	j.names[name] = append(rs, r)
}

// take removes and returns the records of name seen since since.
func (j *journal) take(name string, since time.Time) []record {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.names[name]
	var taken, kept []record
	for _, r := range rs {
		if r.at.Before(since) {
			kept = append(kept, r)
		} else {
			taken = append(taken, r)
		}
	}
	if len(kept) == 0 {
		delete(j.names, name)
	} else {
		j.names[name] = kept
	}
	return taken
}
