package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Lock is a lock obtained through a handle (or the Client's Obtain,
// TryObtain and Do). It is safe for concurrent use.
//
// A lock is held only until it can no longer be guaranteed: Done is closed
// and Err returns ErrLost at the loss deadline, ValidUntil less the per-node
// timeout (no refresh started later could finish in time), unless a refresh
// moves ValidUntil first. It is not safe to assume the lock is held after
// that, whatever the code did in between. The owner must call Release when
// done.
//
// A lock of several names (Client.All) is held while each of its Parts is:
// Done is closed when any of them ends, Refresh and Release act on every
// part, and Name and Token, which each part has of its own, are zero.
//
// A nil *Lock, which an obtain returns with an error, is a lock not held:
// Release, Refresh and Err return an error wrapping ErrNotHeld, Done returns
// a closed channel, and the other methods return zero values. So
// "defer lock.Release(ctx)" may come before the error is checked.
type Lock struct {
	e     *engine
	id    uint64 // ObtainEvent.LockID; 0 when nothing observes the Client
	name  string
	label Kind // the kind's label in events
	kind  kind
	keys  lockKeys
	// secret is the kind's part of the lock: its value or hold.
	secret secret
	// quorum is which nodes must agree to each round of the lock.
	quorum quorum.Rule
	token  int64
	// backend holds the lock: the nodes, or the degraded mode's lease
	// store.
	backend backend
	// parts are the locks of a lock of several names (Client.All), in
	// name order; nil for a lock of one name.
	parts    []*Lock
	partDone chan struct{} // closed when the first part ends (parts only)

	// op serializes the network operations on the lock (Refresh, Release,
	// automatic refresh), so that a refresh cannot re-seed a key that a
	// release just deleted.
	op sync.Mutex

	// ka is the lock's place in the Client's schedule; the scheduler's
	// mutex guards it.
	ka keepalive.Entry[any]

	obtainedAt time.Time

	// announced is closed once the lock's ObtainEvent is reported; it is
	// made when the Client has a hook. The lock's other events wait for it
	// (Lock.emit). silent is set on a lock that its obtain gives back
	// before returning it: none of its events is reported.
	announced chan struct{}
	silent    bool

	// reporting counts the end being reported (the loss to Do's function,
	// the hook and the logger): a Release that comes meanwhile waits for
	// it, so that the hook hears of a lock's loss before its release.
	reporting sync.WaitGroup

	// mu guards the fields below.
	mu sync.Mutex

	// done is made by the first Done call (most locks are never watched),
	// and closed once err is set and a loss reported; doneClosed says the
	// closing is over, so that a later Done gets a closed channel.
	done       chan struct{}
	doneClosed bool
	releasing  bool // Release's round is out: late yes-replies clean up after themselves
	// confirmed has bit i set when node i answered yes in time to an
	// acquire or refresh round of the lock, so it held our key. Only such
	// a node's "not ours" at Release is evidence that the lock was lost
	// (certainlyNotOurs): another may not have received our key yet.
	confirmed uint64
	// The won acquire round's answers that came after its decision
	// (bits by node): lateAcq are the nodes it had not heard from then,
	// lateIn those whose answer is in (set by Settle). Release sends its
	// request to such a node after the answer (relWaits while it waits on
	// lateNext, which the next answer to come in closes), so that its
	// delete lands after the acquire's SET; an answer that finds the
	// release waiting leaves its clean-up to it (handedOver).
	lateAcq, lateIn, relWaits, handedOver uint64
	lateNext                              chan struct{}
	ttl                                   time.Duration
	base                                  time.Duration // the TTL asked for, which WithAdaptiveTTL adjusts; 0: as given
	nodeTimeout                           time.Duration
	validUntil                            time.Time
	err                                   error // nil while held; then ErrLost or ErrNotHeld
	released                              bool
	releaseErr                            error
	watched                               bool // scheduled: Done was called, or auto-refresh is on
	auto                                  bool
	interval                              time.Duration   // auto-refresh period
	ttlInterval                           bool            // interval is TTL/3 (not WithRefreshInterval)
	holdUntil                             time.Time       // auto-refresh does not extend past it; zero: no limit
	capped                                bool            // the hold limit cut the last refresh short
	refreshAt                             time.Time       // next automatic refresh
	onLost                                func()          // set by Do: cancels fn's context
	doCtx                                 context.Context // set by Do: the context of its keep-alive's events
}

// backend is where a lock is held: the nodes (the lock's own rounds, in
// this file), or the degraded mode's lease store (degraded.go).
type backend interface {
	// refresh extends the lock to ttl from start. The caller holds l.op
	// and e.life for reading, and has checked that the lock is held.
	refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error
	// refreshBatch refreshes locks of the keep-alive, all of this backend,
	// each with l.op held, and unlocks each.
	refreshBatch(start time.Time, plans []refreshPlan)
	// release gives the lock back; the caller holds l.op, and l has ended.
	release(ctx context.Context, l *Lock, timeout time.Duration, confirmed uint64) error
	// degraded is true for the lease store.
	degraded() bool
	// ranOut is why a lock that ran out could not be extended, beside its
	// validity: nil, or ErrDegraded.
	ranOut(l *Lock) error
}

// refreshPlan is one lock of an automatic refresh: the TTL it asks for and
// why, its per-node timeout, and its validity before and after.
type refreshPlan struct {
	l        *Lock
	ttl      time.Duration
	why      string
	timeout  time.Duration
	newValid time.Time
	oldValid time.Time
}

// newLock is a lock of the spec's kind about to be acquired under name and
// key, with a new secret made from the spec's prototype hold.
func (e *engine) newLock(name, key string, sp *spec, wait string, ttl, nodeTimeout time.Duration) *Lock {
	l := &Lock{e: e, name: name, label: sp.label, kind: sp.kind, keys: e.keysOf(key), ttl: ttl, nodeTimeout: nodeTimeout,
		quorum: e.rule(sp), backend: nodeBackend{}}
	l.secret = sp.newSecret(key, newValue(), wait)
	l.ka.Value = l
	return l
}

// Name returns the lock's name: the name of its handle, or for Client.Any
// the name obtained. It is "" for a lock of several names (Client.All),
// whose Parts have their own.
func (l *Lock) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Token returns the lock's fencing token: for a lock name, the token of
// each successful acquire is greater than that of every earlier successful
// acquire of the name, by any Client, across node restarts and failovers
// (under the assumptions of docs/fencing.md, and with the restart guard on).
// Pass it with every write to the resource the lock protects, and let the
// resource refuse a write whose token is lower than one it has seen: that
// stops a holder that lost its lock without knowing (a long pause) from
// writing after the next holder.
//
// A reentrant lock's re-entries keep their owner's token, and readers of a
// read-write lock are ordered against writers only (docs/lock-family.md);
// permits obtained at the same time may share one (docs/safety.md). The
// token of a lock obtained in degraded mode (Degraded) is negative, below
// every token from the nodes. A lock of several names (Client.All) has
// none: each of its Parts has its own.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// Parts returns the locks of a lock of several names (Client.All), one per
// name, sorted by name: the order in which they were obtained. It returns
// nil for a lock of one name. Release and Refresh the lock itself, not its
// parts.
func (l *Lock) Parts() []*Lock {
	if l == nil || l.parts == nil {
		return nil
	}
	return append([]*Lock(nil), l.parts...)
}

// Degraded reports whether the lock was obtained in degraded mode, from the
// lease store of WithDegradedMode, and not from the nodes (for a lock of
// several names: whether any part was).
func (l *Lock) Degraded() bool {
	if l == nil {
		return false
	}
	if l.parts != nil {
		for _, p := range l.parts {
			if p.Degraded() {
				return true
			}
		}
		return false
	}
	return l.backend.degraded()
}

// ValidUntil returns the time until which the lock is guaranteed to be held
// (on the monotonic clock of this process): the TTL from the moment the
// acquire or last successful refresh was sent, less the drift allowance. A
// refresh that failed may lower it (it may have shortened the keys on some
// nodes). After Release, or once the lock is lost, it is the zero time. For
// a lock of several names it is the earliest of its parts'.
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	if l.parts != nil {
		var until time.Time
		for i, p := range l.parts {
			v := p.ValidUntil()
			if v.IsZero() {
				return time.Time{}
			}
			if i == 0 || v.Before(until) {
				until = v
			}
		}
		return until
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// TTL returns the time to live used by the last acquire or refresh (for a
// lock of several names, the shortest of its parts'): the TTL given, or the
// one WithAdaptiveTTL picked.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	if l.parts != nil {
		ttl := time.Duration(0)
		for i, p := range l.parts {
			if t := p.TTL(); i == 0 || t < ttl {
				ttl = t
			}
		}
		return ttl
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Done returns a channel that is closed when the lock ends: when it is lost
// (a quorum could not be confirmed in time, or its validity ran out without
// a refresh) or released; for a lock of several names, when any part ends.
// Err then says which, and a loss has already been reported to the hook and
// the logger.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	if l.parts != nil {
		return l.partDone
	}
	l.mu.Lock()
	watch := !l.watched && l.err == nil
	l.watched = true
	if l.done == nil {
		if l.doneClosed {
			l.done = closedChan
		} else {
			l.done = make(chan struct{})
		}
	}
	done := l.done
	l.mu.Unlock()
	if watch {
		l.schedule()
	}
	return done
}

