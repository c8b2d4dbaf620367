package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// A lock's refresh, manual (Lock.Refresh) and automatic (the keep-alive's
// batch), from the handle to the round on the nodes, and the one rule that
// decides from a round's replies that the lock is no longer ours
// (certainlyNotOurs, which Release asks too).

// refreshPlan is one lock of an automatic refresh: the TTL it asks for and
// why, its per-node timeout, and its validity before (and after: newValid).
// A batch holds one per lock, thousands at a time.
type refreshPlan struct {
	l        *Lock
	ttl      time.Duration
	why      string
	timeout  time.Duration
	oldValid time.Time
}

// newValid is the validity of the plan's refresh if it wins, sent at start.
func (p *refreshPlan) newValid(start time.Time) time.Time {
	return start.Add(p.l.e.cfg.validity(p.ttl))
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
	ttl, err := l.e.cfg.checkTTL(ttl)
	if err != nil {
		return err
	}
	if l.all != nil {
		return l.all.refresh(ctx, ttl)
	}
	// Rounds until one is decided, ctx ends or the lock passes its loss
	// deadline (retryRefresh).
	e := l.e
	round := func() error {
		l.op.Lock()
		defer l.op.Unlock()
		ttl, why := l.adaptTTL(ttl)
		e.life.RLock()
		defer e.life.RUnlock()
		if e.reg.isClosed() {
			return ErrClosed
		}
		start := e.cfg.now()
		if err := l.check(start); err != nil {
			return err
		}
		return l.backend().refresh(ctx, l, start, ttl, why, false)
	}
	return retryRefresh(ctx, e.cfg.retry, round, func() time.Duration {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lossDeadline().Sub(e.cfg.now())
	})
}

