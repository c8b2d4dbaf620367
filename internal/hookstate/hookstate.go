// Package hookstate is what the observability adapters (redlockprom,
// redlockotel) share: the classification of outcomes and node reasons into
// bounded label values, and the count of held locks, so that both adapters
// speak of the same things.
package hookstate

import (
	"context"
	"errors"
	"sync"

	"github.com/redlock-go/redlock"
)

// NodeErrorKind is the kind of a node's reason in a round: "held",
// "not_owner", "recovering", "timeout", "pending", "skipped",
// "overloaded", "not_replicated", or "error" for any other failure.
func NodeErrorKind(err error) string {
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

func ObtainResult(err error) string {
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

func AttemptResult(e redlock.AttemptEvent) string {
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

func RefreshResult(err error) string {
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

func ReleaseResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, redlock.ErrNotHeld):
		return "not_held"
	}
	return "failed"
}

// Holdings is the set of locks obtained through a Hook and neither
// released nor lost, so that a lock's end is counted once: by its loss, or
// by its release when it was not lost before. A lock is its name and
// fencing token, which no other successful acquire of the name shares
// (fencing tokens only increase); Clients of different deployments that
// share a Hook and lock the same names could, in principle, issue the same
// token.
type Holdings struct {
	mu   sync.Mutex
	held map[lock]struct{}
}

type lock struct {
	name  string
	token int64
}

// Obtained adds a lock.
func (h *Holdings) Obtained(name string, token int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[lock]struct{})
	}
	h.held[lock{name, token}] = struct{}{}
}

// Ended removes a lock, released or lost, and reports whether it was held:
// false for the release of a lock lost before (or never obtained here).
func (h *Holdings) Ended(name string, token int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := lock{name, token}
	if _, ok := h.held[k]; !ok {
		return false
	}
	delete(h.held, k)
	return true
}
