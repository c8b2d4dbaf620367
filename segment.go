package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Segmented locks: one hot resource split into segments, each guarded by a
// lock of its own, and an obtain that takes any free segment.

// ObtainAny obtains one of the locks named names, whichever is free, for
// ttl: a segmented lock, where one hot resource (a stock of items, a pool
// of slots) is split into segments that the application keeps apart, each
// guarded by its own name, so that up to len(names) holders work at once.
//
// One attempt, as WithMaxAttempts counts them, is a pass over the names in
// a random order (a new one each pass, so that callers spread over the
// segments), trying each name once as TryObtain would, until one is
// obtained. When no name was obtained, ObtainAny waits on all of them at
// once, like Obtain waits on one: a release of any of the names wakes it
// (through release notifications, or the key found gone on a quorum when it
// has just subscribed), and it never sleeps past the shortest remaining TTL
// a node reported, nor past the backoff of WithRetryDelay. Goroutines of one
// Client that call ObtainAny with the same set of names queue first come,
// first served, as Obtain's waiters do; only the head of the queue makes
// attempts.
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
	if !c.observed() {
		l, _, err := c.anyLoop(ctx, names, rkeys, ttl, &o)
		return l, err
	}
	start := time.Now()
	o.id = obtainIDs.Add(1)
	l, attempts, err := c.anyLoop(ctx, names, rkeys, ttl, &o)
	if h := c.cfg.hook; h != nil {
		ev := ObtainEvent{Key: names[0], Kind: o.kind, ObtainID: o.id, Attempts: attempts, Elapsed: time.Since(start), Err: err}
		if l != nil {
			ev.Key, ev.Token = l.name, l.token
		}
		h.Obtain(ctx, ev)
	}
	return l, err
}

// anyLoop is obtainLoop for several names: it makes passes over the names
// until one is obtained, ctx ends or the passes are used up, and waits for
// a release of any of them between passes, in this Client's queue for the
// set of names. It returns the lock, the number of acquire attempts (one
// per name tried) and the error.
func (c *Client) anyLoop(ctx context.Context, names, rkeys []string, ttl time.Duration, o *obtainConfig) (*Lock, int, error) {
	backoff := newBackoff(o.retry)
	attempts, passes := 0, 0
	var last error // the last refusal, reported when none was obtained
	order := make([]int, len(names))
	inGrace := make([]bool, len(names))
	pass := func() (*Lock, time.Duration, error) {
		passes++
		holderTTL := time.Duration(-1)
		for i := range order {
			order[i] = i
		}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// A name in its grace period (this Client released it and others
		// were notified) comes last: let their waiters have it first.
		for i, k := range rkeys {
			inGrace[i] = !c.waits.graceUntil(k, c.cfg.now).IsZero()
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case inGrace[a] == inGrace[b]:
				return 0
			case inGrace[b]:
				return -1
			}
			return 1
		})
		for _, i := range order {
			if ctx.Err() != nil {
				break
			}
			attempts++
			l, after, err := c.attempt(ctx, names[i], rkeys[i], ttl, o)
			if err == nil {
				return l, 0, nil
			}
			if err == ErrClosed || errors.Is(err, ErrWrongKind) {
				return nil, -1, err
			}
			last = fmt.Errorf("redlock: obtain any: none of %d names obtained; the last, %q: %w", len(names), names[i], err)
			if after >= 0 && (holderTTL < 0 || after < holderTTL) {
				holderTTL = after
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
			errors.Is(err, ErrWrongKind)
	}
	fail := func(err error) error {
		if err == ErrClosed {
			return err
		}
		if err != nil && ctx.Err() != nil {
			return errors.Join(err, ctxErr(ctx))
		}
		return err
	}

	group := anyGroup(rkeys)
	var (
		lock      *Lock
		holderTTL time.Duration
		err       error
	)
	// Fast path: nobody here waits for these names, or the call makes a
	// single pass, which has no turn to wait for.
	if !c.notifyOff && o.retry.maxAttempts != 1 && c.waits.anyQueued(group) {
		err = fmt.Errorf("redlock: obtain any: %w", ErrNotObtained)
	} else {
		lock, holderTTL, err = pass()
		if done(err) {
			return lock, attempts, fail(err)
		}
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
		// The head subscribes to every name before its next pass: from
		// the nodes' confirmation on, a release of any of them wakes it.
		c.subscribe(ctx, q, c.cfg.nodeTimeoutFor(ttl))
		wake = q.wake.C
		select {
		case <-wake: // meant for an earlier head
		default:
		}
		if passes == 0 {
			lock, holderTTL, err = pass()
			if done(err) {
				return lock, attempts, fail(err)
			}
		} else {
			// A release since the last pass may have come before the
			// subscription: look for one on every name.
			holderTTL = c.lookForReleaseAny(ctx, rkeys, ttl, q, holderTTL)
		}
	}
	for {
		if werr := c.waitRelease(ctx, names[0], o.id, wake, backoff.next(), holderTTL); werr != nil {
			return nil, attempts, errors.Join(err, werr)
		}
		select {
		case <-wake: // came since the wait ended: this pass covers it
		default:
		}
		lock, holderTTL, err = pass()
		if done(err) {
			return lock, attempts, fail(err)
		}
	}
}

// lookForReleaseAny is lookForRelease on each of rkeys, a few at a time:
// it wakes q's head when any of the locks is gone from enough nodes for an
// attempt to win, and returns the shortest remaining TTL reported for any
// holder (holderTTL when none was).
func (c *Client) lookForReleaseAny(ctx context.Context, rkeys []string, ttl time.Duration, q *waitQueue, holderTTL time.Duration) time.Duration {
	const parallel = 16
	var (
		mu       sync.Mutex
		shortest = time.Duration(-1)
		wg       sync.WaitGroup
		sem      = make(chan struct{}, parallel)
	)
	for _, k := range rkeys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d := c.lookForRelease(ctx, k, ttl, q.wake, -1)
			if d < 0 {
				return
			}
			mu.Lock()
			if shortest < 0 || d < shortest {
				shortest = d
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	if shortest < 0 {
		return holderTTL
	}
	return shortest
}

// anyGroup is the key of ObtainAny's local queue for a set of lock keys:
// the same set in any order gives the same queue. It cannot collide with a
// lock key, which starts with '{'.
func anyGroup(rkeys []string) string {
	sorted := slices.Clone(rkeys)
	slices.Sort(sorted)
	return "any\x00" + strings.Join(sorted, "\x00")
}
