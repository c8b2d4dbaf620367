package redlock

import (
	"time"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/limits"
)

// The keep-alive: one scheduler goroutine per Client (internal/keepalive),
// the locks' next events in buckets by deadline, refreshes batched into one
// pipeline per node, and the loss of a lock whose validity runs out.

// keeper is the part of a lock that keeps it alive: its place in the
// Client's schedule (its next automatic refresh, or its loss deadline) and
// its automatic refresh. The Lock's mu guards it, but for ka, which the
// scheduler's mutex guards. Its times are kept from the lock's obtainedAt
// (validity), which is where they start.
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

// refreshAt is when the next automatic refresh is due. l.mu must be held.
func (l *Lock) refreshAt() time.Time { return l.obtainedAt().Add(l.refreshIn) }

// setRefreshAt sets when the next automatic refresh is due. l.mu must be
// held.
func (l *Lock) setRefreshAt(t time.Time) { l.refreshIn = t.Sub(l.obtainedAt()) }

// holdUntil is the time past which automatic refresh does not extend the
// lock (WithMaxHold); zero: no limit. l.mu must be held.
func (l *Lock) holdUntil() time.Time {
	if l.maxHold == 0 {
		return time.Time{}
	}
	return l.obtainedAt().Add(l.maxHold)
}

// schedule puts the lock's next event on the Client's schedule: its next
// automatic refresh, or its loss deadline, whichever comes first.
func (l *Lock) schedule() {
	l.mu.Lock()
	if !l.watched || l.err != nil {
		l.mu.Unlock()
		return
	}
	at := l.lossDeadline()
	if refreshAt := l.refreshAt(); l.auto && refreshAt.Before(at) {
		at = refreshAt
	}
	l.mu.Unlock()
	l.e.sched.Schedule(&l.ka, at)
}

// keepAlive turns on automatic refresh every interval (0: TTL/3), up to
// maxHold after the lock was obtained (0: no limit), before the lock is
// shared.
func (l *Lock) keepAlive(interval, maxHold time.Duration) {
	l.auto, l.watched = true, true
	l.interval = interval
	if l.interval == 0 {
		l.interval = l.ttl / 3
		l.ttlInterval = true
	}
	l.setRefreshAt(l.e.sched.Grid(l.obtainedAt().Add(l.interval), l.interval))
	l.maxHold = maxHold
}

// keepAliveOff turns off the automatic refresh that Client.All turned on
// for its wait, when its caller did not ask for it; the lock runs out from
// its last refresh, and its loss deadline stays scheduled.
func (l *Lock) keepAliveOff() {
	l.mu.Lock()
	l.auto = false
	l.mu.Unlock()
	l.schedule()
}

// refreshWon moves the next automatic refresh after a won round sent at
// start, whose TTL was ttl. l.mu must be held.
func (l *Lock) refreshWon(start time.Time, ttl time.Duration) {
	if l.base > 0 && l.ttlInterval && !l.capped {
		l.interval = ttl / 3 // the TTL WithAdaptiveTTL picked
	}
	l.setRefreshAt(l.e.sched.Grid(start.Add(l.interval), l.interval))
}

// refreshLost moves the next automatic refresh after a round that did not
// win, at now: try again soon, while a refresh can still finish in time.
// l.mu must be held.
func (l *Lock) refreshLost(now time.Time) {
	l.setRefreshAt(autoRetryAt(now, l.interval, l.nodeTimeout))
}

// nextRefresh is the TTL an automatic refresh sent at start asks for (and
// why: WithAdaptiveTTL picks it anew each time), and the validity it
// extends; ok is false when there is nothing to send: the lock ended, or
// its hold limit (WithMaxHold) leaves less than the minimum TTL, in which
// case automatic refresh stops and the lock runs out at its loss deadline.
// A TTL cut short by the hold limit marks the lock capped.
func (l *Lock) nextRefresh(start time.Time) (ttl time.Duration, why string, validUntil time.Time, ok bool) {
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
	if until := l.holdUntil(); !until.IsZero() && until.Sub(start) < ttl {
		ttl, why = until.Sub(start).Truncate(time.Millisecond), "hold_limit"
		l.capped = true
		if ttl < limits.MinTTL {
			l.auto = false
			return 0, why, time.Time{}, false
		}
	}
	return ttl, why, l.validUntil(), true
}

// refreshLater moves an automatic refresh that could not start at now (an
// operation on the lock is under way) a per-node timeout later, by which
// time that operation has rescheduled or ended the lock; its refresh time,
// already past, would otherwise fire again at once.
func (l *Lock) refreshLater(now time.Time) {
	l.mu.Lock()
	l.setRefreshAt(now.Add(max(batchWindow, l.nodeTimeout)))
	l.mu.Unlock()
	l.schedule()
}
