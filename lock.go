package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Lock is a lock obtained from a Client. It is safe for concurrent use.
//
// A lock is held only until it can no longer be guaranteed: Done is closed
// and Err returns ErrLost at the loss deadline, ValidUntil less the per-node
// timeout (no refresh started later could finish in time), unless a refresh
// moves ValidUntil first. It is not safe to assume the lock is held after
// that, whatever the code did in between. The owner must call Release when
// done.
//
// A nil *Lock, which Obtain, TryObtain and Do's obtain return with an
// error, is a lock not held: Release, Refresh and Err return an error
// wrapping ErrNotHeld, Done returns a closed channel, and Key, Token,
// ValidUntil and TTL return zero values. So "defer lock.Release(ctx)" may
// come before the error is checked.
type Lock struct {
	c     *Client
	name  string
	key   string
	value string // the owner's secret; unused by a lock of the family
	// args are key and value as script arguments, boxed once for the
	// acquire and release calls of a plain lock.
	args  script.LockArgs
	token int64
	kind  Kind
	// quorum is how many nodes must agree to each round of the lock: the
	// Client's N/2+1, or a semaphore's PermitQuorum.
	quorum int
	// hold is the lock's hold when it is of the family (read-write or
	// reentrant); nil for a plain lock.
	hold *script.Hold
	// The lock's other Redis keys: its fencing counter, and on a Redis
	// Cluster its epoch record (see keys).
	fence, clusterEpoch string
	// deg is set for a lock obtained in degraded mode, from the lease
	// store of WithDegradedMode (degraded.go).
	deg *degradedLease

	// op serializes the network operations on the lock (Refresh, Release,
	// automatic refresh), so that a refresh cannot re-seed a key that a
	// release just deleted.
	op sync.Mutex

	// ka is the lock's place in the Client's schedule; the scheduler's
	// mutex guards it.
	ka keepalive.Entry[*Lock]

	// done is made by the first Done call (most locks are never watched),
	// and closed once err is set and a loss reported; doneClosed says the
	// closing is over, so that a later Done gets a closed channel.
	done       chan struct{}
	doneClosed bool

	obtainedAt time.Time

	// mu guards the fields below.
	mu sync.Mutex

	releasing bool // Release's round is out: late yes-replies clean up after themselves
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

// newLock is a lock about to be acquired, with a new owner value (or hold,
// for the lock family).
func (c *Client) newLock(name, key string, ttl, nodeTimeout time.Duration, o *obtainConfig) *Lock {
	l := &Lock{c: c, name: name, key: key, ttl: ttl, nodeTimeout: nodeTimeout, kind: o.kind, quorum: c.quorum}
	if o.kind == Permit {
		l.quorum = PermitQuorum(len(c.nodes), o.permits)
	}
	if c.adapt != nil && !o.fixedTTL {
		l.base = o.base
	}
	if l.hold = newHold(o); l.hold == nil {
		l.value = newValue()
		l.args = script.NewLockArgs(key, l.value)
	}
	l.fence = keys.Fence(key)
	if c.cluster {
		l.clusterEpoch = keys.ClusterEpoch(key)
	}
	l.ka.Value = l
	return l
}

// keys are the lock's Redis keys on node i. The epoch record is one per
// node, except on a Redis Cluster, where a script may only touch the slot
// of its lock: there each lock's hash tag has a record of its own.
func (l *Lock) keys(i int) script.Keys {
	k := script.Keys{Lock: l.key, Fence: l.fence, Epoch: l.c.epochKey}
	if l.c.nodes[i].Cluster {
		k.Epoch = l.clusterEpoch
	}
	return k
}

// Key returns the lock's name, as given to Obtain.
func (l *Lock) Key() string {
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
// The token of a lock obtained in degraded mode (Degraded, see
// WithDegradedMode) is negative, DegradedTokenBase plus its lease's
// version, and so below every token from the nodes, which are positive.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// ValidUntil returns the time until which the lock is guaranteed to be held
// (on the monotonic clock of this process): the TTL from the moment the
// acquire or last successful refresh was sent, less the drift allowance. A
// refresh that failed may lower it (it may have shortened the keys on some
// nodes). After Release, or once the lock is lost, it is the zero time.
func (l *Lock) ValidUntil() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// TTL returns the time to live used by the last acquire or refresh.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Done returns a channel that is closed when the lock ends: when it is lost
// (a quorum could not be confirmed in time, or its validity ran out without
// a refresh) or released. Err then says which, and a loss has already been
// reported to the Hook and the logger.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return closedChan
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

// Err returns nil while the lock is held; after it ends, an error wrapping
// ErrLost if it was lost or ran out, or ErrNotHeld after Release.
func (l *Lock) Err() error {
	if l == nil {
		return errNilLock
	}
	l.mu.Lock()
	err, deadline := l.err, l.lossDeadline()
	l.mu.Unlock()
	if err == nil && !l.c.cfg.now().Before(deadline) {
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.deg != nil && l.deg.closed {
		return fmt.Errorf("%w: %w", ErrLost, ErrDegraded)
	}
	if l.capped {
		return fmt.Errorf("%w: hold limit reached (WithMaxHold)", ErrLost)
	}
	return fmt.Errorf("%w: no refresh confirmed by a quorum before its validity ran out", ErrLost)
}

// Refresh extends the lock to ttl from now. It counts only if a quorum of
// nodes confirms before the current validity ends; the new validity is
// computed like an acquire's. A node that no longer has the key (it
// restarted, or expired it early) is re-seeded with the lock's value when it
// is free, which is safe because the lock is still valid on a quorum.
//
// A ttl shorter than the key has left moves ValidUntil earlier, but never
// shortens the key on the nodes, so that a delayed older refresh cannot cut
// the keys of a newer one: other owners wait for the longer expiry unless
// the lock is released.
//
// It returns an error wrapping ErrNotHeld when the lock is no longer ours
// (lost, released, past its loss deadline, or a quorum of nodes answered
// that the key is gone or another owner's), a *QuorumError without
// ErrNotHeld when nodes did not answer (the lock stays valid until
// ValidUntil, which may be lowered), ErrClosed after the Client's Close, and
// ErrInvalid for a TTL below MinTTL, above the maximum TTL, or whose
// validity would not outlast the per-node timeout.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return errNilLock
	}
	c := l.c
	ttl, err := c.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	l.op.Lock()
	defer l.op.Unlock()
	ttl, reason := l.adaptTTL(ttl)
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return ErrClosed
	}
	start := c.cfg.now()
	if err := l.check(start); err != nil {
		return err
	}
	if l.deg != nil {
		return l.refreshDegraded(ctx, start, ttl, reason, c.cfg.nodeTimeoutFor(ttl), false)
	}
	l.mu.Lock()
	validUntil := l.validUntil
	l.mu.Unlock()
	timeout := c.cfg.nodeTimeoutFor(ttl)
	newValid := start.Add(c.cfg.validity(ttl))
	round := quorum.Round[script.RefreshResult]{
		Nodes:   c.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.RefreshResult, error) {
			return l.refreshItem(n.Index, ttl).Run(ctx, n.Client, c.guard(n.Index))
		},
		Agree: script.RefreshResult.Agrees,
		Settle: func(n *quorum.Node, r script.RefreshResult, err error, _, late bool) {
			l.settleLate(n, r, err, late)
		},
		ValidUntil: minTime(validUntil, newValid),
	}
	res := round.Run(ctx, c.workers)
	observeRTT(c.adapt, res.Replies, timeout)
	return l.refreshDone(ctx, res, start, ttl, reason, timeout, newValid, false)
}

