package redlock

import (
	"context"
	"errors"
	"sync"
)

// The outcome of each event as a short, bounded label value, so that every
// Hook (the redlockprom and redlockotel adapters, or your own) names
// outcomes alike. These values are part of the Hook contract: they are
// stable, and a new one is added only with a new kind of outcome.

// Result is the outcome of the attempt: "obtained", "held" (another owner
// has the lock), "no_quorum", or "error".
func (e AttemptEvent) Result() string {
	var qe *QuorumError
	switch {
	case e.Obtained:
		return "obtained"
	case errors.Is(e.Err, ErrHeld):
		return "held"
	case errors.As(e.Err, &qe):
		return "no_quorum"
	}
	return "error"
}

// Result is the outcome of the obtain: "obtained", "closed" (the Client
// was closed), "held", "breaker_open" (refused, or still waiting when its
// context ended, because the circuit breaker was open: ErrBreakerOpen),
// "canceled" (its context ended first), "no_quorum", or "error".
func (e ObtainEvent) Result() string {
	var qe *QuorumError
	switch {
	case e.Err == nil:
		return "obtained"
	case errors.Is(e.Err, ErrClosed):
		return "closed"
	case errors.Is(e.Err, ErrHeld):
		return "held"
	case errors.Is(e.Err, ErrBreakerOpen):
		return "breaker_open"
	case errors.Is(e.Err, context.Canceled), errors.Is(e.Err, context.DeadlineExceeded):
		return "canceled"
	case errors.As(e.Err, &qe):
		return "no_quorum"
	}
	return "error"
}

// Result is the outcome of the refresh: "ok", "not_held" (the lock is no
// longer this owner's), "closed", or "failed".
func (e RefreshEvent) Result() string {
	switch {
	case e.Err == nil:
		return "ok"
	case errors.Is(e.Err, ErrNotHeld):
		return "not_held"
	case errors.Is(e.Err, ErrClosed):
		return "closed"
	}
	return "failed"
}

// Result is the outcome of the release: "ok", "not_held", or "failed".
func (e ReleaseEvent) Result() string {
	switch {
	case e.Err == nil:
		return "ok"
	case errors.Is(e.Err, ErrNotHeld):
		return "not_held"
	}
	return "failed"
}

// NodeErrorKind is the kind of a node's reason in a round (NodeResult.Err,
// or a NodeError's in a QuorumError): "held", "not_owner", "recovering",
// "timeout", "pending", "skipped", "overloaded", "not_replicated", or
// "error" for any other failure.
func NodeErrorKind(err error) string {
	switch {
	case errors.Is(err, ErrHeld):
		return "held"
	case errors.Is(err, ErrNotOwner):
		return "not_owner"
	case errors.Is(err, ErrNodeRecovering):
		return "recovering"
	case errors.Is(err, ErrNodeTimeout):
		return "timeout"
	case errors.Is(err, ErrNodePending):
		return "pending"
	case errors.Is(err, ErrNodeSkipped):
		return "skipped"
	case errors.Is(err, ErrNodeOverloaded):
		return "overloaded"
	case errors.Is(err, ErrNotReplicated):
		return "not_replicated"
	}
	return "error"
}

// HeldLocks is, for a Hook, the set of locks obtained and neither released
// nor lost, so that a lock's end is counted once: by its loss, or by its
// release when it was not lost before (a lost lock is still released by its
// owner later). Call Obtained from the Hook's Obtain when the obtain
// succeeded, and Ended from its Lost and Release. The zero value is empty
// and ready to use; it is safe for concurrent use.
//
// A lock is its name and fencing token. A plain lock's token is its own
// (fencing tokens only increase), but the holds of a reentrant owner share
// one (WithOwner), and two readers may too: HeldLocks counts the holds of
// each name and token, so that each hold's end is counted once and the
// count returns to zero. Which of such holds ended is not known from the
// events: a lost hold's later Release may be counted for another hold of
// the same token, whose own end is then not. Clients of different
// deployments that share a Hook and lock the same names could, in
// principle, issue the same token.
type HeldLocks struct {
	mu   sync.Mutex
	held map[heldLock]int
}

type heldLock struct {
	name  string
	token int64
}

// Obtained adds a lock.
func (h *HeldLocks) Obtained(name string, token int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[heldLock]int)
	}
	h.held[heldLock{name, token}]++
}

// Ended removes a lock, released or lost, and reports whether it was held:
// false for the release of a lock lost before (or never obtained here).
func (h *HeldLocks) Ended(name string, token int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := heldLock{name, token}
	switch h.held[k] {
	case 0:
		return false
	case 1:
		delete(h.held, k)
	default:
		h.held[k]--
	}
	return true
}
