package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// The rounds of a lock held on the nodes (nodeBackend): its refresh, the
// keep-alive's batched refresh, its release, and the one rule that decides
// from a round's replies that the lock is no longer ours.

// nodeBackend is the backend of a lock held on the nodes: its refresh and
// release rounds.
type nodeBackend struct{}

func (nodeBackend) degraded() bool     { return false }
func (nodeBackend) ranOut(*Lock) error { return nil }

func (nodeBackend) refresh(ctx context.Context, l *Lock, start time.Time, ttl time.Duration, why string, auto bool) error {
	e := l.e
	l.mu.Lock()
	validUntil := l.validUntil()
	l.mu.Unlock()
	timeout := e.cfg.nodeTimeoutFor(ttl)
	e.identifyAgain(timeout)
	newValid := start.Add(e.cfg.validity(ttl))
	fence := l.keys.fence()
	round := quorum.Round[script.RefreshResult]{
		Nodes:   e.nodes,
		Quorum:  *l.quorum,
		Timeout: timeout,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.RefreshResult, error) {
			return l.sp.kind.refresh(l.keys.fenced(e, n.Index, fence), &l.secret, l.token, ttl).Run(ctx, n.Conn, e.guard(n.Index))
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
	e.identifyAgain(timeout)
	type batchReply struct {
		results []script.RefreshResult
		errs    []error
	}
	itemsOf := refreshItems(e, plans)
	round := quorum.Round[batchReply]{
		Nodes:   e.nodes,
		Quorum:  e.majority,
		Timeout: timeout,
		Wait:    quorum.WaitAll,
		Now:     e.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (batchReply, error) {
			results, errs, err := script.RefreshBatch(ctx, n.Conn, itemsOf(n.Index), e.guard(n.Index))
			for _, err := range errs {
				n.ErrorReplied(err)
			}
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
		_ = p.l.refreshDone(p.l.eventCtx(), res, start, p.ttl, p.why, p.timeout, newValid, true)
	}
}

func (nodeBackend) release(ctx context.Context, l *Lock, timeout time.Duration, confirmed uint64) error {
	e := l.e
	rt := l.retire()
	plain := l.sp.kind.release(l.keys.key, &l.secret, rt, true, false)
	round := quorum.Round[script.Released]{
		Nodes:   e.nodes,
		Quorum:  *l.quorum,
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
				call = l.sp.kind.release(l.keys.key, &l.secret, rt, true, true)
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
	return quorumError(e, *l.quorum, "release", res, sentinel, func(script.Released) error { return ErrNotOwner })
}

// retire is what the lock's release needs to retire its token on a node
// (script.Retire): its counter, its token (0 until the lock is granted,
// for the clean-up of an attempt, which retires nothing) and the counter's
// expiry, the same on every node.
func (l *Lock) retire() script.Retire {
	return script.Retire{Fence: l.keys.fence(), Token: l.token, Guard: l.e.guard(0)}
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
			r, err := l.sp.kind.release(l.keys.key, &l.secret, l.retire(), false, false).Release(ctx, n.Conn)
			return r.Deleted, err
		},
		Agree: func(ok bool) bool { return ok },
	}
	round.Run(context.Background(), e.workers)
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
