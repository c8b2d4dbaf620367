package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlock-go/redlock/internal/keepalive"
)

// The keep-alive: one scheduler goroutine per Client (internal/keepalive),
// a heap of the locks' next events, refreshes batched into one pipeline per
// node, and the loss of a lock whose validity runs out.

// fire handles the locks whose scheduled event has come: a lock past its
// loss deadline is lost; a lock due for refresh joins this batch.
func (e *engine) fire(due []*keepalive.Entry[any]) {
	now := e.cfg.now()
	var batch []*Lock
	for _, entry := range due {
		l := entry.Value.(*Lock)
		l.mu.Lock()
		ended, deadline := l.err != nil, l.lossDeadline()
		refresh := l.auto && !l.refreshAt.After(now.Add(batchWindow))
		l.mu.Unlock()
		switch {
		case ended:
		case !now.Before(deadline):
			l.end(l.ranOut())
		case refresh:
			batch = append(batch, l)
		default:
			l.schedule()
		}
	}
	if len(batch) > 0 {
		e.bg.Go(func() { e.refreshBatch(batch) })
	}
}

// refreshBatch refreshes many locks at once, each by its backend: the
// nodes' in one pipeline per node and a quorum decision per lock.
func (e *engine) refreshBatch(batch []*Lock) {
	// A lock whose Release or manual Refresh (or a refresh of an earlier
	// batch) is under way is skipped, and looked at again a per-node
	// timeout later, by which time that operation has rescheduled it or
	// ended it: its refresh time, already past, would fire again at once.
	// Each lock taken here is unlocked by its backend when its refresh is
	// done.
	start := e.cfg.now()
	var byBackend map[backend][]refreshPlan
	for _, l := range batch {
		if !l.op.TryLock() {
			l.refreshLater(start)
			continue
		}
		ttl, why, old, ok := l.nextRefresh(start)
		if !ok {
			l.op.Unlock()
			l.schedule()
			continue
		}
		if byBackend == nil {
			byBackend = make(map[backend][]refreshPlan)
		}
		t := e.cfg.nodeTimeoutFor(ttl)
		byBackend[l.backend] = append(byBackend[l.backend], refreshPlan{l: l, ttl: ttl, why: why, timeout: t,
			newValid: start.Add(e.cfg.validity(ttl)), oldValid: old})
	}
	for b, plans := range byBackend {
		b.refreshBatch(start, plans)
	}
}

// runHeld runs Do's fn under lock, which is held and kept alive, and
// releases it: fn's context is cancelled with cause ErrLost the moment the
// lock can no longer be guaranteed, and carries IsDegraded for a lock
// obtained in degraded mode. It returns fn's error, joined with an error
// wrapping ErrLost when the lock was lost.
func runHeld(ctx context.Context, lock *Lock, fn func(context.Context) error) error {
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lock.bindDo(ctx, func() { cancel(ErrLost) })
	if lock.Degraded() {
		fnCtx = context.WithValue(fnCtx, degradedKey{}, true)
	}
	ferr := fn(fnCtx)
	lostErr := lock.Err()
	rerr := lock.Release(context.WithoutCancel(ctx))
	switch {
	case errors.Is(lostErr, ErrLost):
		return errors.Join(ferr, lostErr)
	case errors.Is(rerr, ErrNotHeld):
		// The nodes say the lock was not ours at the end, though it never
		// ran out here: an assumption of the safety model was broken.
		return errors.Join(ferr, fmt.Errorf("%w: the nodes no longer held it at release: %w", ErrLost, rerr))
	}
	return ferr
}
