package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/waitq"
)

// The one wait loop of every obtain (docs/engine.md, "One wait loop"), over
// one candidate name or several (Client.Any): N = 1 is a single lock. A
// waiter makes passes over the candidates until one is obtained, ctx ends
// or the passes of WithMaxAttempts are used up. Its steps, in order:
//
//  1. each pass first waits for an open circuit breaker (breakerWait);
//  2. the first pass is made at once (firstPass), unless others of this
//     Client wait for the same name, or a grace period holds it back;
//     Client.Any's first pass is made as the head of the queue instead
//     (queue), so that one Client's obtains of a set attempt one at a time;
//  3. then the waiter queues behind this Client's other waiters for the
//     names (docs/waiting.md), and when its turn comes subscribes to every
//     candidate's release channel (queue);
//  4. after subscribing it looks for a release it may have missed, instead
//     of attempting again (queue);
//  5. each later pass follows a wait for the first of a release
//     notification, the holders' TTL, the backoff, or ctx (retry).

// waiter is the state of one obtain's wait.
type waiter struct {
	e       *engine
	ctx     context.Context
	r       *request
	backoff backoff
	// order is the candidates in the order of the current pass (arrange).
	order []int
	// heldUntil[i] is when candidate i's holder, as last seen, runs out:
	// it cannot be free before, unless released, and a release of it
	// wakes this waiter (its refusal marked it as waited for). Zero:
	// unknown.
	heldUntil []time.Time
	heard     *driver.Waiter  // the queue's waiter, once joined
	wake      <-chan struct{} // its wake-ups, once subscribed
	// holderTTL is the soonest a holder runs out, as the last pass or look
	// for a release found (-1 if none is known).
	holderTTL time.Duration
	last      error // the last attempt's error, reported when ctx ends
}

// run runs the steps of the wait, and returns the lock, or the error of
// the obtain.
func (w *waiter) run() (*Lock, error) {
	e, r := w.e, w.r
	err := error(ErrNotObtained)
	group := r.spec.group(r.keys[0])
	if len(r.names) > 1 {
		group = anyGroup(r.keys)
	}
	// Fast path: nobody here waits for the name, or the call makes a
	// single pass, which has no turn to wait for. Client.Any takes no fast
	// path past the queue (unless single-pass): its first pass waits for
	// its turn like the others (queue), so that one Client's obtains of a
	// set that arrive together do not each sweep every candidate at once.
	viaQueue := len(r.names) > 1 && !e.cfg.notifyOff && r.o.retry.maxAttempts != 1
	if !viaQueue && (e.cfg.notifyOff || r.o.retry.maxAttempts == 1 || !e.waits.queues.Queued(group)) {
		l, ferr, end := w.firstPass()
		if end {
			return l, ferr
		}
		err = ferr
	}
	if !e.cfg.notifyOff {
		q, m := e.waits.queues.Join(group, r.keys)
		defer func() {
			if e.waits.queues.Leave(q, m) {
				e.waits.unsubscribe(q)
			}
		}()
		l, qerr, end := w.queue(q, m, err)
		if end {
			return l, qerr
		}
		err = qerr
	}
	return w.retry(err)
}

// firstPass is step 2: the pass made at once, after the grace period of a
// single name, if any. end is set when the obtain is over, with l and err
// its outcome; else err is the pass's.
func (w *waiter) firstPass() (l *Lock, err error, end bool) {
	e, r := w.e, w.r
	if len(r.names) == 1 {
		if until := e.waits.queues.GraceUntil(r.keys[0], e.cfg.now()); !until.IsZero() {
			if serr := sleep(w.ctx, until.Sub(e.cfg.now())); serr != nil {
				return nil, errors.Join(ErrNotObtained, serr), true
			}
		}
	}
	l, err = w.pass(false)
	if w.done(err) {
		return l, w.fail(err), true
	}
	return nil, err, false
}