// closedChan is Done of a nil *Lock, and of a lock that had ended before
// Done was first called.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Err returns nil while the lock is held; after it ends, an error wrapping
// ErrLost if it was lost or ran out, or ErrNotHeld after Release. For a
// lock of several names, the error of the first part in name order that
// ended, prefixed with its name.
func (l *Lock) Err() error {
	if l == nil {
		return errNilLock
	}
	if l.parts != nil {
		for _, p := range l.parts {
			if err := p.Err(); err != nil {
				return fmt.Errorf("lock %q: %w", p.name, err)
			}
		}
		return nil
	}
	l.mu.Lock()
	err, deadline := l.err, l.lossDeadline()
	l.mu.Unlock()
	if err == nil && !l.e.cfg.now().Before(deadline) {
		l.end(l.ranOut())
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
	}
	return err
}

// lossDeadline is the moment from which no refresh could be confirmed
// before validUntil. l.mu must be held.
func (l *Lock) lossDeadline() time.Time {
	return l.validUntil.Add(-l.nodeTimeout)
}

// ranOut is the error of a lock whose validity ran out without a refresh.
func (l *Lock) ranOut() error {
	if why := l.backend.ranOut(l); why != nil {
		return fmt.Errorf("%w: %w", ErrLost, why)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.capped {
		return fmt.Errorf("%w: hold limit reached (WithMaxHold)", ErrLost)
	}
	return fmt.Errorf("%w: no refresh confirmed by a quorum before its validity ran out", ErrLost)
}

// Refresh extends the lock to ttl from now. A round counts only if a
// quorum of nodes confirms before the current validity ends; the new
// validity is computed like an acquire's. A node that no longer has the key
// (it restarted, or expired it early) is re-seeded with the lock's value
// when it is free, which is safe because the lock is still valid on a
// quorum. A round that fails for want of answers is tried again after the
// retry delay (WithRetryDelay, or the Client's WithBackoff), until one
// succeeds, ctx ends, or the lock passes its loss deadline, as the
// automatic refresh does: bound the wait with ctx.
//
// A ttl shorter than the key has left moves ValidUntil earlier, but never
// shortens the key on the nodes, so that a delayed older refresh cannot cut
// the keys of a newer one: other owners wait for the longer expiry unless
// the lock is released.
//
// It returns an error wrapping ErrNotHeld when the lock is no longer ours
// (lost, released, past its loss deadline, or a quorum of nodes answered
// that the key is gone or another owner's), the last round's *QuorumError
// joined with ctx's error when ctx ends first (the lock stays valid until
// ValidUntil, which a failed round may have lowered), ErrDegraded for a
// degraded lock once the breaker has closed, ErrClosed after the Client's
// Close, and ErrInvalid for a TTL below 10 ms, above the maximum TTL, or
// whose validity would not outlast the per-node timeout, or a nil ctx. A
// lock of several names refreshes every part in parallel and joins the
// errors of those that failed, each prefixed with its name.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	if ctx == nil {
		return errNilContext
	}
	e := l.e
	ttl, err := e.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	if l.parts != nil {
		return eachPart(l.parts, func(p *Lock) error { return p.Refresh(ctx, ttl) })
	}
	return retryRefresh(ctx, e.cfg.retry, func() error { return l.refreshOnce(ctx, ttl) }, func() time.Duration {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lossDeadline().Sub(e.cfg.now())
	})
}