// retryRefresh runs the rounds of a manual Refresh: round until it wins
// or fails for good (refreshEnds), ctx ends, or the backoff's strategy
// ends the retries; each wait is cut at the time left before the lock's
// loss deadline (left). It returns the last round's error, joined with
// ctx's when ctx ended.
func retryRefresh(ctx context.Context, retry retryConfig, round func() error, left func() time.Duration) error {
	backoff := newBackoff(retry)
	for {
		err := round()
		if refreshEnds(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctxErr(ctx))
		}
		// Wait, but not past the moment from which no round could be
		// confirmed in time: the next round then ends the lock.
		until := left()
		delay, more := backoff.next()
		if !more {
			return err // the caller's strategy ends the retries
		}
		if serr := sleep(ctx, max(0, min(delay, until))); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// refreshEnds reports whether a refresh round's outcome ends a manual
// Refresh: it won, or waiting would not help (the Client is closed, the
// lock is not held, or a degraded lock may not be extended).
func refreshEnds(err error) bool {
	return err == nil || err == ErrClosed || errors.Is(err, ErrNotHeld) || errors.Is(err, ErrDegraded)
}

// refreshBatch refreshes many locks at once, each by its backend: the
// nodes' in one pipeline per node and a quorum decision per lock.
func (e *engine) refreshBatch(batch []*Lock) {
	// A lock whose Release or manual Refresh (or a refresh of an earlier
	// batch) is under way is skipped, and looked at again a per-node
	// timeout later, by which time that operation has rescheduled it or
	// ended it: its refresh time, already past, would fire again at once.
	// Each lock taken here is unlocked by its backend when its refresh is
	// done.
	start := e.cfg.now()
	var byBackend map[backend][]refreshPlan
	for _, l := range batch {
		if !l.op.TryLock() {
			l.refreshLater(start)
			continue
		}
		ttl, why, old, ok := l.nextRefresh(start)
		if !ok {
			l.op.Unlock()
			l.schedule()
			continue
		}
		if byBackend == nil {
			byBackend = make(map[backend][]refreshPlan, 1)
		}
		b := l.backend()
		plans := byBackend[b]
		if plans == nil {
			plans = make([]refreshPlan, 0, len(batch))
		}
		t := e.cfg.nodeTimeoutFor(ttl)
		byBackend[b] = append(plans, refreshPlan{l: l, ttl: ttl, why: why, timeout: t, oldValid: old})
	}
	for b, plans := range byBackend {
		b.refreshBatch(start, plans)
	}
}

func (nodeBackend) refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error {
	e := l.e
	l.mu.Lock()
	validUntil := l.validUntil()
	l.mu.Unlock()
	timeout := e.cfg.nodeTimeoutFor(ttl)
	e.ident.again(timeout)
	newValid := start.Add(e.cfg.validity(ttl))
	fence := l.keys.fence()
	round := newRound[script.RefreshResult](&e.wiring, *l.quorum, timeout, quorum.Early)
	round.Call = func(ctx context.Context, n *quorum.Node) (script.RefreshResult, error) {
		return l.sp.kind.refresh(l.keys.fenced(e, n.Index, fence), &l.secret, l.token, ttl).Run(ctx, n.Conn, e.ident.guard(n.Index))
	}
	round.Agree = script.RefreshResult.Agrees
	round.Settle = func(n *quorum.Node, r script.RefreshResult, err error, _, late bool) {
		l.settleLate(n, r, err, late)
	}
	round.ValidUntil = minTime(validUntil, newValid)
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
	refusedBy := certainlyNotOurs(l, res.Replies, func(r script.RefreshResult) bool { return r == script.NotOwner || r == script.Retired }, everyNode)
	yes := func(i int) bool { return res.Replies[i].Yes }
	err := l.applyRefresh(start, ttl, timeout, newValid, res.Won, refusedBy, yes)
	if err == nil && !res.Won {
		var sentinel error
		if l.Err() != nil {
			sentinel = ErrNotHeld
		}
		qe := quorumError(e, *l.quorum, "refresh", res, sentinel, disagreeRefresh)
		qe.Expired = l.quorum.Met(res.Yes)
		err = qe
	}
	if e.cfg.observed() {
		e.log.nodes(ctx, nodeResults(e, res, disagreeRefresh))
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
		var group []refreshPlan
		group, plans = splitTimeout(plans)
		wg.Go(func() {
			refreshGroup(start, timeout, group)
			for _, p := range group {
				p.l.op.Unlock()
			}
		})
	}
	wg.Wait()
}

// splitTimeout splits plans into those whose per-node timeout is the
// first's and the others, each in order; when they all share it (the
// usual batch), without copying.
func splitTimeout(plans []refreshPlan) (group, rest []refreshPlan) {
	timeout := plans[0].timeout
	same := 1
	for same < len(plans) && plans[same].timeout == timeout {
		same++
	}
	if same == len(plans) {
		return plans, nil
	}
	group = make([]refreshPlan, 0, len(plans))
	for _, p := range plans {
		if p.timeout == timeout {
			group = append(group, p)
		} else {
			rest = append(rest, p)
		}
	}
	return group, rest
}

// refreshItems are the items of a batch on each node, made before its
// round. They are the same on every node but for the epoch record's key,
// which is each lock's own on a Cluster node (lockKeys.on): one list for
// the nodes of each kind.
func refreshItems(e *engine, plans []refreshPlan) (itemsOf func(node int) []script.RefreshItem) {
	var items [2][]script.RefreshItem // [0]: not a Cluster, [1]: a Cluster
	at := func(i int) *[]script.RefreshItem {
		if e.nodes[i].Cluster {
			return &items[1]
		}
		return &items[0]
	}
	for i := range e.nodes {
		if it := at(i); *it == nil {
			*it = make([]script.RefreshItem, len(plans))
			for j, p := range plans {
				k := p.l.keys.fenced(e, i, p.l.keys.fence())
				(*it)[j] = p.l.sp.kind.refresh(k, &p.l.secret, p.l.token, p.ttl)
			}
		}
	}
	return func(i int) []script.RefreshItem { return *at(i) }
}

// refreshGroup refreshes locks that share a per-node timeout: one pipeline
// per node, and a quorum decision per lock.
func refreshGroup(start time.Time, timeout time.Duration, plans []refreshPlan) {
	e := plans[0].l.e
	e.ident.again(timeout)
	type batchReply struct {
		results []script.RefreshResult
		errs    []error
	}
	itemsOf := refreshItems(e, plans)
	round := newRound[batchReply](&e.wiring, e.majority, timeout, quorum.WaitAll)
	round.Call = func(ctx context.Context, n *quorum.Node) (batchReply, error) {
		results, errs, err := script.RefreshBatch(ctx, n.Conn, itemsOf(n.Index), e.ident.guard(n.Index))
		for _, err := range errs {
			n.ErrorReplied(err)
		}
		return batchReply{results, errs}, err
	}
	round.Agree = func(batchReply) bool { return true }
	round.Settle = func(n *quorum.Node, r batchReply, err error, _, late bool) {
		for i, p := range plans {
			res, ierr := script.NotOwner, err
			if err == nil {
				res, ierr = r.results[i], r.errs[i]
			}
			p.l.settleLate(n, res, ierr, late)
		}
	}
	batch := round.Run(context.Background(), e.workers)
	observeRTT(e, batch.Replies, timeout)
	now := e.cfg.now()
	// Every lock's replies, one allocation for the batch.
	nn := len(e.nodes)
	replies := make([]quorum.Reply[script.RefreshResult], len(plans)*nn)
	for i, p := range plans {
		// This lock's own round, read out of the batch: decided like a
		// manual refresh's, by refreshDone.
		res := quorum.Result[script.RefreshResult]{Replies: replies[i*nn : (i+1)*nn : (i+1)*nn]}
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
		newValid := p.newValid(start)
		res.Won = p.l.quorum.Met(res.Yes) && now.Before(minTime(p.oldValid, newValid))
		_ = p.l.refreshDone(p.l.do.Load().context(), res, start, p.ttl, p.why, p.timeout, newValid, true)
	}
}

// disagreeRefresh is the per-node reason of a refresh's no.
func disagreeRefresh(r script.RefreshResult) error {
	switch r {
	case script.NotReseeded:
		return fmt.Errorf("%w: the key is gone and the node may not take it back yet", ErrNodeRecovering)
	case script.Retired:
		return fmt.Errorf("%w: the key is gone, and the node's fencing counter is past the lock's token (the lock was released there, or the node voted for a later lock): not taken back", ErrNotOwner)
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
//   - A refresh's NotOwner means another owner's value is on the node,
//     and Retired a missing key that the node will not take back (its
//     counter is past the lock's token, and never goes back); a missing
//     key is otherwise re-seeded, or on a recovering node answered
//     NotReseeded, which is no refusal: every node counts.
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

// refreshed reports a refresh, manual or automatic, to the hook.
func (l *Lock) refreshed(ctx context.Context, start time.Time, ttl time.Duration, why string, auto bool, err error) {
	e := l.e
	if e.cfg.hook != nil {
		l.emit(&e.cfg, ctx, RefreshEvent{LockInfo: l.info(), Auto: auto,
			Elapsed: e.cfg.now().Sub(start), Err: err, TTL: ttl, TTLReason: why, Result: refreshResult(err)})
	}
}

// fire handles the locks whose scheduled event has come: a lock past its
// loss deadline is lost; a lock due for refresh joins this batch.
func (e *engine) fire(due []*keepalive.Entry[*Lock]) {
	now := e.cfg.now()
	var batch []*Lock
	for _, entry := range due {
		l := entry.Value
		l.mu.Lock()
		ended, deadline := l.err != nil, l.lossDeadline()
		refresh := l.auto && !l.refreshAt().After(now.Add(batchWindow))
		l.mu.Unlock()
		switch {
		case ended:
		case !now.Before(deadline):
			l.end(l.ranOut())
		case refresh:
			if batch == nil {
				batch = make([]*Lock, 0, len(due))
			}
			batch = append(batch, l)
		default:
			l.schedule()
		}
	}
	if len(batch) > 0 {
		e.bg.Go(func() { e.refreshBatch(batch) })
	}
}
