package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

// prepare checks an obtain before any I/O: the names, the TTL and the
// options; try makes one attempt whatever WithMaxAttempts says.
func (e *engine) prepare(r *request, ttl time.Duration, opts []ObtainOption, try bool) error {
	r.o = obtainConfig{retry: e.cfg.retry}
	for _, opt := range opts {
		if opt == nil {
			return invalid("nil obtain option")
		}
		opt.applyObtain(&r.o)
	}
	var err error
	if r.ttl, err = e.cfg.checkTTL(ttl); err != nil {
		return err
	}
	if err := r.o.validate(r.ttl, e.cfg.adaptive); err != nil {
		return err
	}
	if try {
		r.o.retry.maxAttempts = 1
	}
	switch {
	case len(r.names) == 0:
		return invalid("no lock names given")
	case len(r.names) > limits.MaxNames:
		return invalid("%d lock names given; at most %d", len(r.names), limits.MaxNames)
	}
	if len(r.names) == 1 {
		k, err := e.layout.redisKey(r.names[0])
		if err != nil {
			return err
		}
		r.oneKey[0] = k
		r.keys = r.oneKey[:]
		return nil
	}
	r.keys = make([]string, len(r.names))
	seen := make(map[string]int, len(r.names))
	for i, name := range r.names {
		k, err := e.layout.redisKey(name)
		if err != nil {
			return fmt.Errorf("redlock: name %d (%q): %w", i, name, err)
		}
		if j, dup := seen[name]; dup {
			return invalid("lock name %q given more than once (names %d and %d)", name, j, i)
		}
		seen[name] = i
		r.keys[i] = k
	}
	return nil
}

// obtain runs one obtain, reports it to the hook, and cleans up after one
// that gave up.
func (e *engine) obtain(ctx context.Context, r *request) (*Lock, error) {
	if r.spec.exclusive() {
		r.writerMark = newValue()
	}
	if !e.cfg.observed() {
		l, err := e.waitLoop(ctx, r)
		e.gaveUp(r, err)
		return l, err
	}
	start := e.cfg.now()
	r.id = obtainIDs.Add(1)
	l, err := e.waitLoop(ctx, r)
	e.gaveUp(r, err)
	if e.cfg.hook != nil {
		ev := ObtainEvent{LockInfo: LockInfo{Name: r.names[0], Kind: r.label}, ObtainID: r.id, Attempts: r.attempts, Elapsed: e.cfg.now().Sub(start),
			Err: err, TTL: r.lastTTL, TTLReason: r.why, Result: obtainResult(err)}
		if l != nil {
			ev.LockInfo, ev.Degraded = l.info(), l.Degraded()
			defer l.announce() // even if the hook panics
		}
		e.cfg.emit(ctx, ev)
	}
	return l, err
}

// gaveUp cleans up after an obtain that ended with err: an exclusive
// obtain of the family that did not get the lock withdraws the writer mark
// its refusals may have left, at once, so that readers do not wait for the
// mark's TTL behind a writer that is gone. The mark's TTL still bounds the
// mark of a writer that crashed.
func (e *engine) gaveUp(r *request, err error) {
	if err == nil || r.writerMark == "" || errors.Is(err, ErrInvalid) {
		return
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.reg.isClosed() {
		return
	}
	round := newRound[bool](&e.wiring, quorum.Count(len(e.nodes)), max(e.cfg.nodeTimeoutFor(r.ttl), minReleaseTimeout), quorum.WaitAll)
	round.Call = func(ctx context.Context, n *quorum.Node) (bool, error) {
		for _, k := range r.keys {
			if err := r.kind.withdraw(ctx, n.Conn, k, r.writerMark); err != nil {
				return false, err
			}
		}
		return true, nil
	}
	round.Agree = func(bool) bool { return true }
	round.Run(context.Background(), e.workers)
}

// attempt is one acquire attempt on candidate i: a round on the nodes, or,
// while the breaker is open, a request to the degraded mode's lease store
// (or the breaker's refusal). On failure it returns the shortest remaining
// TTL that the nodes reported for the current holder (-1 if none).
func (e *engine) attempt(ctx context.Context, r *request, i int) (*Lock, time.Duration, error) {
	e.life.RLock()
	defer e.life.RUnlock()
	if e.reg.isClosed() {
		return nil, -1, ErrClosed
	}
	ttl, why := e.ttlFor(r.keys[i], r.ttl, r.o.fixedTTL)
	r.lastTTL, r.why = ttl, why
	if e.adapt != nil {
		e.sampler.start()
	}
	timeout := e.cfg.nodeTimeoutFor(ttl)
	closings := e.brk.state.Closings()
	var (
		l         *Lock
		holderTTL time.Duration
		err       error
	)
	if berr := e.brk.refusal(ctx, timeout); berr == nil {
		if err := e.admit(ctx, timeout); err != nil {
			return nil, -1, err
		}
		r.attempts++
		l, holderTTL, err = e.acquire(ctx, r, i, ttl, timeout)
	} else if r.kind.degradable() && e.cfg.fallback != nil {
		r.attempts++
		l, holderTTL, err = e.acquireLease(ctx, r, i, ttl, timeout, closings)
	} else {
		return nil, -1, berr
	}
	if err != nil {
		return nil, holderTTL, err
	}
	var base time.Duration
	if e.adapt != nil && !r.o.fixedTTL {
		base = r.ttl // WithAdaptiveTTL picks each refresh's TTL from it
	}
	e.adopt(l, &r.o, base)
	return l, 0, nil
}