// refreshOnce is one round of Refresh.
func (l *Lock) refreshOnce(ctx context.Context, ttl time.Duration) error {
	e := l.e
	l.op.Lock()
	defer l.op.Unlock()
	ttl, why := l.adaptTTL(ttl)
	e.life.RLock()
	defer e.life.RUnlock()
	if e.isClosed() {
		return ErrClosed
	}
	start := e.cfg.now()
	if err := l.check(start); err != nil {
		return err
	}
	return l.backend.refresh(ctx, l, start, ttl, why, false)
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
		l.validUntil, l.ttl, l.nodeTimeout = newValid, ttl, timeout
		if l.base > 0 && l.ttlInterval && !l.capped {
			l.interval = ttl / 3 // the TTL WithAdaptiveTTL picked
		}
		l.refreshAt = l.e.grid(start.Add(l.interval), l.interval)
		l.confirm(yes)
	} else {
		if newValid.Before(l.validUntil) {
			l.validUntil = newValid
		}
		// Try again soon, while a refresh can still finish in time.
		l.refreshAt = autoRetryAt(now, l.interval, l.nodeTimeout)
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

// refreshed reports a refresh, manual or automatic, to the hook.
func (l *Lock) refreshed(ctx context.Context, start time.Time, ttl time.Duration, why string, auto bool, err error) {
	e := l.e
	if e.cfg.hook != nil {
		l.emit(ctx, RefreshEvent{LockInfo: l.info(), Auto: auto,
			Elapsed: e.cfg.now().Sub(start), Err: err, TTL: ttl, TTLReason: why, Result: refreshResult(err)})
	}
}

// Release deletes the lock on every node where it still holds our value.
// It runs even when ctx is already cancelled, bounded by the per-node
// timeout (at least 100 ms), and is idempotent: later calls return the first
// call's result.
//
// It returns nil as soon as a quorum of nodes confirmed the deletion (the
// other nodes' deletes finish in the background, and Close waits for
// them), an error wrapping ErrNotHeld (a *QuorumError) when the lock had
// already expired or been taken, and a *QuorumError without ErrNotHeld
// when nodes did not answer; in every case the lock is no longer held, and
// keys left on unreachable nodes expire with their TTL. A lock of several
// names releases every part in parallel and joins the errors of those that
// failed, each prefixed with its name. A nil ctx counts as
// context.Background(), so that a deferred Release never leaves the lock
// held.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if l.parts != nil {
		return eachPart(l.parts, func(p *Lock) error { return p.Release(ctx) })
	}
	e := l.e
	releaseStart := e.cfg.now()
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	if l.released {
		err := l.releaseErr
		l.mu.Unlock()
		return err
	}
	// Nothing depends on a release being quick, and a key that stays
	// blocks others for its TTL: give the nodes more time than an acquire.
	timeout := max(l.nodeTimeout, minReleaseTimeout)
	// From here, a late yes of an earlier acquire or refresh round (which
	// may land on a node after this release's delete) deletes its own key
	// (settleLate); one that landed before is deleted by the release.
	l.releasing = true
	// The acquire's answers still to come leave their clean-up to this
	// release, which sends its request to their nodes after them.
	l.relWaits = l.lateAcq &^ l.lateIn
	confirmed := l.confirmed
	l.mu.Unlock()
	l.end(errReleased)
	l.reporting.Wait() // a loss being reported goes first
	err := l.backend.release(ctx, l, timeout, confirmed)
	l.mu.Lock()
	l.released, l.releaseErr = true, err
	lost := errors.Is(l.err, ErrLost)
	l.mu.Unlock()
	e.forget(l)
	if e.cfg.hook != nil {
		now := e.cfg.now()
		l.emit(ctx, ReleaseEvent{LockInfo: l.info(), Held: now.Sub(l.obtainedAt),
			Elapsed: now.Sub(releaseStart), Err: err, Result: releaseResult(err), Lost: lost, Degraded: l.Degraded()})
	}
	return err
}

