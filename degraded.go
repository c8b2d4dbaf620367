package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/breaker"
)

// The degraded mode (WithDegradedMode, docs/safety.md section 7): while the
// circuit breaker is open, a plain lock is taken in a lease store instead
// of on the nodes. Such a lock has the leaseHold backend; everything else
// about it (validity, keep-alive, loss, Do) is the lock's own.

type degradedKey struct{}

// IsDegraded reports whether ctx is the context of Do's function for a
// lock obtained in degraded mode (Lock.Degraded).
func IsDegraded(ctx context.Context) bool {
	v, _ := ctx.Value(degradedKey{}).(bool)
	return v
}

// leaseHold is the backend of a degraded lock: its lease in the store.
type leaseHold struct {
	store   LeaseStore
	name    string // the lease's name in the store: prefix and lock name
	version int64
	// closings is the breaker's count of closings when the lock was taken:
	// once the count has moved, the lock is never extended again, even if
	// the breaker has opened again since.
	closings uint64

	mu     sync.Mutex
	closed bool // a refresh found that the breaker had closed
}

// degradedTokenBase is the origin of degraded tokens: the token of a lock
// obtained in degraded mode is degradedTokenBase + the lease's version, a
// negative number. So a fenced resource that refuses a token lower than
// one it has seen refuses every degraded holder once it has seen a lock
// from the nodes, and orders the degraded holders of one shared store among
// themselves.
const degradedTokenBase = -1 << 63

// releaseLease ends a lease in the store, bounded by timeout; version 0
// (not known) is looked up by the owner value, which is unique. It reports
// whether the store found owner's live lease. Its answer only matters to
// the caller of Release.
func releaseLease(store LeaseStore, name, owner string, version int64, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, minReleaseTimeout))
	defer cancel()
	return store.Release(ctx, name, owner, version)
}

func (*leaseHold) degraded() bool { return true }

// ranOut says ErrDegraded once the breaker has closed since the lock was
// taken, whether or not a refresh found it: from then on the lock could
// not have been extended, and its owner must obtain it again on the nodes.
func (lh *leaseHold) ranOut(l *Lock) error {
	lh.mu.Lock()
	defer lh.mu.Unlock()
	if !lh.closed && lh.breakerClosed(l.e) {
		lh.closed = true
	}
	if lh.closed {
		return ErrDegraded
	}
	return nil
}

// breakerClosed is true when the breaker is closed or has closed since the
// lock was taken.
func (lh *leaseHold) breakerClosed(e *engine) bool {
	return e.brk.state.State() == breaker.Closed || e.brk.state.Closings() != lh.closings
}

// refresh extends the lease in the store while the breaker has not closed
// since the lock was taken.
func (lh *leaseHold) refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error {
	e := l.e
	timeout := e.cfg.nodeTimeoutFor(ttl)
	newValid := start.Add(e.cfg.validity(ttl))
	l.mu.Lock()
	oldValid := l.validUntil()
	l.mu.Unlock()
	var err error
	won, refused := false, false
	if lh.breakerClosed(e) {
		lh.mu.Lock()
		lh.closed = true
		lh.mu.Unlock()
		err = fmt.Errorf("redlock: refresh: %w; it runs out at its validity", ErrDegraded)
	} else {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		ok, serr := lh.store.Extend(sctx, lh.name, l.secret.id, lh.version, ttl)
		cancel()
		switch {
		case serr != nil:
			err = fmt.Errorf("redlock: refresh (degraded mode): lease store: %w", serr)
		case !ok:
			refused = true
			err = fmt.Errorf("redlock: refresh (degraded mode): the lease store says the lease is gone or another owner's: %w", ErrNotHeld)
		case e.cfg.now().Before(minTime(oldValid, newValid)):
			won = true
		default:
			err = fmt.Errorf("redlock: refresh (degraded mode): the lease store answered after the lock's validity")
		}
	}
	if refused {
		l.end(fmt.Errorf("%w: the lease store says the degraded lock's lease is gone or another owner's", ErrLost))
	} else if aerr := l.applyRefresh(start, ttl, timeout, newValid, won, false, func(int) bool { return false }); aerr != nil {
		err = aerr
	}
	l.refreshed(ctx, start, ttl, why, auto, err)
	return err
}

// refreshBatch refreshes the keep-alive's degraded locks, each on a
// goroutine of its own: a store has no pipeline.
func (*leaseHold) refreshBatch(start time.Time, plans []refreshPlan) {
	for _, p := range plans {
		e := p.l.e
		e.bg.Go(func() {
			defer p.l.op.Unlock()
			e.life.RLock()
			defer e.life.RUnlock()
			if e.reg.isClosed() {
				return
			}
			_ = p.l.backend().refresh(p.l.do.Load().context(), p.l, start, p.ttl, p.why, true)
		})
	}
}

// release ends the lease in the store. A lease that had run out, or was
// another owner's, is not held: the release says so with ErrNotHeld, as a
// release on the nodes does.
func (lh *leaseHold) release(_ context.Context, l *Lock, timeout time.Duration, _ uint64) error {
	ok, err := releaseLease(lh.store, lh.name, l.secret.id, lh.version, timeout)
	switch {
	case err != nil:
		return fmt.Errorf("redlock: release (degraded mode): lease store: %w", err)
	case !ok:
		return fmt.Errorf("redlock: release (degraded mode): the lease store says the lease had run out or is another owner's: %w", ErrNotHeld)
	}
	return nil
}