// adaptTTL is the TTL of a manual refresh to ttl, and why: ttl becomes
// the base of a lock whose TTL WithAdaptiveTTL picks.
func (l *Lock) adaptTTL(ttl time.Duration) (time.Duration, TTLReason) {
	l.mu.Lock()
	adaptive := l.base > 0
	if adaptive {
		l.base = ttl
	}
	l.mu.Unlock()
	return l.c.ttlFor(l.key, ttl, !adaptive)
}

// refreshDone applies the round of a refresh, manual or automatic, to the
// lock and reports it to the logger and the hook: the one place where a
// refresh's outcome is decided (whether the nodes say the lock is no longer
// ours: certainlyNotOurs, which Release asks too). It returns Refresh's
// error.
func (l *Lock) refreshDone(ctx context.Context, res quorum.Result[script.RefreshResult], start time.Time, ttl time.Duration, reason TTLReason, timeout time.Duration, newValid time.Time, auto bool) error {
	c := l.c
	err := l.refreshed(res, start, ttl, timeout, newValid)
	if c.observed() {
		c.logNodes(ctx, nodeResults(c, res, disagreeRefresh))
		if h := c.cfg.hook; h != nil {
			h.Refresh(ctx, RefreshEvent{Key: l.name, Kind: l.kind, Token: l.token, Auto: auto, Elapsed: c.cfg.now().Sub(start), Err: err,
				TTL: ttl, TTLReason: reason})
		}
	}
	return err
}