// end moves the lock to its final state: Done is closed, Err returns err,
// ValidUntil is zero and the schedule forgets it. Only the first call
// counts.
func (l *Lock) end(err error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = err
	l.validUntil = time.Time{}
	onLost := l.onLost
	l.onLost = nil
	l.reporting.Add(1)
	l.mu.Unlock()
	// Done is closed last, so that whoever waits on it finds the loss
	// already reported to Do's function, the hook and the logger.
	defer func() {
		l.mu.Lock()
		done := l.done
		l.doneClosed = true
		l.mu.Unlock()
		if done != nil {
			close(done)
		}
		l.reporting.Done()
	}()
	e := l.e
	e.sched.Cancel(&l.ka)
	if !errors.Is(err, ErrLost) {
		return
	}
	if onLost != nil {
		onLost()
	}
	held := e.cfg.now().Sub(l.obtainedAt)
	ctx := l.eventCtx()
	l.emit(ctx, LostEvent{LockInfo: l.info(), Held: held, Err: err, Degraded: l.Degraded()})
	if lg := e.cfg.logger; lg != nil {
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: lock lost",
			slog.String("name", l.name), slog.Duration("held", held), slog.String("reason", err.Error()))
	}
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
	if l.auto && l.refreshAt.Before(at) {
		at = l.refreshAt
	}
	l.mu.Unlock()
	l.e.sched.Schedule(&l.ka, at)
}

