package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/adaptive"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/nodelog"
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
		var fold *folded
		if fold, err = e.admit(ctx, timeout, true); err != nil {
			return nil, -1, err
		}
		r.attempts++
		l, holderTTL, err = e.acquire(ctx, r, i, ttl, timeout, fold)
		if errors.Is(err, errRecordFirst) {
			// The first record, folded into that acquire, called for
			// writes: made, and the acquire made again after them.
			if _, err := e.admit(ctx, timeout, true); err != nil {
				return nil, -1, err
			}
			l, holderTTL, err = e.acquire(ctx, r, i, ttl, timeout, nil)
		}
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

// adopt makes a lock just obtained (engine.attempt, on the nodes or from
// the lease store) or resumed (Client.Resume) the Client's, before it is
// shared: the one tail of both. base is the TTL from which WithAdaptiveTTL
// picks each refresh's TTL (0: every refresh asks for the lock's TTL, as
// a resumed lock's do); o's keep-alive options turn on its automatic
// refresh; the registry that Close releases takes it; and its first event
// (refresh or loss deadline) is scheduled when it is watched.
func (e *engine) adopt(l *Lock, o *obtainConfig, base time.Duration) {
	l.base = base
	if o.auto {
		l.keepAlive(o.interval, o.maxHold)
	}
	e.reg.add(l)
	l.schedule()
}

// waitLoop is the one wait loop of every obtain: it runs a waiter.
func (e *engine) waitLoop(ctx context.Context, r *request) (*Lock, error) {
	n := len(r.names)
	w := waiter{e: e, ctx: ctx, r: r, backoff: newBackoff(r.o.retry), holderTTL: -1,
		order: r.orderBuf[:0], heldUntil: r.heldBuf[:0]}
	w.order = slices.Grow(w.order, n)[:n]
	w.heldUntil = slices.Grow(w.heldUntil, n)[:n]
	for i := range w.order {
		w.order[i] = i
	}
	return w.run()
}

// obtainAll obtains the plain locks named names as one lock, all or
// nothing (Client.All): it sorts the names and obtains them one after the
// other in that order with the machinery of a single name's obtain,
// waiting for each while it holds the ones before it, which it keeps alive
// meanwhile. Because every multi-name obtain takes its names in the same
// order, and a single-name waiter holds nothing, no two obtains can wait
// for each other in a cycle (docs/lock-family.md, "Multi-name locks").
func (e *engine) obtainAll(ctx context.Context, names []string, ttl time.Duration, opts []ObtainOption, try bool) (*Lock, error) {
	// Check every name and option before any I/O, as Client.Any's would.
	check := request{names: names, spec: &plainSpec}
	if err := e.prepare(&check, ttl, opts, try); err != nil {
		return nil, err
	}
	if e.reg.isClosed() {
		return nil, ErrClosed
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	auto := check.o.auto
	// Every lock but the last is held while the next ones are waited
	// for: keep it alive meanwhile, and stop waiting when it ends.
	keep := opts
	if !auto && !try {
		keep = append(opts[:len(opts):len(opts)], WithAutoRefresh())
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	parts := make([]*Lock, 0, len(sorted))
	for i, name := range sorted {
		o := keep
		if i == len(sorted)-1 {
			o = opts
		}
		r := request{names: []string{name}, spec: &plainSpec}
		err := e.prepare(&r, ttl, o, try)
		var l *Lock
		if err == nil {
			l, err = e.obtain(wctx, &r)
		}
		if err != nil {
			close(stop)
			watchers.Wait()
			releaseAll(parts)
			return nil, e.allFailed(ctx, wctx, name, err)
		}
		parts = append(parts, l)
		if !try && i < len(sorted)-1 {
			watchers.Go(func() {
				select {
				case <-l.Done():
					cancel(&lostWhileWaiting{name: name, err: l.Err()})
				case <-stop:
				}
			})
		}
	}
	close(stop)
	watchers.Wait()
	// A lock may have ended while the last one was obtained, unseen by
	// its watcher: the lock would be born broken.
	for _, l := range parts {
		if lerr := l.Err(); lerr != nil {
			releaseAll(parts)
			if e.reg.isClosed() {
				return nil, fmt.Errorf("redlock: obtain all: %w", ErrClosed)
			}
			return nil, fmt.Errorf("redlock: obtain all: lock %q ended while the others were obtained: %w", l.Name(), errors.Join(ErrNotObtained, lerr))
		}
	}
	if !auto && !try {
		for _, l := range parts[:len(parts)-1] {
			l.keepAliveOff()
		}
	}
	// One allocation for the Lock and its parts.
	both := &struct {
		Lock
		allOf
	}{Lock{e: e, sp: &plainSpec}, allOf{parts: parts, done: firstDone(parts)}}
	both.Lock.all = &both.allOf
	return &both.Lock, nil
}

// allFailed is the error of Client.All's obtain when the obtain of name
// failed with err; wctx is the context of that obtain, derived from ctx and
// cancelled when a lock already held ended.
func (e *engine) allFailed(ctx, wctx context.Context, name string, err error) error {
	lost, _ := context.Cause(wctx).(*lostWhileWaiting)
	switch {
	case e.reg.isClosed():
		// Close released the locks already held, which ended the wait.
		return fmt.Errorf("redlock: obtain all: %q: %w", name, ErrClosed)
	case lost != nil && ctx.Err() == nil:
		return fmt.Errorf("redlock: obtain all: lock %q ended while waiting for %q: %w", lost.name, name, errors.Join(ErrNotObtained, lost.err))
	}
	return fmt.Errorf("redlock: obtain all: %q: %w", name, err)
}

// ttlFor is the TTL of an attempt or refresh of the lock key whose caller
// gave base, and why (ObtainEvent.TTLReason); base has passed checkTTL.
func (e *engine) ttlFor(key string, base time.Duration, fixed bool) (time.Duration, string) {
	if e.adapt == nil || fixed {
		return base, adaptive.Given
	}
	now := e.cfg.now()
	ttl, why, atMax := e.adapt.Choose(key, base, e.waits.queues.Waiting(key), now)
	if l := e.cfg.logger; l != nil && atMax > 0 && e.log.limit.Due(-1, nodelog.RTTAtMax, now) {
		l.LogAttrs(context.Background(), slog.LevelWarn,
			"redlock: adaptive TTL capped at Max although the nodes' round-trip time asks for more: validity margins are thinner than RTTMultiple",
			slog.Duration("rtt_p95", atMax), slog.Float64("wanted_seconds", e.cfg.adaptive.RTTMultiple*atMax.Seconds()), slog.Duration("max", e.cfg.adaptive.Max))
	}
	return ttl, why
}
