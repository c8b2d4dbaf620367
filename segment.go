package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/notify"
)

// Segmented locks: one hot resource split into segments, each guarded by a
// lock of its own, and an obtain that takes any free segment.

// ObtainAny obtains one of the locks named names, whichever is free, for
// ttl: a segmented lock, where one hot resource (a stock of items, a pool
// of slots) is split into segments that the application keeps apart, each
// guarded by its own name, so that up to len(names) holders work at once.
//
// ObtainAny first tries one name, at random, at once, as Obtain makes its
// first attempt. When that name is held, it queues behind the goroutines of
// this Client that wait for the same set of names (first come, first
// served, as Obtain's waiters do), and when its turn comes makes passes
// over all the names: a pass tries each name once, as TryObtain would, in
// a random order (a new one each pass, so that callers spread over the
// segments; names whose release woke it come first), until one is
// obtained. Between passes it waits on all the names at once, as Obtain
// waits on one: a release of any of them wakes it, and it never sleeps past
// the shortest remaining TTL a node reported, nor past the backoff of
// WithRetryDelay. WithMaxAttempts(n) bounds the passes to n.
//
// The returned lock is an ordinary Lock on the name it got: Key says which.
// Every option of Obtain applies (WithAutoRefresh, WithMaxHold, the lock
// family's kinds, retry options), the lock has its own fencing token in the
// name's sequence, and hooks see each name's attempts as for Obtain. The
// ObtainEvent carries the name obtained, or the first of names when none
// was; the WaitEvents carry the first of names.
//
// Segments that run dry are the application's business: pass only the
// names still worth trying.
//
// It returns an error wrapping ErrInvalid, before any I/O, for no names,
// more than MaxNames, an empty or otherwise invalid name, a name given
// twice, or an option or TTL that Obtain would refuse; ErrClosed after
// Close; ErrWrongKind, at once, when a name is held by a lock of another
// kind; and otherwise, when no name was obtained before ctx ended or the
// attempts ran out, an error wrapping ErrNotObtained and the last refusal
// (a *QuorumError), joined with ctx's error when ctx ended.
//
// The caller must Release the returned lock.
func (c *Client) ObtainAny(ctx context.Context, names []string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.obtainAny(ctx, names, ttl, opts, false)
}

// TryObtainAny makes one pass over the locks named names in a random
// order, trying each once, and returns the first it obtains, without
// waiting. When every name is held it returns an error wrapping
// ErrNotObtained and the last name's refusal (which matches ErrHeld when
// that name had another owner). WithMaxAttempts in opts is overridden;
// the other errors are those of ObtainAny.
//
// The caller must Release the returned lock.
func (c *Client) TryObtainAny(ctx context.Context, names []string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.obtainAny(ctx, names, ttl, opts, true)
}

