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
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/reply"
	"github.com/redlock-go/redlock/internal/script"
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
		k, err := e.redisKey(r.names[0])
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
		k, err := e.redisKey(name)
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
		r.wait = newValue()
	}
	if !e.observed() {
		l, err := e.waitLoop(ctx, r)
		e.gaveUp(r, err)
		return l, err
	}
	start := time.Now()
	r.id = obtainIDs.Add(1)
	l, err := e.waitLoop(ctx, r)
	e.gaveUp(r, err)
	if e.cfg.hook != nil {
		ev := ObtainEvent{LockInfo: LockInfo{Name: r.names[0], Kind: r.label}, ObtainID: r.id, Attempts: r.attempts, Elapsed: time.Since(start),
			Err: err, TTL: r.lastTTL, TTLReason: r.why, Result: obtainResult(err)}
		if l != nil {
			ev.LockInfo, ev.Degraded = l.info(), l.Degraded()
			defer l.announce() // even if the hook panics
		}
		e.emit(ctx, ev)
	}
	return l, err
}

// gaveUp cleans up after an obtain that ended with err: an exclusive
// obtain of the family that did not get the lock withdraws the writer mark
// its refusals may have left, at once, so that readers do not wait for the
// mark's TTL behind a writer that is gone. The mark's TTL still bounds the
// mark of a writer that crashed.
func (e *engine) gaveUp(r *request, err error) {
	if err == nil || r.wait == "" || errors.Is(err, ErrInvalid) {
		return
	}
	e.life.RLock()
	defer e.life.RUnlock()
	if e.isClosed() {
		return
	}
	round := quorum.Round[bool]{
		Nodes:   e.nodes,
		Quorum:  quorum.Count(len(e.nodes)),
		Timeout: max(e.cfg.nodeTimeoutFor(r.ttl), minReleaseTimeout),
		Wait:    quorum.WaitAll,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			for _, k := range r.keys {
				if err := r.kind.withdraw(ctx, n.Conn, k, r.wait); err != nil {
					return false, err
				}
			}
			return true, nil
		},
		Agree: func(bool) bool { return true },
	}
	round.Run(context.Background(), e.workers)
}