// eventCtx is the context of the hook events of no call: automatic
// refreshes and the loss.
func (l *Lock) eventCtx() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.doCtx != nil {
		return l.doCtx
	}
	return context.Background()
}

// bindDo makes the lock Do's: f runs when the lock is lost (at once if it
// is lost already), and ctx is the context of its events.
func (l *Lock) bindDo(ctx context.Context, f func()) {
	if l.parts != nil {
		for _, p := range l.parts {
			p.bindDo(ctx, f)
		}
		return
	}
	l.mu.Lock()
	l.doCtx = context.WithoutCancel(ctx)
	if l.err == nil {
		l.onLost = f
		l.mu.Unlock()
		return
	}
	lost := errors.Is(l.err, ErrLost)
	l.mu.Unlock()
	if lost {
		f()
	}
}

// obtained records a won acquire, sent at start, before the lock is shared:
// its validity, the nodes that voted yes, and its ID when the Client is
// observed.
func (l *Lock) obtained(start, validUntil time.Time, yes func(i int) bool) {
	l.validUntil = validUntil
	l.obtainedAt = start
	l.confirm(yes)
	if l.e.observed() {
		l.id = lockIDs.Add(1)
	}
	if l.e.cfg.hook != nil {
		l.announced = make(chan struct{})
	}
}

// announce is called once the lock's ObtainEvent is reported: its other
// events may go.
func (l *Lock) announce() {
	if l.announced != nil {
		close(l.announced)
	}
}

// emit reports one of the lock's events after its ObtainEvent (see Hook),
// waiting for it if need be: the obtain that returns the lock reports it
// as soon as its round is over.
func (l *Lock) emit(ctx context.Context, ev Event) {
	if l.silent {
		return
	}
	if l.announced != nil {
		<-l.announced
	}
	l.e.emit(ctx, ev)
}

// keepAlive turns on automatic refresh every interval (0: TTL/3), up to
// maxHold after start (0: no limit), before the lock is shared.
func (l *Lock) keepAlive(start time.Time, interval, maxHold time.Duration) {
	l.auto, l.watched = true, true
	l.interval = interval
	if l.interval == 0 {
		l.interval = l.ttl / 3
		l.ttlInterval = true
	}
	l.refreshAt = l.e.grid(start.Add(l.interval), l.interval)
	if maxHold > 0 {
		l.holdUntil = start.Add(maxHold)
	}
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
	if !l.holdUntil.IsZero() && l.holdUntil.Sub(start) < ttl {
		ttl, why = l.holdUntil.Sub(start).Truncate(time.Millisecond), "hold_limit"
		l.capped = true
		if ttl < limits.MinTTL {
			l.auto = false
			return 0, why, time.Time{}, false
		}
	}
	return ttl, why, l.validUntil, true
}

// refreshLater moves an automatic refresh that could not start at now (an
// operation on the lock is under way) a per-node timeout later, by which
// time that operation has rescheduled or ended the lock; its refresh time,
// already past, would otherwise fire again at once.
func (l *Lock) refreshLater(now time.Time) {
	l.mu.Lock()
	l.refreshAt = now.Add(max(batchWindow, l.nodeTimeout))
	l.mu.Unlock()
	l.schedule()
}

// confirm records the nodes that answered yes in time to a round of the
// lock. l.mu must be held (or the lock not shared yet).
func (l *Lock) confirm(yes func(i int) bool) {
	for i := range l.e.nodes {
		if yes(i) {
			l.confirmed |= 1 << i
		}
	}
}

func (l *Lock) nodeTimeoutNow() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodeTimeout
}

