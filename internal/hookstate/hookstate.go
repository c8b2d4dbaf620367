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

// Holdings counts, per lock name, the locks held and the locks lost but not
// yet released, so that a lost lock's later Release does not end its hold
// a second time.
//
// The events carry the lock's name but nothing that tells two locks of one
// name apart, so the count is exact while at most one lock per name is
// held through this Hook at a time. With more (several Clients sharing the
// Hook), a Release after a loss may end another lock's hold early, which
// the lost lock's own Release makes up for: the count is right again once
// every lock is released.
type Holdings struct {
	mu   sync.Mutex
	held map[string]int
	gone map[string]int // lost, not yet released
}

func (h *Holdings) Obtained(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = make(map[string]int)
	}
	h.held[name]++
}

// Lost reports whether a held lock of the name ended by the loss.
func (h *Holdings) Lost(name string) bool {
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

// Released reports whether a held lock of the name ended by the release;
// false when the release is that of a lock lost before.
func (h *Holdings) Released(name string) bool {
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
