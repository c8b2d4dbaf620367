package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// A lock's release (Lock.Release), from the handle to the round on the nodes,
// and the clean-up of one node's key.

// Release deletes the lock on every node where it still holds our value.
// It runs even when ctx is already cancelled, bounded by the per-node
// timeout (at least 100 ms), and is idempotent: later calls return the first
// call's result.
//
// It returns nil as soon as a quorum of nodes confirmed the deletion (the
// other nodes' deletes finish in the background, and Close waits for
// them), an error wrapping ErrNotHeld (a *QuorumError) when the lock had
// already expired or been taken, and a *QuorumError without ErrNotHeld
// when nodes did not answer; in every case the lock is no longer held, and
// keys left on unreachable nodes expire with their TTL. A lock of several
// names releases every part in parallel and joins the errors of those that
// failed, each prefixed with its name. A nil ctx counts as
// context.Background(), so that a deferred Release never leaves the lock
// held.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return errNilLock
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if l.all != nil {
		return l.all.release(ctx)
	}
	return l.release(ctx)
}

// release is Release of a lock of one name.
func (l *Lock) release(ctx context.Context) error {
	e := l.e
	releaseStart := e.cfg.now()
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
	// (settleLate); one that landed before is deleted by the release. The
	// acquire's answers still to come leave their clean-up to this release,
	// which sends its request to their nodes after them.
	l.releasing = true
	confirmed := l.late.startRelease()
	l.mu.Unlock()
	l.end(errReleased)
	// A loss being reported goes first: Done is closed once the end, which
	// has begun (here or by a loss), is reported to Do's function, the
	// hook and the logger, so that the hook hears of a loss before the
	// release.
	<-l.Done()
	err := l.backend().release(ctx, l, timeout, confirmed)
	l.mu.Lock()
	l.released, l.releaseErr = true, err
	lost := errors.Is(l.err, ErrLost)
	l.mu.Unlock()
	e.reg.remove(l)
	if e.cfg.hook != nil {
		now := e.cfg.now()
		l.emit(&e.cfg, ctx, ReleaseEvent{LockInfo: l.info(), Held: now.Sub(l.obtainedAt()),
			Elapsed: now.Sub(releaseStart), Err: err, Result: releaseResult(err), Lost: lost, Degraded: l.Degraded()})
	}
	return err
}

func (nodeBackend) release(ctx context.Context, l *Lock, timeout time.Duration, confirmed uint64) error {
	e := l.e
	rt := l.retire()
	unsharded := l.sp.kind.release(l.keys.key, &l.secret, rt, true, false)
	// Return once a quorum deleted the key: the other nodes' deletes
	// finish in the background (a late one cannot delete a later
	// owner's key: the script compares the value). A release that
	// fails waits for every node, to report each one's reason.
	round := newRound[script.Released](&e.wiring, *l.quorum, timeout, quorum.WaitOnLoss)
	round.Call = func(ctx context.Context, n *quorum.Node) (script.Released, error) {
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
		call := unsharded
		if n.Cluster {
			call = l.sp.kind.release(l.keys.key, &l.secret, rt, true, true)
		}
		return call.Release(ctx, n.Conn)
	}
	round.Agree = func(r script.Released) bool { return r.Deleted }
	start := e.cfg.now()
	rctx := ctx
	if rctx.Done() != nil {
		rctx = context.WithoutCancel(ctx) // a release is not abandoned halfway
	}
	res := round.Run(rctx, e.workers)
	l.notSent(res.Replies, timeout)
	e.waits.afterRelease(l.keys.key, res.Replies, e.cfg.now().Sub(start))
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
	return script.Retire{Fence: l.keys.fence(), Token: l.token, Guard: l.e.ident.guard(0)}
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

// settleAcquire settles a node's answer to the won acquire round: unless
// Release is waiting to send its request to the node after this definite
// answer (lateAnswers.await), which then deletes whatever the acquire set,
// it is settleLate's.
func (l *Lock) settleAcquire(n *quorum.Node, r script.RefreshResult, err error, late bool) {
	l.mu.Lock()
	covered := l.late.arrive(n.Index, ambiguous(err))
	l.mu.Unlock()
	if !covered {
		l.settleLate(n, r, err, late)
	}
}

// settleLate deletes our key on a node whose reply to an acquire or refresh
// round of the lock may have set or extended it after the lock's release
// was sent: a yes that came after its round was decided (late), or a
// request with no definite outcome. Every round of a lock is decided
// before its Release begins (l.op), so a reply that came before its
// round's decision is covered by the release.
func (l *Lock) settleLate(n *quorum.Node, r script.RefreshResult, err error, late bool) {
	if !(late && r.Agrees()) && !ambiguous(err) {
		return
	}
	l.mu.Lock()
	releasing, timeout := l.releasing, l.nodeTimeout
	l.mu.Unlock()
	if releasing {
		l.releaseNode(n, timeout)
	}
}

// notSent takes back from the acquire's late answers the nodes that
// Release's round did not send its request to (skipped by their breaker or
// in-flight bound): such an answer still to come cleans up after itself,
// one that came already is cleaned up here.
func (l *Lock) notSent(replies []quorum.Reply[script.Released], timeout time.Duration) {
	l.mu.Lock()
	waits := l.late.waiting()
	l.mu.Unlock()
	if waits == 0 {
		return
	}
	for i, r := range replies {
		if waits&(1<<i) != 0 && errors.Is(r.Err, quorum.ErrSkipped) && l.abandonAwait(i) {
			l.releaseNode(l.e.nodes[i], timeout)
		}
	}
}

// awaitAcquire is lateAnswers.await of node i under the Lock's mu.
func (l *Lock) awaitAcquire(i int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.late.await(i)
}

// abandonAwait is lateAnswers.abandon of node i under the Lock's mu.
func (l *Lock) abandonAwait(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.late.abandon(i)
}