func (c *Client) obtainAny(ctx context.Context, names []string, ttl time.Duration, opts []ObtainOption, try bool) (*Lock, error) {
	rkeys, o, ttl, err := c.checkNames("obtain any", names, ttl, opts)
	if err != nil {
		return nil, err
	}
	if try {
		o.retry.maxAttempts = 1
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	if o.exclusive() {
		o.wait = newValue()
	}
	gaveUp := func(err error) {
		for _, k := range rkeys {
			c.gaveUp(k, ttl, &o, err)
		}
	}
	if !c.observed() {
		l, _, err := c.anyLoop(ctx, names, rkeys, ttl, &o)
		gaveUp(err)
		return l, err
	}
	start := time.Now()
	o.id = obtainIDs.Add(1)
	l, attempts, err := c.anyLoop(ctx, names, rkeys, ttl, &o)
	gaveUp(err)
	if h := c.cfg.hook; h != nil {
		ev := ObtainEvent{Key: names[0], Kind: o.kind, ObtainID: o.id, Attempts: attempts, Elapsed: time.Since(start), Err: err,
			TTL: o.ttl, TTLReason: o.ttlReason}
		if l != nil {
			ev.Key, ev.Token = l.name, l.token
		}
		h.Obtain(ctx, ev)
	}
	return l, err
}

// anyLoop is obtainLoop for several names. Unless it makes a single pass
// (TryObtainAny), it first tries one name at once, as Obtain makes its
// first attempt; when that is refused, it queues behind this Client's other
// callers for the same set of names, and the head of the queue subscribes
// to every name's releases and makes passes over the names, waiting for a
// release of any of them between passes. It returns the lock, the number of
// acquire attempts (one per name tried) and the error.
func (c *Client) anyLoop(ctx context.Context, names, rkeys []string, ttl time.Duration, o *obtainConfig) (*Lock, int, error) {
	backoff := newBackoff(o.retry)
	attempts, passes := 0, 0
	var last error // the last refusal, reported when none was obtained
	order := make([]int, len(names))
	rank := make([]int, len(names))
	// heard is the queue's waiter once this call has joined it; byChannel
	// maps each name's release channel to the name's index.
	var (
		heard     *notify.Waiter
		byChannel map[string]int
	)
	// try makes one attempt on name i.
	try := func(i int) (*Lock, time.Duration, error) {
		attempts++
		o.base = ttl
		o.ttl, o.ttlReason = c.ttlFor(rkeys[i], ttl, o.fixedTTL) // WithAdaptiveTTL
		l, after, err := c.attempt(ctx, names[i], rkeys[i], o.ttl, o)
		if err != nil && err != ErrClosed && !errors.Is(err, ErrWrongKind) {
			last = fmt.Errorf("redlock: obtain any: none of %d names obtained; the last tried, %q: %w", len(names), names[i], err)
		}
		return l, after, err
	}
	// shuffle orders the names for a pass: at random, but the names whose
	// release woke this waiter first (they are likely free), and a name in
	// its grace period last (this Client released it and others were
	// notified: let their waiters have it).
	shuffle := func() (heardAny bool) {
		for i := range order {
			order[i] = i
		}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i, k := range rkeys {
			rank[i] = 1
			if !c.waits.graceUntil(k, c.cfg.now).IsZero() {
				rank[i] = 2
			}
		}
		if heard != nil {
			for _, ch := range heard.Heard() {
				if i, ok := byChannel[ch]; ok {
					rank[i], heardAny = 0, true
				}
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return rank[a] - rank[b] })
		return heardAny
	}
	// heldUntil[i] is when name i's holder, as last seen, runs out: a name
	// refused with a known TTL cannot be free before, unless released, and
	// a release of it wakes this waiter (its refusal marked the name as
	// waited for). Zero: unknown.
	heldUntil := make([]time.Time, len(names))
	// pass tries the names once each, in shuffle's order, until one is
	// obtained; it returns the shortest remaining TTL of the holders. A
	// pass after a release notification (onlyLikely) skips the names that
	// are known to be held and were not heard of: a pass after a timer
	// tries them all, in case a release went unheard.
	pass := func(onlyLikely bool) (*Lock, time.Duration, error) {
		passes++
		holderTTL := time.Duration(-1)
		// A wake-up that names no release (a broken connection) tries all.
		onlyLikely = shuffle() && onlyLikely
		now := c.cfg.now()
		for _, i := range order {
			if ctx.Err() != nil {
				break
			}
			if onlyLikely && rank[i] > 0 && now.Before(heldUntil[i]) {
				continue
			}
			l, after, err := try(i)
			if err == nil || err == ErrClosed || errors.Is(err, ErrWrongKind) {
				return l, 0, err
			}
			heldUntil[i] = time.Time{}
			if after >= 0 {
				heldUntil[i] = c.cfg.now().Add(after)
			}
			if after >= 0 && (holderTTL < 0 || after < holderTTL) {
				holderTTL = after
			}
		}
		if holderTTL < 0 {
			for _, t := range heldUntil {
				if d := t.Sub(now); !t.IsZero() && d > 0 && (holderTTL < 0 || d < holderTTL) {
					holderTTL = d
				}
			}
		}
		if last == nil {
			last = fmt.Errorf("redlock: obtain any: %w", ErrNotObtained)
		}
		return nil, holderTTL, last
	}
	done := func(err error) bool {
		return err == nil || err == ErrClosed || ctx.Err() != nil ||
			(o.retry.maxAttempts > 0 && passes >= o.retry.maxAttempts) ||
			errors.Is(err, ErrWrongKind) // waiting would not help
	}
	fail := func(err error) error {
		if err != nil && err != ErrClosed && ctx.Err() != nil {
			return errors.Join(err, ctxErr(ctx))
		}
		return err
	}

	if o.retry.maxAttempts == 1 {
		l, _, err := pass(false)
		return l, attempts, fail(err)
	}
	group := anyGroup(rkeys)
	var (
		lock      *Lock
		holderTTL = time.Duration(-1)
		err       = fmt.Errorf("redlock: obtain any: %w", ErrNotObtained)
	)
	// Fast path: unless others of this Client wait for these names, one
	// name at once, as Obtain's first attempt.
	if (c.notifyOff || !c.waits.anyQueued(group)) && ctx.Err() == nil {
		shuffle()
		lock, holderTTL, err = try(order[0])
		if err == nil || err == ErrClosed || errors.Is(err, ErrWrongKind) {
			return lock, attempts, err
		}
	}
	if ctx.Err() != nil {
		return nil, attempts, fail(err)
	}

	var wake <-chan struct{}
	if !c.notifyOff {
		q, m := c.waits.joinAny(group, rkeys)
		defer func() {
			if c.waits.leave(q, m) {
				c.unsubscribe(q)
			}
		}()
		if werr := c.waitTurn(ctx, names[0], o.id, m); werr != nil {
			return nil, attempts, errors.Join(err, werr)
		}
		// The head subscribes to every name before its first pass: from
		// the nodes' confirmation on, a release of any of them wakes it,
		// and the pass finds any release that came before.
		c.subscribe(ctx, q, c.cfg.nodeTimeoutFor(ttl))
		wake, heard = q.wake.C, q.wake
		byChannel = make(map[string]int, len(rkeys))
		for i, k := range rkeys {
			byChannel[keys.Channel(k)] = i
		}
		select {
		case <-wake: // meant for an earlier head
		default:
		}
		lock, holderTTL, err = pass(false)
		if done(err) {
			return lock, attempts, fail(err)
		}
	}
	for {
		why, werr := c.waitReleaseWhy(ctx, names[0], o.id, wake, backoff.next(), holderTTL)
		if werr != nil {
			return nil, attempts, errors.Join(err, werr)
		}
		select {
		case <-wake: // came since the wait ended: this pass covers it
		default:
		}
		lock, holderTTL, err = pass(why == WokenByRelease)
		if done(err) {
			return lock, attempts, fail(err)
		}
	}
}

// anyGroup is the key of ObtainAny's local queue for a set of lock keys:
// the same set in any order gives the same queue. It cannot collide with a
// lock key, which starts with '{'.
func anyGroup(rkeys []string) string {
	sorted := slices.Clone(rkeys)
	slices.Sort(sorted)
	return "any\x00" + strings.Join(sorted, "\x00")
}

// ownerGroup is the key of the local queue of a reentrant lock's owner:
// the owner's obtains of one lock key wait behind each other, never behind
// other owners' (see obtainLoop). It cannot collide with a lock key, which
// starts with '{', nor with anyGroup's.
func ownerGroup(key, owner string) string {
	return "owner\x00" + key + "\x00" + owner
}
