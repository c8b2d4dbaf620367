package redlock

import (
	"fmt"
	"math"
	"time"
)

// validity is the part of a lock that says how long it is held: the TTL
// of its last round, the per-node timeout that goes with it, and the time
// until which a quorum is guaranteed to hold it. Its methods below read and
// write it alone; the Lock's mu guards it, and every caller holds it once
// the lock is shared.
//
// Its times are durations: when the lock was obtained, from the Client's
// origin (the keep-alive schedule's, engine.origin, at which origin
// points), and the validity's end from then, like the keep-alive's own
// times (keeper). There is one per held lock, and a duration is a third of
// a time.Time; the pointer fits in the Lock's size class.
type validity struct {
	origin *time.Time
	ttl    time.Duration
	// base is the TTL asked for, which WithAdaptiveTTL adjusts; 0: as
	// given.
	base        time.Duration
	nodeTimeout time.Duration
	obtainedIn  time.Duration // obtainedAt, from the Client's origin
	validFor    time.Duration // validUntil, from obtainedAt; noValidity once ended
}

// noValidity is validFor once the lock ended: its validUntil is zero.
const noValidity time.Duration = math.MinInt64

// obtainedAt is when the lock's acquire round was sent.
func (v *validity) obtainedAt() time.Time { return v.origin.Add(v.obtainedIn) }

// validUntil is the time until which a quorum is guaranteed to hold the
// lock; zero once it ended.
func (v *validity) validUntil() time.Time {
	if v.validFor == noValidity {
		return time.Time{}
	}
	return v.obtainedAt().Add(v.validFor)
}

// setValidUntil records the validity's end t (zero: the lock ended).
func (v *validity) setValidUntil(t time.Time) {
	if t.IsZero() {
		v.validFor = noValidity
		return
	}
	v.validFor = t.Sub(v.obtainedAt())
}

// lossDeadline is the moment from which no refresh could be confirmed
// before validUntil.
func (v *validity) lossDeadline() time.Time {
	return v.validUntil().Add(-v.nodeTimeout)
}

// extend records a won round sent at start: its validity, TTL and per-node
// timeout.
func (v *validity) extend(validUntil time.Time, ttl, timeout time.Duration) {
	v.setValidUntil(validUntil)
	v.ttl, v.nodeTimeout = ttl, timeout
}

// lower records a round that did not win, whose validity would have been
// validUntil: it may have shortened the keys on some nodes, so only the
// earlier of the two validities is still guaranteed.
func (v *validity) lower(validUntil time.Time) {
	if validUntil.Before(v.validUntil()) {
		v.setValidUntil(validUntil)
	}
}

// adaptTTL is the TTL of a manual refresh to ttl, and why: ttl becomes the
// base of a lock whose TTL WithAdaptiveTTL picks.
func (l *Lock) adaptTTL(ttl time.Duration) (time.Duration, string) {
	l.mu.Lock()
	adaptive := l.base > 0
	if adaptive {
		l.base = ttl
	}
	l.mu.Unlock()
	return l.e.ttlFor(l.keys.key, ttl, !adaptive)
}

// check returns the error of a refresh that must not be sent: the lock was
// released or lost, or is past its loss deadline.
func (l *Lock) check(now time.Time) error {
	l.mu.Lock()
	released, err, deadline := l.released, l.err, l.lossDeadline()
	l.mu.Unlock()
	switch {
	case released:
		return errReleased
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	case !now.Before(deadline):
		l.end(l.ranOut())
		return fmt.Errorf("%w: %w", ErrNotHeld, l.Err())
	}
	return nil
}

// applyRefresh records the outcome of a refresh round that was sent at
// start. A refresh that does not win may still have run on some nodes, and
// a shorter TTL there makes their keys expire sooner: only the earlier of
// the two validities is still guaranteed. It returns an error wrapping
// ErrNotHeld when the lock ended meanwhile.
func (l *Lock) applyRefresh(start time.Time, ttl, timeout time.Duration, newValid time.Time, won, refusedBy bool, yes func(node int) bool) error {
	now := l.e.cfg.now()
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	if won {
		l.extend(newValid, ttl, timeout)
		l.refreshWon(start, ttl)
		l.late.confirm(len(l.e.nodes), yes)
	} else {
		l.lower(newValid)
		l.refreshLost(now)
	}
	expired := !now.Before(l.lossDeadline())
	l.mu.Unlock()
	switch {
	case refusedBy:
		l.end(fmt.Errorf("%w: a quorum of nodes answered that the key is gone or another owner's", ErrLost))
	case expired:
		l.end(l.ranOut())
	default:
		l.schedule()
	}
	return nil
}

// obtained records a won acquire or claim, sent at start, before the lock
// is shared: its validity, the nodes that voted yes, those whose answer was
// still to come at the round's decision (pending: some may be in already,
// and the round's late answers take the Lock's mu), and its ID when the
// Client is observed.
func (l *Lock) obtained(start, validUntil time.Time, yes func(i int) bool, pending uint64) {
	l.obtainedIn = start.Sub(*l.origin)
	l.setValidUntil(validUntil)
	l.late.confirm(len(l.e.nodes), yes)
	if pending != 0 {
		l.mu.Lock()
		l.late.expect(pending)
		l.mu.Unlock()
	}
	l.open(l.e)
}