// queue is steps 3 and 4: it waits for m's turn at the head of q,
// subscribes, and then makes the caller's first pass, or, when a pass was
// made before queueing, looks for a release it may have missed. err is the
// error so far. end is set when the obtain is over, with l and err its
// outcome.
func (w *waiter) queue(q *waitq.Queue, m *waitq.Member, err error) (l *Lock, _ error, end bool) {
	e, r := w.e, w.r
	if werr := e.waits.waitTurn(w.ctx, r.names[0], r.id, m); werr != nil {
		return nil, errors.Join(err, werr), true
	}
	if r.passes == 0 && q.Confirmed == nil {
		// The head of a queue that has not subscribed (Client.Any's
		// first pass, see run): attempt first, as the fast path does,
		// and subscribe only if that fails.
		l, err = w.pass(false)
		if w.done(err) {
			return l, w.fail(err), true
		}
	}
	// The head subscribes before its next pass: from the nodes'
	// confirmation on, every release wakes it.
	e.waits.subscribe(w.ctx, q, e.cfg.nodeTimeoutFor(r.ttl))
	w.wake, w.heard = q.Wake.C, q.Wake
	select {
	case <-w.wake: // meant for an earlier head
	default:
	}
	if r.passes == 0 {
		// Queued before any pass: make the first now.
		l, err = w.pass(false)
		if w.done(err) {
			return l, w.fail(err), true
		}
		return nil, err, false
	}
	// A release since the caller's pass may have come before the
	// subscription, or while an earlier head had the queue's wake-ups: no
	// notification of it will come. Look for it instead of attempting
	// again, so that the next pass, the one WithMaxAttempts counts, still
	// follows a wait.
	w.holderTTL = e.waits.lookForRelease(w.ctx, r, q.Wake, w.holderTTL)
	return nil, err, false
}

// retry is step 5: it waits for the first of a release notification, the
// holders' TTL, the backoff and ctx, and makes the next pass, until the
// obtain is over. err is the error so far.
func (w *waiter) retry(err error) (*Lock, error) {
	for {
		why := ""
		if !(refusedByBreaker(err) && w.waitsForBreaker()) {
			delay, more := w.backoff.next()
			if !more {
				return nil, err // the caller's strategy ends the retries
			}
			var werr error
			why, werr = w.e.waits.waitRelease(w.ctx, w.r.names[0], w.r.id, w.wake, delay, w.holderTTL)
			if werr != nil {
				return nil, errors.Join(err, werr)
			}
		}
		// Else the breaker refused the last pass: the next one waits for
		// it to close (breakerWait) instead of the backoff. The breaker
		// opens lazily, at the first acquire round after the failures
		// it counts, so that round may be the one of a wake-up that says
		// the nodes are back; a backoff then would outlast the outage.
		select {
		case <-w.wake: // came since the wait ended: this pass covers it
		default:
		}
		l, perr := w.pass(why == "release")
		if w.done(perr) {
			return l, w.fail(perr)
		}
		err = perr
	}
}

// pass makes one attempt on each candidate, in the order of arrange,
// until one is obtained, after step 1: the wait for an open breaker. A
// pass after a release notification (onlyLikely) skips the candidates
// known to be held that were not heard of; a pass after a timer tries
// them all, in case a release went unheard. It sets w.holderTTL.
func (w *waiter) pass(onlyLikely bool) (*Lock, error) {
	w.holderTTL = -1
	if w.ctx.Err() != nil {
		if w.last == nil {
			w.last = ErrNotObtained
		}
		return nil, w.last
	}
	if err := w.breakerWait(); err != nil {
		w.last = err
		return nil, err
	}
	w.r.passes++
	rank := w.arrange()
	// A wake-up that names no release (a broken connection) tries all.
	onlyLikely = onlyLikely && slices.Contains(rank, 0)
	now := w.e.cfg.now()
	l, holderTTL, err, end := w.tryEach(rank, onlyLikely, now)
	if end {
		w.holderTTL = holderTTL
		return l, err
	}
	if holderTTL < 0 {
		holderTTL = soonest(w.heldUntil, now)
	}
	w.holderTTL = holderTTL
	if w.last == nil {
		w.last = ErrNotObtained
	}
	return nil, w.last
}

// breakerWait is step 1: unless the obtain is bounded by WithMaxAttempts
// (each refusal then uses up a pass) or falls back to the degraded mode,
// it waits for an open circuit breaker to close.
func (w *waiter) breakerWait() error {
	if w.waitsForBreaker() {
		return w.e.brk.wait(w.ctx)
	}
	return nil
}

// waitsForBreaker reports whether the obtain waits for an open breaker
// (breakerWait): it is not bounded by WithMaxAttempts and does not fall
// back to the degraded mode.
func (w *waiter) waitsForBreaker() bool {
	return w.r.o.retry.maxAttempts == 0 && !(w.r.kind.degradable() && w.e.cfg.fallback != nil)
}