// refreshed applies a refresh's round and returns Refresh's error.
func (l *Lock) refreshed(res quorum.Result[script.RefreshResult], start time.Time, ttl, timeout time.Duration, newValid time.Time) error {
	c := l.c
	refusedBy := certainlyNotOurs(l, res.Replies, func(r script.RefreshResult) bool { return r == script.NotOwner }, everyNode)
	yes := func(i int) bool { return res.Replies[i].Yes }
	if err := l.applyRefresh(start, ttl, timeout, newValid, res.Won, refusedBy, yes); err != nil {
		return err
	}
	if res.Won {
		return nil
	}
	var sentinel error
	if l.Err() != nil {
		sentinel = ErrNotHeld
	}
	qe := quorumError(c, l.quorum, "refresh", res, sentinel, disagreeRefresh)
	qe.Expired = res.Agreed >= l.quorum
	return qe
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
	now := l.c.cfg.now()
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
		l.refreshAt = l.c.grid(start.Add(l.interval), l.interval)
		l.confirm(yes)
	} else {
		if newValid.Before(l.validUntil) {
			l.validUntil = newValid
		}
		// Try again soon, while a refresh can still finish in time.
		l.refreshAt = now.Add(max(l.interval/4, l.nodeTimeout))
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

// Release deletes the lock on every node where it still holds our value.
// It runs even when ctx is already cancelled, bounded by the per-node
// timeout (at least 100 ms), and is idempotent: later calls return the first call's result.
//
// It returns nil as soon as a quorum of nodes confirmed the deletion (the
// other nodes' deletes finish in the background, and Close waits for
// them), an error wrapping ErrNotHeld (a *QuorumError) when the lock had
// already expired or been taken, and a *QuorumError without ErrNotHeld
// when nodes did not answer; in every case the lock is no longer held, and
// keys left on unreachable nodes expire with their TTL.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	c := l.c
	releaseStart := c.cfg.now()
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
	if l.deg != nil {
		err := l.releaseDegraded(timeout)
		l.mu.Lock()
		l.released, l.releaseErr = true, err
		l.mu.Unlock()
		return l.releasedDone(ctx, releaseStart, err)
	}

	plain := l.releaseCall(true, false)
	round := quorum.Round[script.Released]{
		Nodes:   c.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		// Return once a quorum deleted the key: the other nodes' deletes
		// finish in the background (a late one cannot delete a later
		// owner's key: the script compares the value). A release that
		// fails waits for every node, to report each one's reason.
		Wait: quorum.WaitOnLoss,
		Now:  c.cfg.now,
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
				call = l.releaseCall(true, true)
			}
			return call.Release(ctx, n.Client)
		},
		Agree: func(r script.Released) bool { return r.Deleted },
	}
	start := c.cfg.now()
	rctx := ctx
	if rctx.Done() != nil {
		rctx = context.WithoutCancel(ctx) // a release is not abandoned halfway
	}
	res := round.Run(rctx, c.workers)
	l.notSent(res.Replies, timeout)
	c.afterRelease(l.key, res.Replies, c.cfg.now().Sub(start))
	var err error
	if !res.Won {
		var sentinel error
		if certainlyNotOurs(l, res.Replies, func(r script.Released) bool { return !r.Deleted }, confirmed) {
			sentinel = ErrNotHeld
		}
		err = quorumError(c, l.quorum, "release", res, sentinel, func(script.Released) error { return ErrNotOwner })
	}
	l.mu.Lock()
	l.released, l.releaseErr = true, err
	l.mu.Unlock()
	return l.releasedDone(ctx, releaseStart, err)
}

