package redlock

import (
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/limits"
)

// The keep-alive: one scheduler goroutine per Client (internal/keepalive),
// the locks' next events in buckets by deadline, refreshes batched into one
// pipeline per node, and the loss of a lock whose validity runs out.

// keeper is the part of a lock that keeps it alive: its place in the
// Client's schedule (its next automatic refresh, or its loss deadline),
// its automatic refresh, and the error of a lock that ran out. Its
// methods reach their lock through the schedule's entry (ka.Value), which
// the scheduler hands back when the entry is due.
//
// The locking rule: the Lock's mu guards the keeper's fields, but for ka,
// which the scheduler's mutex guards. refreshAt, setRefreshAt, holdUntil,
// refreshWon and refreshLost are called with mu held (a round's outcome
// moves the validity and the schedule together); the others take it.
// Its times are kept from the lock's obtainedAt (validity), which is
// where they start.
type keeper struct {
	ka keepalive.Entry[*Lock]
	// interval is the automatic refresh's period; refreshIn is when the
	// next automatic refresh is due, and maxHold (0: no limit) past which
	// it does not extend the lock, both from obtainedAt.
	interval, refreshIn, maxHold time.Duration
	watched                      bool // scheduled: Done was called, or auto-refresh is on
	auto                         bool
	ttlInterval                  bool // interval is TTL/3 (not WithRefreshInterval)
	capped                       bool // the hold limit cut the last refresh short
}

// refreshAt is when the next automatic refresh is due.
func (k *keeper) refreshAt() time.Time { return k.ka.Value.obtainedAt().Add(k.refreshIn) }

// setRefreshAt sets when the next automatic refresh is due.
func (k *keeper) setRefreshAt(t time.Time) { k.refreshIn = t.Sub(k.ka.Value.obtainedAt()) }

// holdUntil is the time past which automatic refresh does not extend the
// lock (WithMaxHold); zero: no limit.
func (k *keeper) holdUntil() time.Time {
	if k.maxHold == 0 {
		return time.Time{}
	}
	return k.ka.Value.obtainedAt().Add(k.maxHold)
}

// schedule puts the lock's next event on the Client's schedule: its next
// automatic refresh, or its loss deadline, whichever comes first.
func (k *keeper) schedule() {
	l := k.ka.Value
	l.mu.Lock()
	if !k.watched || l.err != nil {
		l.mu.Unlock()
		return
	}
	at := l.lossDeadline()
	if refreshAt := k.refreshAt(); k.auto && refreshAt.Before(at) {
		at = refreshAt
	}
	l.mu.Unlock()
	l.e.sched.Schedule(&k.ka, at)
}

// keepAlive turns on automatic refresh every interval (0: TTL/3), up to
// maxHold after the lock was obtained (0: no limit), before the lock is
// shared.
func (k *keeper) keepAlive(interval, maxHold time.Duration) {
	l := k.ka.Value
	k.auto, k.watched = true, true
	k.interval = interval
	if k.interval == 0 {
		k.interval = l.ttl / 3
		k.ttlInterval = true
	}
	k.setRefreshAt(l.e.sched.Grid(l.obtainedAt().Add(k.interval), k.interval))
	k.maxHold = maxHold
}

// keepAliveOff turns off the automatic refresh that Client.All turned on
// for its wait, when its caller did not ask for it; the lock runs out from
// its last refresh, and its loss deadline stays scheduled.
func (k *keeper) keepAliveOff() {
	l := k.ka.Value
	l.mu.Lock()
	k.auto = false
	l.mu.Unlock()
	k.schedule()
}

// refreshWon moves the next automatic refresh after a won round sent at
// start, whose TTL was ttl.
func (k *keeper) refreshWon(start time.Time, ttl time.Duration) {
	l := k.ka.Value
	if l.base > 0 && k.ttlInterval && !k.capped {
		k.interval = ttl / 3 // the TTL WithAdaptiveTTL picked
	}
	k.setRefreshAt(l.e.sched.Grid(start.Add(k.interval), k.interval))
}

// refreshLost moves the next automatic refresh after a round that did not
// win, at now: try again soon, while a refresh can still finish in time.
func (k *keeper) refreshLost(now time.Time) {
	k.setRefreshAt(autoRetryAt(now, k.interval, k.ka.Value.nodeTimeout))
}

// nextRefresh is the TTL an automatic refresh sent at start asks for (and
// why: WithAdaptiveTTL picks it anew each time), and the validity it
// extends; ok is false when there is nothing to send: the lock ended, or
// its hold limit (WithMaxHold) leaves less than the minimum TTL, in which
// case automatic refresh stops and the lock runs out at its loss deadline.
// A TTL cut short by the hold limit marks the lock capped.
func (k *keeper) nextRefresh(start time.Time) (ttl time.Duration, why string, validUntil time.Time, ok bool) {
	l := k.ka.Value
	l.mu.Lock()
	ttl, base := l.ttl, l.base
	l.mu.Unlock()
	why = "given"
	if base > 0 {
		ttl, why = l.e.ttlFor(l.keys.key, base, false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, why, time.Time{}, false
	}
	if until := k.holdUntil(); !until.IsZero() && until.Sub(start) < ttl {
		ttl, why = until.Sub(start).Truncate(time.Millisecond), "hold_limit"
		k.capped = true
		if ttl < limits.MinTTL {
			k.auto = false
			return 0, why, time.Time{}, false
		}
	}
	return ttl, why, l.validUntil(), true
}

// refreshLater moves an automatic refresh that could not start at now (an
// operation on the lock is under way) a per-node timeout later, by which
// time that operation has rescheduled or ended the lock; its refresh time,
// already past, would otherwise fire again at once.
func (k *keeper) refreshLater(now time.Time) {
	l := k.ka.Value
	l.mu.Lock()
	k.setRefreshAt(now.Add(max(batchWindow, l.nodeTimeout)))
	l.mu.Unlock()
	k.schedule()
}

// ranOut is the error of a lock whose validity ran out without a refresh.
func (k *keeper) ranOut() error {
	l := k.ka.Value
	if why := l.backend().ranOut(l); why != nil {
		return fmt.Errorf("%w: %w", ErrLost, why)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.capped {
		return fmt.Errorf("%w: hold limit reached (WithMaxHold)", ErrLost)
	}
	return fmt.Errorf("%w: no refresh confirmed by a quorum before its validity ran out", ErrLost)
}