// tryEach attempts the candidates of a pass in w.order. end is set when
// the pass is over before the last candidate: a lock or an error that
// ends it (the breaker's refusal among them, with holderTTL -1). Else
// holderTTL is the shortest remaining TTL the nodes reported (-1: none).
func (w *waiter) tryEach(rank []int, onlyLikely bool, now time.Time) (l *Lock, holderTTL time.Duration, err error, end bool) {
	e, r := w.e, w.r
	holderTTL = -1
	for _, i := range w.order {
		if w.ctx.Err() != nil {
			break
		}
		if onlyLikely && rank[i] > 0 && now.Before(w.heldUntil[i]) {
			continue
		}
		lk, after, aerr := e.attempt(w.ctx, r, i)
		if final(aerr) {
			return lk, 0, aerr, true
		}
		if w.ctx.Err() != nil && w.last != nil && w.last != ErrNotObtained && !refusedByBreaker(aerr) {
			// An attempt that the caller's context cut short says nothing
			// new about the lock (its nodes answer "context canceled"):
			// the obtain reports why the last whole attempt failed, such
			// as ErrHeld, joined with ctx's error (fail).
			break
		}
		w.last = aerr
		if refusedByBreaker(aerr) {
			return nil, -1, aerr, true
		}
		if len(r.names) > 1 {
			w.last = fmt.Errorf("redlock: obtain any: none of %d names obtained; the last tried, %q: %w", len(r.names), r.names[i], aerr)
		}
		w.heldUntil[i] = time.Time{}
		if after >= 0 {
			w.heldUntil[i] = e.cfg.now().Add(after)
			if holderTTL < 0 || after < holderTTL {
				holderTTL = after
			}
		}
	}
	return nil, holderTTL, nil, false
}

// soonest is the shortest time from now until a known holder runs out
// (-1 if none is known).
func soonest(heldUntil []time.Time, now time.Time) time.Duration {
	d := time.Duration(-1)
	for _, t := range heldUntil {
		if left := t.Sub(now); !t.IsZero() && left > 0 && (d < 0 || left < d) {
			d = left
		}
	}
	return d
}

// final reports whether an attempt's outcome ends the obtain, whatever
// the waiter's state: a lock, or an error that waiting would not help.
func final(err error) bool {
	return err == nil || err == ErrClosed || errors.Is(err, ErrWrongKind) ||
		errors.Is(err, ErrConfigConflict) || errors.Is(err, errSameServer)
}

// done reports whether a pass that ended with err ends the obtain: final,
// ctx ended, or the passes of WithMaxAttempts are used up.
func (w *waiter) done(err error) bool {
	most := w.r.o.retry.maxAttempts
	return final(err) || w.ctx.Err() != nil || (most > 0 && w.r.passes >= most)
}

// fail is the error of an obtain whose last pass ended with err: joined
// with ctx's when ctx has ended.
func (w *waiter) fail(err error) error {
	if err != nil && err != ErrClosed && w.ctx.Err() != nil {
		return errors.Join(err, ctxErr(w.ctx))
	}
	return err
}

// arrange orders the candidates of a pass in w.order, and ranks them (see
// rankCandidates). A single name needs no order; its rank is nil.
func (w *waiter) arrange() (rank []int) {
	if len(w.order) == 1 {
		return nil
	}
	e := w.e
	var heard []string
	if w.heard != nil {
		heard = w.heard.Heard()
	}
	now := e.cfg.now()
	rank = rankCandidates(w.r.keys, heard, func(k string) bool { return !e.waits.queues.GraceUntil(k, now).IsZero() })
	rand.Shuffle(len(w.order), func(i, j int) { w.order[i], w.order[j] = w.order[j], w.order[i] })
	slices.SortStableFunc(w.order, func(a, b int) int { return rank[a] - rank[b] })
	return rank
}

// rankCandidates ranks the candidates of a pass of several names, given
// by their keys: the names whose release woke this waiter first (rank 0,
// their channel is in heard: they are likely free), then the others (1),
// and a name in its grace period last (rank 2: this Client released it
// and others were notified: let their waiters have it). A pass tries them
// in the order of their rank, at random within one.
func rankCandidates(rkeys, heard []string, inGrace func(key string) bool) []int {
	rank := make([]int, len(rkeys))
	for i, k := range rkeys {
		rank[i] = 1
		if inGrace(k) {
			rank[i] = 2
		}
	}
	for _, ch := range heard {
		if i := slices.IndexFunc(rkeys, func(k string) bool { return keys.Channel(k) == ch }); i >= 0 {
			rank[i] = 0
		}
	}
	return rank
}