// eachPart runs f on every part of a lock of several names, a bounded
// number at a time, and joins the errors, each prefixed with its part's
// name.
func eachPart(parts []*Lock, f func(*Lock) error) error {
	errs := make([]error, len(parts))
	const parallel = 64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range parts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(p); err != nil {
				errs[i] = fmt.Errorf("lock %q: %w", p.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// nodeBackend is the backend of a lock held on the nodes: its refresh and
// release rounds.
type nodeBackend struct{}

func (nodeBackend) degraded() bool     { return false }
func (nodeBackend) ranOut(*Lock) error { return nil }

func (nodeBackend) refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error {
	e := l.e
	l.mu.Lock()
	validUntil := l.validUntil
	l.mu.Unlock()
	timeout := e.cfg.nodeTimeoutFor(ttl)
	newValid := start.Add(e.cfg.validity(ttl))
	round := quorum.Round[script.RefreshResult]{
		Nodes:   e.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.RefreshResult, error) {
			return l.kind.refresh(l.keys.on(e, n.Index), &l.secret, ttl).Run(ctx, n.Conn, e.guard(n.Index))
		},
		Agree: script.RefreshResult.Agrees,
		Settle: func(n *quorum.Node, r script.RefreshResult, err error, _, late bool) {
			l.settleLate(n, r, err, late)
		},
		ValidUntil: minTime(validUntil, newValid),
	}
	res := round.Run(ctx, e.workers)
	observeRTT(e, res.Replies, timeout)
	return l.refreshDone(ctx, res, start, ttl, why, timeout, newValid, auto)
}

// refreshDone applies the round of a refresh on the nodes, manual or
// automatic, to the lock and reports it to the logger and the hook: the
// one place where a refresh's outcome is decided (whether the nodes say
// the lock is no longer ours: certainlyNotOurs, which Release asks too).
// It returns Refresh's error.
func (l *Lock) refreshDone(ctx context.Context, res quorum.Result[script.RefreshResult], start time.Time, ttl time.Duration, why string, timeout time.Duration, newValid time.Time, auto bool) error {
	e := l.e
	refusedBy := certainlyNotOurs(l, res.Replies, func(r script.RefreshResult) bool { return r == script.NotOwner }, everyNode)
	yes := func(i int) bool { return res.Replies[i].Yes }
	err := l.applyRefresh(start, ttl, timeout, newValid, res.Won, refusedBy, yes)
	if err == nil && !res.Won {
		var sentinel error
		if l.Err() != nil {
			sentinel = ErrNotHeld
		}
		qe := quorumError(e, l.quorum, "refresh", res, sentinel, disagreeRefresh)
		qe.Expired = l.quorum.Met(res.Yes)
		err = qe
	}
	if e.observed() {
		e.logNodes(ctx, nodeResults(e, res, disagreeRefresh))
		l.refreshed(ctx, start, ttl, why, auto, err)
	}
	return err
}

// refreshBatch refreshes the keep-alive's locks held on the nodes: one
// pipeline per node, and a quorum decision per lock, in one round per
// per-node timeout (a round waits for every node up to its timeout, and a
// lock with a short TTL must not wait on a dead node for the timeout of a
// long one).
func (nodeBackend) refreshBatch(start time.Time, plans []refreshPlan) {
	var wg sync.WaitGroup
	for len(plans) > 0 {
		timeout := plans[0].timeout
		var group, rest []refreshPlan
		for _, p := range plans {
			if p.timeout == timeout {
				group = append(group, p)
			} else {
				rest = append(rest, p)
			}
		}
		plans = rest
		wg.Go(func() {
			refreshGroup(start, timeout, group)
			for _, p := range group {
				p.l.op.Unlock()
			}
		})
	}
	wg.Wait()
}

// refreshGroup refreshes locks that share a per-node timeout: one pipeline
// per node, and a quorum decision per lock.
func refreshGroup(start time.Time, timeout time.Duration, plans []refreshPlan) {
	e := plans[0].l.e
	type batchReply struct {
		results []script.RefreshResult
		errs    []error
	}
	round := quorum.Round[batchReply]{
		Nodes:   e.nodes,
		Quorum:  e.majority,
		Timeout: timeout,
		Wait:    quorum.WaitAll,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (batchReply, error) {
			items := make([]script.RefreshItem, len(plans))
			for i, p := range plans {
				items[i] = p.l.kind.refresh(p.l.keys.on(e, n.Index), &p.l.secret, p.ttl)
			}
			results, errs, err := script.RefreshBatch(ctx, n.Conn, items, e.guard(n.Index))
			return batchReply{results, errs}, err
		},
		Agree: func(batchReply) bool { return true },
		Settle: func(n *quorum.Node, r batchReply, err error, _, late bool) {
			for i, p := range plans {
				res, ierr := script.NotOwner, err
				if err == nil {
					res, ierr = r.results[i], r.errs[i]
				}
				p.l.settleLate(n, res, ierr, late)
			}
		},
	}
	batch := round.Run(context.Background(), e.workers)
	observeRTT(e, batch.Replies, timeout)
	now := e.cfg.now()
	for i, p := range plans {
		// This lock's own round, read out of the batch: decided like a
		// manual refresh's, by refreshDone.
		res := quorum.Result[script.RefreshResult]{Replies: make([]quorum.Reply[script.RefreshResult], len(e.nodes))}
		for n, rep := range batch.Replies {
			switch {
			case rep.Err != nil:
				res.Replies[n].Err = rep.Err
			case rep.Val.errs[i] != nil:
				res.Replies[n].Err = rep.Val.errs[i]
			default:
				r := rep.Val.results[i]
				res.Replies[n] = quorum.Reply[script.RefreshResult]{Val: r, Yes: r.Agrees(), Latency: rep.Latency}
				if r.Agrees() {
					res.Agreed++
					res.Yes |= 1 << n
				}
			}
		}
		res.Won = p.l.quorum.Met(res.Yes) && now.Before(minTime(p.oldValid, p.newValid))
		_ = p.l.refreshDone(p.l.eventCtx(), res, start, p.ttl, p.why, p.timeout, p.newValid, true)
	}
}

func (nodeBackend) release(ctx context.Context, l *Lock, timeout time.Duration, confirmed uint64) error {
	e := l.e
	plain := l.kind.release(l.keys.key, &l.secret, true, false)
	round := quorum.Round[script.Released]{
		Nodes:   e.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		// Return once a quorum deleted the key: the other nodes' deletes
		// finish in the background (a late one cannot delete a later
		// owner's key: the script compares the value). A release that
		// fails waits for every node, to report each one's reason.
		Wait: quorum.WaitOnLoss,
		Now:  e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.Released, error) {
			// A node that had not answered the acquire when it was
			// decided gets its delete after the answer, not before the
			// acquire's SET: the answer then needs no clean-up of its own.
			waited := false
			for wait := l.awaitAcquire(n.Index); wait != nil; wait = l.awaitAcquire(n.Index) {
				waited = true
				select {
				case <-wait:
				case <-ctx.Done():
					if l.abandonAwait(n.Index) {
						l.releaseNode(n, timeout)
					}
					return script.Released{}, ctx.Err()
				}
			}
			if waited {
				// The wait may have used the request's time: it gets
				// its own.
				ctx = n.RequestContext(ctx, timeout)
			}
			call := plain
			if n.Cluster {
				call = l.kind.release(l.keys.key, &l.secret, true, true)
			}
			return call.Release(ctx, n.Conn)
		},
		Agree: func(r script.Released) bool { return r.Deleted },
	}
	start := e.cfg.now()
	rctx := ctx
	if rctx.Done() != nil {
		rctx = context.WithoutCancel(ctx) // a release is not abandoned halfway
	}
	res := round.Run(rctx, e.workers)
	l.notSent(res.Replies, timeout)
	e.afterRelease(l.keys.key, res.Replies, e.cfg.now().Sub(start))
	if res.Won {
		return nil
	}
	var sentinel error
	if certainlyNotOurs(l, res.Replies, func(r script.Released) bool { return !r.Deleted }, confirmed) {
		sentinel = ErrNotHeld
	}
	return quorumError(e, l.quorum, "release", res, sentinel, func(script.Released) error { return ErrNotOwner })
}

// releaseNode deletes the lock's key (its hold) on one node; used for
// clean-up, its outcome only matters to the node's health.
func (l *Lock) releaseNode(n *quorum.Node, timeout time.Duration) {
	e := l.e
	round := quorum.Round[bool]{
		Nodes:   []*quorum.Node{n},
		Quorum:  quorum.Count(1),
		Timeout: timeout,
		Force:   true,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			r, err := l.kind.release(l.keys.key, &l.secret, false, false).Release(ctx, n.Conn)
			return r.Deleted, err
		},
		Agree: func(ok bool) bool { return ok },
	}
	round.Run(context.Background(), e.workers)
}