// waitLoop is the one wait loop of every obtain, over one candidate name
// or several (Client.Any). It makes passes over the candidates until one
// is obtained, ctx ends or the passes of WithMaxAttempts are used up. The
// first pass is made at once, unless others of this Client wait for the
// same names, or a grace period holds this Client back; then the caller
// queues behind this Client's other waiters for the names (docs/waiting.md),
// and its turn waits on release notifications, the holders' TTL and a
// backoff. Every pass but the caller's first follows such a wait.
func (e *engine) waitLoop(ctx context.Context, r *request) (*Lock, error) {
	backoff := newBackoff(r.o.retry)
	var last error // the last pass's error, reported when ctx ends
	n := len(r.names)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	// heldUntil[i] is when candidate i's holder, as last seen, runs out:
	// it cannot be free before, unless released, and a release of it
	// wakes this waiter (its refusal marked it as waited for). Zero:
	// unknown.
	heldUntil := make([]time.Time, n)
	var heard *driver.Waiter // the queue's waiter, once joined
	// pass makes one attempt on each candidate, in the order of arrange,
	// until one is obtained. A pass after a release notification
	// (onlyLikely) skips the candidates known to be held that were not
	// heard of; a pass after a timer tries them all, in case a release
	// went unheard. It returns the soonest a holder runs out (-1 if none
	// is known).
	pass := func(onlyLikely bool) (*Lock, time.Duration, error) {
		if ctx.Err() != nil {
			if last == nil {
				last = ErrNotObtained
			}
			return nil, -1, last
		}
		if r.o.retry.maxAttempts == 0 && !(r.kind.degradable() && e.cfg.fallback != nil) {
			// The circuit breaker is open: wait for it to close. (With
			// WithMaxAttempts, each refusal uses up a pass instead.)
			if err := e.waitBreaker(ctx); err != nil {
				last = err
				return nil, -1, err
			}
		}
		r.passes++
		rank := e.arrange(r, order, heard)
		// A wake-up that names no release (a broken connection) tries all.
		onlyLikely = onlyLikely && slices.Contains(rank, 0)
		now := e.cfg.now()
		holderTTL := time.Duration(-1)
		for _, i := range order {
			if ctx.Err() != nil {
				break
			}
			if onlyLikely && rank[i] > 0 && now.Before(heldUntil[i]) {
				continue
			}
			l, after, err := e.attempt(ctx, r, i)
			if err == nil || err == ErrClosed || errors.Is(err, ErrWrongKind) || errors.Is(err, ErrConfigConflict) || errors.Is(err, errSameServer) {
				return l, 0, err
			}
			if refusedByBreaker(err) {
				last = err
				return nil, -1, err
			}
			last = err
			if n > 1 {
				last = fmt.Errorf("redlock: obtain any: none of %d names obtained; the last tried, %q: %w", n, r.names[i], err)
			}
			heldUntil[i] = time.Time{}
			if after >= 0 {
				heldUntil[i] = e.cfg.now().Add(after)
				if holderTTL < 0 || after < holderTTL {
					holderTTL = after
				}
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
			last = ErrNotObtained
		}
		return nil, holderTTL, last
	}
	done := func(err error) bool {
		return err == nil || err == ErrClosed || ctx.Err() != nil ||
			(r.o.retry.maxAttempts > 0 && r.passes >= r.o.retry.maxAttempts) ||
			errors.Is(err, ErrWrongKind) || errors.Is(err, ErrConfigConflict) || errors.Is(err, errSameServer) // waiting would not help
	}
	fail := func(err error) error {
		if err != nil && err != ErrClosed && ctx.Err() != nil {
			return errors.Join(err, ctxErr(ctx))
		}
		return err
	}

	group := r.spec.group(r.keys[0])
	if n > 1 {
		group = anyGroup(r.keys)
	}
	var (
		lock      *Lock
		holderTTL       = time.Duration(-1)
		err       error = ErrNotObtained
	)
	// Fast path: nobody here waits for these names, or the call makes a
	// single pass, which has no turn to wait for.
	if e.cfg.notifyOff || r.o.retry.maxAttempts == 1 || !e.waits.Queued(group) {
		if n == 1 {
			if until := e.waits.GraceUntil(r.keys[0], e.cfg.now()); !until.IsZero() {
				if serr := sleep(ctx, until.Sub(e.cfg.now())); serr != nil {
					return nil, errors.Join(ErrNotObtained, serr)
				}
			}
		}
		lock, holderTTL, err = pass(false)
		if done(err) {
			return lock, fail(err)
		}
	}

	var wake <-chan struct{}
	if !e.cfg.notifyOff {
		q, m := e.waits.Join(group, r.keys)
		defer func() {
			if e.waits.Leave(q, m) {
				e.unsubscribe(q)
			}
		}()
		if werr := e.waitTurn(ctx, r.names[0], r.id, m); werr != nil {
			return nil, errors.Join(err, werr)
		}
		// The head subscribes before its next pass: from the nodes'
		// confirmation on, every release wakes it.
		e.subscribe(ctx, q, e.cfg.nodeTimeoutFor(r.ttl))
		wake, heard = q.Wake.C, q.Wake
		select {
		case <-wake: // meant for an earlier head
		default:
		}
		if r.passes == 0 {
			// Queued before any pass: make the first now.
			lock, holderTTL, err = pass(false)
			if done(err) {
				return lock, fail(err)
			}
		} else {
			// A release since the caller's pass may have come before the
			// subscription, or while an earlier head had the queue's
			// wake-ups: no notification of it will come. Look for it
			// instead of attempting again, so that the next pass, the one
			// WithMaxAttempts counts, still follows a wait.
			holderTTL = e.lookForRelease(ctx, r, q.Wake, holderTTL)
		}
	}
	for {
		delay, more := backoff.next()
		if !more {
			return nil, err // the caller's strategy ends the retries
		}
		why, werr := e.waitRelease(ctx, r.names[0], r.id, wake, delay, holderTTL)
		if werr != nil {
			return nil, errors.Join(err, werr)
		}
		select {
		case <-wake: // came since the wait ended: this pass covers it
		default:
		}
		lock, holderTTL, err = pass(why == "release")
		if done(err) {
			return lock, fail(err)
		}
	}
}

// arrange orders the candidates of a pass, and ranks them: for several
// names, at random, but the names whose release woke this waiter first
// (rank 0: they are likely free), and a name in its grace period last
// (rank 2: this Client released it and others were notified: let their
// waiters have it). A single name needs no order; its rank is nil.
func (e *engine) arrange(r *request, order []int, heard *driver.Waiter) (rank []int) {
	if len(order) == 1 {
		return nil
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	rank = make([]int, len(order))
	for i, k := range r.keys {
		rank[i] = 1
		if !e.waits.GraceUntil(k, e.cfg.now()).IsZero() {
			rank[i] = 2
		}
	}
	if heard != nil {
		for _, ch := range heard.Heard() {
			if i := slices.IndexFunc(r.keys, func(k string) bool { return keys.Channel(k) == ch }); i >= 0 {
				rank[i] = 0
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return rank[a] - rank[b] })
	return rank
}

// attempt is one acquire attempt on candidate i: a round on the nodes, or,
// while the breaker is open, a request to the degraded mode's lease store
// (or the breaker's refusal). On failure it returns the shortest remaining
// TTL that the nodes reported for the current holder (-1 if none).
func (e *engine) attempt(ctx context.Context, r *request, i int) (*Lock, time.Duration, error) {
	e.life.RLock()
	defer e.life.RUnlock()
	if e.isClosed() {
		return nil, -1, ErrClosed
	}
	ttl, why := e.ttlFor(r.keys[i], r.ttl, r.o.fixedTTL)
	r.lastTTL, r.why = ttl, why
	if e.adapt != nil {
		e.startSampler()
	}
	timeout := e.cfg.nodeTimeoutFor(ttl)
	closings := e.brk.closings.Load()
	var (
		l         *Lock
		holderTTL time.Duration
		err       error
	)
	if berr := e.gate(ctx, timeout); berr == nil {
		if err := e.checkIdentity(ctx, timeout); err != nil {
			return nil, -1, err
		}
		if err := e.checkConfig(ctx, timeout); err != nil {
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
	if e.adapt != nil && !r.o.fixedTTL {
		l.base = r.ttl // WithAdaptiveTTL picks each refresh's TTL from it
	}
	if r.o.auto {
		l.keepAlive(l.obtainedAt, r.o.interval, r.o.maxHold)
	}
	e.register(l)
	l.schedule()
	return l, 0, nil
}

// acquire is one acquire round on the nodes for candidate i, and its
// second round when the token needs one. The caller holds e.life for
// reading.
func (e *engine) acquire(ctx context.Context, r *request, i int, ttl, timeout time.Duration) (*Lock, time.Duration, error) {
	l := e.newLock(r.names[i], r.keys[i], &r.spec, r.wait, ttl, timeout)
	start := e.cfg.now()
	validUntil := start.Add(e.cfg.validity(ttl))
	// The call of every node that is not a Redis Cluster: their keys and
	// guard are the same (the first such node's, if any).
	var plain script.Call
	if p := e.plainNode; p >= 0 {
		plain = l.kind.acquire(l.keys.on(e, p), &l.secret, ttl, e.guard(p))
	}
	round := quorum.Round[script.Acquired]{
		Nodes:   e.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.Acquired, error) {
			call := plain
			if n.Cluster {
				call = l.kind.acquire(l.keys.on(e, n.Index), &l.secret, ttl, e.guard(n.Index))
			}
			a, err := call.Acquire(ctx, n.Conn, e.cfg.ack)
			return a, kindError(err)
		},
		Agree:      script.Acquired.OK,
		Enough:     l.kind.enough(&l.secret, l.quorum),
		ValidUntil: validUntil,
		Settle: func(n *quorum.Node, a script.Acquired, err error, won, late bool) {
			// A failed attempt must not leave our key behind: release
			// where the node took it (replicated or not), or may have (no
			// definite answer). A won lock's late yes joins it, unless the
			// lock's release has begun and may have passed this node.
			if !won && (a.Status == script.Taken || ambiguous(err)) {
				l.releaseNode(n, timeout)
				return
			}
			l.settleAcquire(n, refreshed(a), err, late)
		},
	}
	res := round.Run(ctx, e.workers)
	if e.adapt != nil {
		observeRTT(e, res.Replies, timeout)
		if !res.Won && acquireRefused(res.Replies) {
			e.adapt.Refused(l.keys.key, time.Now())
		}
	}
	if !res.Won {
		qe := quorumError(e, l.quorum, "obtain", res, ErrNotObtained, e.disagreeAcquire)
		qe.Expired = l.quorum.Met(res.Yes)
		if e.observed() {
			e.attempted(ctx, l, r.id, start, res, false, qe, 0)
		}
		return nil, retryAfter(res.Replies), qe
	}
	l.obtained(start, validUntil, func(i int) bool { return res.Replies[i].Yes })
	if res.Pending != 0 {
		l.expectLate(res.Pending)
	}
	token, second := e.moveFloor(l.kind.token(res.Replies, l.quorum))
	var err error
	if second {
		err = e.raise(ctx, l, res.Replies, token, validUntil)
	}
	if e.observed() {
		e.attempted(ctx, l, r.id, start, res, second, err, token)
	}
	if err != nil {
		// The quorum holds our key but cannot be shown to hold a counter
		// as high as the token: give the lock back, which the caller
		// never had (no events: the AttemptEvent reported the failure).
		l.silent = true
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, -1, err
	}
	l.token = token // l is not shared yet
	return l, 0, nil
}

// raise is the second round of an acquire: it raises the lock's counter to
// token on every node (and records it as the owner's, for a lock of the
// family), and is won when a quorum of the first round's yes-voters
// confirmed before validUntil.
func (e *engine) raise(ctx context.Context, l *Lock, replies []quorum.Reply[script.Acquired], token int64, validUntil time.Time) error {
	// Only a node that voted yes in the first round counts: it holds our
	// key until validUntil, so any later acquire votes there after the
	// raise. Any other node may already have voted for a concurrent
	// acquirer whose round is still open, which would then be granted
	// after us with a lower token (docs/fencing.md, Lemma 2). The raise
	// still goes to every node, so that the counters converge. A node's
	// value is why it does not count: nil for a yes-voter, else its
	// first round's reason, which a QuorumError names.
	round := quorum.Round[error]{
		Nodes:   e.nodes,
		Quorum:  l.quorum,
		Timeout: l.nodeTimeout,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (error, error) {
			return e.firstRoundNo(replies[n.Index]), l.kind.raise(ctx, n.Conn, l.keys.on(e, n.Index), token, &l.secret, e.guard(n.Index))
		},
		Agree:      func(no error) bool { return no == nil },
		ValidUntil: validUntil,
	}
	res := round.Run(ctx, e.workers)
	if !res.Won {
		qe := quorumError(e, l.quorum, "obtain (fencing token)", res, ErrNotObtained, func(no error) error { return no })
		qe.Expired = l.quorum.Met(res.Yes)
		return qe
	}
	return nil
}

// firstRoundNo is nil when a node voted yes in an acquire's first round,
// else why it did not, which is why its confirmation does not count in
// the second round.
func (e *engine) firstRoundNo(r quorum.Reply[script.Acquired]) error {
	if r.Yes {
		return nil
	}
	err := r.Err
	if err == nil {
		err = e.disagreeAcquire(r.Val)
	}
	return fmt.Errorf("%w (in the first round: the fencing token's round counts only the nodes that voted for the lock)", err)
}

// attempted reports an attempt on the nodes to the hook and the logger.
func (e *engine) attempted(ctx context.Context, l *Lock, id uint64, start time.Time, res quorum.Result[script.Acquired], second bool, err error, token int64) {
	nodes := nodeResults(e, res, e.disagreeAcquire)
	e.logNodes(ctx, nodes)
	if e.cfg.hook != nil {
		obtained := err == nil && res.Won
		e.emit(ctx, AttemptEvent{Name: l.name, Kind: l.label, ObtainID: id, Obtained: obtained, Elapsed: e.cfg.now().Sub(start),
			Nodes: nodes, Token: token, SecondRound: second, Err: err, Result: attemptResult(obtained, err)})
	}
}

// refreshed maps an acquire reply to the refresh result it is equivalent to
// for clean-up: our key was set, or not.
func refreshed(a script.Acquired) script.RefreshResult {
	if a.Status == script.Taken {
		return script.Extended
	}
	return script.NotOwner
}

// disagreeAcquire is the per-node reason of an acquire's no.
func (e *engine) disagreeAcquire(a script.Acquired) error {
	switch {
	case a.Status == script.Recovering:
		return recoveringError(a.Recovering, e.cfg.maxTTL)
	case a.Unreplicated:
		return ErrNotReplicated
	}
	return ErrHeld
}

// recoveringError is the per-node reason of a node that is recovering, for
// another d (0 when unknown), told to a Client whose max TTL is own. The
// window is the epoch's start plus the largest max TTL recorded in the
// node's epoch record (epoch.lua), which may be another Client's: a window
// longer than own says so, for the error must name its real source.
func recoveringError(d, own time.Duration) error {
	left := "for a while"
	if d > 0 {
		left = "for another " + d.Round(time.Millisecond).String()
	}
	if d > own {
		return fmt.Errorf("%w after a restart or failover: it takes no part in locking %s, until every lock it may have forgotten has expired. "+
			"That window comes from the node's epoch record, which holds a max TTL of at least %v, sent by a Client of this prefix with a larger WithMaxTTL than this Client's %v; "+
			"\"redlock doctor\" reports it, and docs/fencing.md (\"A recovery window longer than the max TTL\") says how to lower it and when that is safe",
			ErrNodeRecovering, left, d.Truncate(time.Second), own)
	}
	return fmt.Errorf("%w after a restart or failover: it takes no part in locking %s, until every lock it may have forgotten has expired (the window is the largest WithMaxTTL recorded in the node's epoch record since it restarted; see docs/fencing.md)", ErrNodeRecovering, left)
}

// kindError marks a node's REDLOCK_KIND or REDLOCK_PERMITS error reply with
// ErrWrongKind, keeping the reply in the chain (it is a definite answer, not
// an ambiguous failure).
func kindError(err error) error {
	if reply.HasPrefix(err, "REDLOCK_KIND") || reply.HasPrefix(err, "REDLOCK_PERMITS") {
		return fmt.Errorf("%w: %w", ErrWrongKind, err)
	}
	return err
}

// retryAfter is the soonest a failed attempt's nodes said things may change:
// the shortest remaining TTL of the holder, or of a node's recovery (-1 if
// no node said).
func retryAfter(replies []quorum.Reply[script.Acquired]) time.Duration {
	after := time.Duration(-1)
	for _, r := range replies {
		if r.Err != nil {
			continue
		}
		d := time.Duration(-1)
		switch r.Val.Status {
		case script.Held:
			d = r.Val.HolderTTL
		case script.Recovering:
			d = r.Val.Recovering
		}
		if d >= 0 && (after < 0 || d < after) {
			after = d
		}
	}
	return after
}

// acquireRefused reports whether an acquire round met another owner.
func acquireRefused(replies []quorum.Reply[script.Acquired]) bool {
	for _, r := range replies {
		if r.Err == nil && r.Val.Status == script.Held {
			return true
		}
	}
	return false
}