// releasedDone ends a Release: the Client forgets the lock, and the hook
// hears of it.
func (l *Lock) releasedDone(ctx context.Context, releaseStart time.Time, err error) error {
	c := l.c
	c.forget(l)
	if h := c.cfg.hook; h != nil {
		now := c.cfg.now()
		h.Release(ctx, ReleaseEvent{Key: l.name, Kind: l.kind, Token: l.token, Held: now.Sub(l.obtainedAt), Elapsed: now.Sub(releaseStart), Err: err})
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
	}()
	l.c.sched.Cancel(&l.ka)
	if !errors.Is(err, ErrLost) {
		return
	}
	if onLost != nil {
		onLost()
	}
	c := l.c
	held := c.cfg.now().Sub(l.obtainedAt)
	ctx := l.eventCtx()
	if h := c.cfg.hook; h != nil {
		h.Lost(ctx, LostEvent{Key: l.name, Kind: l.kind, Token: l.token, Held: held, Err: err})
	}
	if lg := c.cfg.logger; lg != nil {
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: lock lost",
			slog.String("key", l.name), slog.Duration("held", held), slog.String("reason", err.Error()))
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
	l.c.sched.Schedule(&l.ka, at)
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

// disagreeRefresh is the per-node reason of a refresh's no.
func disagreeRefresh(r script.RefreshResult) error {
	if r == script.NotReseeded {
		return &RecoveringError{}
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
// refresh, manual or automatic (refreshed), and by Release:
//
//   - A refresh's NotOwner means another owner's value is on the node (a
//     missing key is re-seeded, or on a recovering node answered
//     NotReseeded, which is no refusal): every node counts.
//   - A release's "not deleted" also covers a missing key, which a node
//     whose acquire or refresh had not answered in time may simply not have
//     received yet: only the nodes that confirmed the lock count.
func certainlyNotOurs[T any](l *Lock, replies []quorum.Reply[T], gone func(T) bool, evidence uint64) bool {
	n := 0
	for i, r := range replies {
		if r.Err == nil && evidence&(1<<i) != 0 && gone(r.Val) {
			n++
		}
	}
	return n > len(l.c.nodes)-l.quorum
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
		if waits&(1<<i) != 0 && (errors.Is(r.Err, quorum.ErrSkipped) || errors.Is(r.Err, quorum.ErrOverloaded)) && l.abandonAwait(i) {
			l.releaseNode(l.c.nodes[i], timeout)
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

// obtained records a won acquire round, sent at start, before the lock is
// shared: its validity and the nodes that voted yes.
func (l *Lock) obtained(start, validUntil time.Time, yes func(i int) bool) {
	l.validUntil = validUntil
	l.obtainedAt = start
	l.confirm(yes)
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
	l.refreshAt = l.c.grid(start.Add(l.interval), l.interval)
	if maxHold > 0 {
		l.holdUntil = start.Add(maxHold)
	}
}

// nextRefresh is the TTL an automatic refresh sent at start asks for (and
// why: WithAdaptiveTTL picks it anew each time), and the validity it
// extends; ok is false when there is nothing to send: the
// lock ended, or its hold limit (WithMaxHold) leaves less than MinTTL, in
// which case automatic refresh stops and the lock runs out at its loss
// deadline. A TTL cut short by the hold limit marks the lock capped.
func (l *Lock) nextRefresh(start time.Time) (ttl time.Duration, reason TTLReason, validUntil time.Time, ok bool) {
	l.mu.Lock()
	ttl, base := l.ttl, l.base
	l.mu.Unlock()
	if base > 0 {
		ttl, reason = l.c.ttlFor(l.key, base, false)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, reason, time.Time{}, false
	}
	if !l.holdUntil.IsZero() && l.holdUntil.Sub(start) < ttl {
		ttl, reason = l.holdUntil.Sub(start).Truncate(time.Millisecond), TTLHoldLimit
		l.capped = true
		if ttl < MinTTL {
			l.auto = false
			return 0, reason, time.Time{}, false
		}
	}
	return ttl, reason, l.validUntil, true
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
// lock. l.mu must be held.
func (l *Lock) confirm(yes func(i int) bool) {
	for i := range l.c.nodes {
		if yes(i) {
			l.confirmed |= 1 << i
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (l *Lock) nodeTimeoutNow() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nodeTimeout
}