// disagreeRefresh is the per-node reason of a refresh's no.
func disagreeRefresh(r script.RefreshResult) error {
	if r == script.NotReseeded {
		return fmt.Errorf("%w: the key is gone and the node may not take it back yet", ErrNodeRecovering)
	}
	return ErrHeld
}

// everyNode is the evidence of a round in which every node's "not ours"
// counts (see certainlyNotOurs).
const everyNode = ^uint64(0)

// certainlyNotOurs decides, from a round's replies, whether the lock is
// certainly not ours: more nodes answered "not ours" (gone) than a quorum
// can spare, so that a quorum can no longer agree. Only the nodes whose bit
// is set in evidence count: those whose "not ours" rules our key out. It is
// the one rule for a lock that the nodes say is no longer held, used by a
// refresh, manual or automatic (refreshDone), and by Release:
//
//   - A refresh's NotOwner means another owner's value is on the node (a
//     missing key is re-seeded, or on a recovering node answered
//     NotReseeded, which is no refusal): every node counts.
//   - A release's "not deleted" also covers a missing key, which a node
//     whose acquire or refresh had not answered in time may simply not have
//     received yet: only the nodes that confirmed the lock count.
func certainlyNotOurs[T any](l *Lock, replies []quorum.Reply[T], isGone func(T) bool, evidence uint64) bool {
	var gone uint64
	for i, r := range replies {
		if r.Err == nil && evidence&(1<<i) != 0 && isGone(r.Val) {
			gone |= 1 << i
		}
	}
	nodes := quorum.Mask(len(l.e.nodes), func(int) bool { return true })
	return !l.quorum.Met(nodes &^ gone)
}

