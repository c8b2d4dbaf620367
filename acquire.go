package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/nodelog"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/reply"
	"github.com/redlock-go/redlock/internal/script"
)

// An acquire round on the nodes, from the admission that precedes it to
// the vote's decision: its second round (raise), the report of the attempt,
// and the per-node reasons of a no.

// admit is asked before every round that can make this Client a holder
// on the nodes, whatever the path (an obtain's acquire, Resume's claim):
// the check that no two nodes are one server, and the configuration
// records, which record that this Client may hold locks and return
// ErrConfigConflict while the records show a Client it must not lock
// beside (docs/reconfiguration.md: every holder takes part in the
// records, issue 44's finding F). folds says the round is an acquire's,
// which reads the identity of a node not yet identified itself
// (acquireOn). The caller holds e.life for reading.
func (e *engine) admit(ctx context.Context, timeout time.Duration, folds bool) (*folded, error) {
	if err := e.ident.check(ctx, timeout, folds); err != nil {
		return nil, err
	}
	return e.rec.check(ctx, timeout, folds)
}

// acquire is one acquire round on the nodes for candidate i, and its
// second round when the token needs one. The caller holds e.life for
// reading.
func (e *engine) acquire(ctx context.Context, r *request, i int, ttl, timeout time.Duration, fold *folded) (*Lock, time.Duration, error) {
	l := e.newLock(r.keys[i], r.spec, r.writerMark, ttl, timeout)
	start := e.cfg.now()
	validUntil := start.Add(e.cfg.validity(ttl))
	// The call of every node that is not a Redis Cluster: their keys and
	// guard are the same (the first such node's, if any), but for the
	// node's identity (script.Call.ForNode).
	var unsharded script.Call
	fence := l.keys.fence()
	if p := e.layout.plainNode; p >= 0 {
		unsharded = l.sp.kind.acquire(l.keys.fenced(e, p, fence), &l.secret, ttl, e.ident.guard(p))
	}
	round := newRound[script.Acquired](&e.wiring, *l.quorum, timeout, quorum.Early)
	round.Call = func(ctx context.Context, n *quorum.Node) (script.Acquired, error) {
		call := unsharded.ForNode(e.ident.guard(n.Index))
		if n.Cluster {
			call = l.sp.kind.acquire(l.keys.fenced(e, n.Index, fence), &l.secret, ttl, e.ident.guard(n.Index))
		}
		return e.acquireOn(ctx, n, call, fold)
	}
	round.Agree = script.Acquired.OK
	round.Enough = l.sp.kind.enough(&l.secret, *l.quorum)
	round.ValidUntil = validUntil
	round.Settle = func(n *quorum.Node, a script.Acquired, err error, won, late bool) {
		// A failed attempt must not leave our key behind: release
		// where the node took it (replicated or not), or may have (no
		// definite answer). A won lock's late yes joins it, unless the
		// lock's release has begun and may have passed this node.
		if !won && (a.Status == script.Taken || ambiguous(err)) {
			l.releaseNode(n, timeout)
			return
		}
		l.settleAcquire(n, asRefresh(a), err, late)
	}
	reads := e.ident.firstReads()
	res := round.Run(ctx, e.workers)
	refused := e.rec.endFold(ctx, fold, timeout, awaitReads(ctx, &e.ident, reads, res))
	if e.adapt != nil {
		observeRTT(e, res.Replies, timeout)
		if !res.Won && acquireRefused(res.Replies) {
			e.adapt.Refused(l.keys.key, e.cfg.now())
		}
	}
	if !res.Won && refused == nil {
		qe := quorumError(e, *l.quorum, "obtain", res, ErrNotObtained, e.disagreeAcquire)
		qe.Expired = l.quorum.Met(res.Yes)
		if e.cfg.observed() {
			e.attempted(ctx, l, r.id, start, res, false, qe, 0)
		}
		return nil, retryAfter(res.Replies), qe
	}
	var token int64
	second, err := false, refused
	if res.Won {
		l.obtained(start, validUntil, func(i int) bool { return res.Replies[i].Yes }, res.Pending)
	}
	if err == nil {
		token, second = e.rec.moveFloor(l.sp.kind.token(res.Replies, *l.quorum))
		if second {
			err = e.raise(ctx, l, res.Replies, token, validUntil)
		}
	}
	if e.cfg.observed() {
		e.attempted(ctx, l, r.id, start, res, second, err, token)
	}
	if err != nil {
		// No counter as high as the token shown on a quorum, or one
		// server given twice (refused: acquireOn): give the lock back,
		// which the caller never had (no events: the AttemptEvent
		// reported the failure).
		if res.Won {
			l.silent = true
			_ = l.Release(context.WithoutCancel(ctx))
		}
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
	fence := l.keys.fence()
	round := newRound[error](&e.wiring, *l.quorum, l.nodeTimeout, quorum.Early)
	round.Call = func(ctx context.Context, n *quorum.Node) (error, error) {
		return e.firstRoundNo(replies[n.Index]), l.sp.kind.raise(ctx, n.Conn, l.keys.fenced(e, n.Index, fence), token, &l.secret, e.ident.guard(n.Index))
	}
	round.Agree = func(no error) bool { return no == nil }
	round.ValidUntil = validUntil
	res := round.Run(ctx, e.workers)
	if !res.Won {
		qe := quorumError(e, *l.quorum, "obtain (fencing token)", res, ErrNotObtained, func(no error) error { return no })
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
	e.log.nodes(ctx, nodes)
	if e.cfg.hook != nil {
		obtained := err == nil && res.Won
		e.cfg.emit(ctx, AttemptEvent{Name: l.Name(), Kind: l.sp.label, ObtainID: id, Obtained: obtained, Elapsed: e.cfg.now().Sub(start),
			Nodes: nodes, Token: token, SecondRound: second, Err: err, Result: attemptResult(obtained, err)})
	}
}

// asRefresh maps an acquire reply to the refresh result it is equivalent to
// for clean-up: our key was set, or not.
func asRefresh(a script.Acquired) script.RefreshResult {
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

// acquireOn sends an acquire's call to node n. A node that refuses it as
// another node's (its identity changed: its data lost) is identified at
// once, and sent the acquire once more if the identity is one node's
// alone (identities.now).
func (e *engine) acquireOn(ctx context.Context, n *quorum.Node, call script.Call, fold *folded) (script.Acquired, error) {
	if fold != nil {
		return e.rec.acquireRecorded(ctx, n, call, e.cfg.ack, fold)
	}
	if e.ident.readsIdentity(n.Index) {
		a, id, idErr, err := call.AcquireIdentified(ctx, n.Conn, e.cfg.ack, keys.Layout{Prefix: e.cfg.prefix}.NodeID())
		if serr := e.ident.learnRead(n.Index, id, idErr); serr != nil {
			// Not a vote: this server, or another of the set, is given
			// twice. The reply still says what the script did here, for
			// the round's clean-up.
			return a, serr
		}
		if script.IsOtherNode(err) && idErr == nil && id.ID != "" {
			// Refused under the identity a refusal made the Client doubt
			// (identities.refused): the pipeline read the new one, which
			// no other node holds; sent once more with it, as now does.
			a, err = call.ForNode(e.ident.guard(n.Index)).Acquire(ctx, n.Conn, e.cfg.ack)
		}
		return a, kindError(err)
	}
	a, err := call.Acquire(ctx, n.Conn, e.cfg.ack)
	if script.IsOtherNode(err) {
		if g, ok := e.ident.now(ctx, n.Index); ok {
			a, err = call.ForNode(g).Acquire(ctx, n.Conn, e.cfg.ack)
		}
	}
	return a, kindError(err)
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

// acquireLease is an acquire attempt on the lease store, made instead of a
// round on the nodes while the breaker is open. closings is the breaker's
// count of closings read before the breaker found it open. The caller holds
// e.life for reading.
func (e *engine) acquireLease(ctx context.Context, r *request, i int, ttl, timeout time.Duration, closings uint64) (*Lock, time.Duration, error) {
	store := e.cfg.fallback
	l := e.newLock(r.keys[i], r.spec, r.writerMark, ttl, timeout)
	lh := &leaseHold{store: store, name: e.cfg.prefix + r.names[i], closings: closings}
	l.lease = lh
	value := l.secret.id
	start := e.cfg.now()
	validUntil := start.Add(e.cfg.validity(ttl))
	// Like a round's requests, the store's is not abandoned when ctx ends,
	// so that its outcome is known.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	lease, err := store.Acquire(sctx, lh.name, value, ttl)
	cancel()
	holderTTL := time.Duration(-1)
	switch {
	case err != nil:
		// It may have taken effect: give it back.
		_, _ = releaseLease(store, lh.name, value, 0, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode, circuit breaker open): lease store: %w: %w", ErrNotObtained, err)
	case !lease.Acquired:
		holderTTL = lease.Remaining
		left := ""
		if lease.Remaining >= 0 {
			left = " for another " + lease.Remaining.Round(time.Millisecond).String()
		}
		err = fmt.Errorf("redlock: obtain (degraded mode, circuit breaker open): the lease store says another owner holds it%s: %w (%w)", left, ErrNotObtained, ErrHeld)
	case lease.Version < 1 || lease.Version >= limits.MaxLeaseVersion:
		_, _ = releaseLease(store, lh.name, value, lease.Version, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode): the lease store returned version %d, outside [1, 2^62): %w", lease.Version, ErrNotObtained)
	case !e.cfg.now().Before(validUntil.Add(-timeout)):
		_, _ = releaseLease(store, lh.name, value, lease.Version, timeout)
		err = fmt.Errorf("redlock: obtain (degraded mode): the lease store answered after the lock's validity: %w", ErrNotObtained)
	}
	if err != nil {
		e.attemptedDegraded(ctx, l, r.id, start, err)
		return nil, holderTTL, err
	}
	lh.version = lease.Version
	// Below every token of the nodes, which are positive; ordered among
	// the degraded holders of one store by the lease's version.
	l.token = degradedTokenBase + lease.Version
	l.obtained(start, validUntil, func(int) bool { return false }, 0)
	e.attemptedDegraded(ctx, l, r.id, start, nil)
	if lg := e.cfg.logger; lg != nil && e.log.limit.Due(-1, nodelog.Degraded, e.cfg.now()) {
		lg.LogAttrs(ctx, slog.LevelWarn, "redlock: degraded mode: lock obtained from the lease store, not from a quorum of nodes; it excludes only clients that fell back to the same store",
			slog.String("name", l.Name()), slog.Int64("token", l.token))
	}
	return l, 0, nil
}

// attemptedDegraded reports an attempt on the lease store to the hook: an
// AttemptEvent without nodes.
func (e *engine) attemptedDegraded(ctx context.Context, l *Lock, id uint64, start time.Time, err error) {
	if e.cfg.hook == nil {
		return
	}
	ev := AttemptEvent{Name: l.Name(), Kind: l.sp.label, ObtainID: id, Obtained: err == nil, Degraded: true,
		Elapsed: e.cfg.now().Sub(start), Err: err, Result: attemptResult(err == nil, err)}
	if err == nil {
		ev.Token = l.token
	}
	e.cfg.emit(ctx, ev)
}

// sharedRule is rule(sp), shared by the locks that have it (nearly every
// lock of the Client has the same), so that a held lock keeps a pointer to
// it rather than a copy: the rule of the last lock made is reused when it
// is the same, else a new one is made and kept.
func (e *engine) sharedRule(sp *spec) *quorum.Rule {
	r := e.sets.rule(sp)
	if p := e.lastRule.Load(); p != nil && *p == r {
		return p
	}
	p := new(quorum.Rule) // not &r, which would move r to the heap on every call
	*p = r
	e.lastRule.Store(p)
	return p
}

// newLock is a lock of the spec's kind about to be acquired under its key
// (redisKey of its name), with a new secret made from the spec's prototype hold.
// The lock keeps the key only, from which Name reads the name back.
// A lock of a kind of holds is one allocation with its hold, as when every
// Lock had room for one.
func (e *engine) newLock(key string, sp *spec, writerMark string, ttl, nodeTimeout time.Duration) *Lock {
	var l *Lock
	var hold *script.Hold
	if sp.hasHold() {
		both := new(struct {
			Lock
			hold script.Hold
		})
		l, hold = &both.Lock, &both.hold
	} else {
		l = new(Lock)
	}
	l.e, l.sp, l.keys, l.quorum = e, sp, e.layout.keysOf(key), e.sharedRule(sp)
	l.origin, l.ttl, l.nodeTimeout = &e.origin, ttl, nodeTimeout
	l.secret = sp.newSecret(key, newValue(), writerMark, hold)
	l.ka.Value = l
	return l
}