// settleAcquire settles a node's answer to the won acquire round: unless
// Release is waiting to send its request to the node after this definite
// answer (awaitAcquire), which then deletes whatever the acquire set, it
// is settleLate's.
func (l *Lock) settleAcquire(n *quorum.Node, r script.RefreshResult, err error, late bool) {
	bit := uint64(1) << n.Index
	l.mu.Lock()
	l.lateIn |= bit
	// An answer without a definite outcome (a timeout) may come before
	// its request ran on the node, so the release that follows it may
	// still land first: it cleans up after itself as well.
	covered := l.relWaits&bit != 0 && !ambiguous(err)
	if covered {
		l.handedOver |= bit
	}
	if l.lateNext != nil {
		close(l.lateNext)
		l.lateNext = nil
	}
	l.mu.Unlock()
	if !covered {
		l.settleLate(n, r, err, late)
	}
}

// expectLate records the nodes whose answer to the won acquire round was
// still to come at its decision (some may be in already), before the lock
// is shared.
func (l *Lock) expectLate(pending uint64) {
	l.mu.Lock()
	l.lateAcq = pending
	l.mu.Unlock()
}

// awaitAcquire is called by Release before it sends its request to node
// i: when the node's answer to the acquire round is still to come, it
// returns a channel closed when the next late answer comes in (the caller
// asks again), and node i's answer will leave its clean-up to the release;
// nil once node i's answer is in.
func (l *Lock) awaitAcquire(i int) <-chan struct{} {
	bit := uint64(1) << i
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lateAcq&^l.lateIn&bit == 0 {
		return nil
	}
	l.relWaits |= bit
	if l.lateNext == nil {
		l.lateNext = make(chan struct{})
	}
	return l.lateNext
}

// abandonAwait is called by Release when it stops waiting for node i's
// answer without sending its request: it reports whether that answer came
// and left its clean-up to the release, which must then be done anyway.
func (l *Lock) abandonAwait(i int) bool {
	bit := uint64(1) << i
	l.mu.Lock()
	defer l.mu.Unlock()
	l.relWaits &^= bit
	return l.handedOver&bit != 0
}

// notSent takes back from the acquire's late answers the nodes that
// Release's round did not send its request to (skipped by their breaker or
// in-flight bound): such an answer still to come cleans up after itself,
// one that came already is cleaned up here.
func (l *Lock) notSent(replies []quorum.Reply[script.Released], timeout time.Duration) {
	l.mu.Lock()
	waits := l.relWaits
	l.mu.Unlock()
	if waits == 0 {
		return
	}
	for i, r := range replies {
		if waits&(1<<i) != 0 && errors.Is(r.Err, quorum.ErrSkipped) && l.abandonAwait(i) {
			l.releaseNode(l.e.nodes[i], timeout)
		}
	}
}

// settleLate deletes our key on a node whose reply to an acquire or refresh
// round of the lock may have set or extended it after the lock's release
// was sent: a yes that came after its round was decided (late), or a
// request with no definite outcome. Every round of a lock is decided
// before its Release begins (l.op), so a reply that came before its
// round's decision is covered by the release.
func (l *Lock) settleLate(n *quorum.Node, r script.RefreshResult, err error, late bool) {
	if ((late && r.Agrees()) || ambiguous(err)) && l.isReleasing() {
		l.releaseNode(n, l.nodeTimeoutNow())
	}
}

func (l *Lock) isReleasing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.releasing
}
