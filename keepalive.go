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

// batchWindow: locks whose events fall within it of the earliest due one
// are handled together, so that their refreshes share one pipeline per
// node. Refreshing up to this much early costs nothing in safety.
const batchWindow = 2 * time.Millisecond

// Do obtains the lock named key (waiting like Obtain), keeps it alive with
// automatic refresh, runs fn, and releases the lock. fn's context is
// cancelled with cause ErrLost (see context.Cause) the moment the lock can no
// longer be guaranteed; fn must then stop touching what the lock protects.
//
// Do returns Obtain's error when the lock was not obtained (fn did not
// run), and otherwise fn's error, joined with an error wrapping ErrLost when
// the lock was lost while fn ran.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(context.Context) error, opts ...ObtainOption) error {
	if fn == nil {
		return invalid("nil function")
	}
	lock, err := c.Obtain(ctx, key, ttl, append(opts[:len(opts):len(opts)], WithAutoRefresh())...)
	if err != nil {
		return err
	}
	return runHeld(ctx, lock, fn)
}

// held is what Do and DoAll hold while their function runs: a *Lock or a
// *MultiLock, kept alive by automatic refresh.
type held interface {
	Err() error
	Release(context.Context) error
	bindDo(ctx context.Context, onLost func())
}

// runHeld runs fn under lock, which is held, and releases it: fn's context
// is cancelled with cause ErrLost when the lock is lost. It returns fn's
// error, joined with an error wrapping ErrLost when the lock was lost.
func runHeld(ctx context.Context, lock held, fn func(context.Context) error) error {
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lock.bindDo(ctx, func() { cancel(ErrLost) })
	if degradedHeld(lock) {
		fnCtx = context.WithValue(fnCtx, degradedKey{}, true)
	}
	ferr := fn(fnCtx)
	lostErr := lock.Err()
	rerr := lock.Release(context.WithoutCancel(ctx))
	switch {
	case errors.Is(lostErr, ErrLost):
		return errors.Join(ferr, lostErr)
	case errors.Is(rerr, ErrNotHeld):
		// The nodes say the lock was not ours at the end, though it never
		// ran out here: an assumption of the safety model was broken.
		return errors.Join(ferr, fmt.Errorf("%w: the nodes no longer held it at release: %w", ErrLost, rerr))
	}
	return ferr
}

// fire handles the locks whose scheduled event has come: a lock past its
// loss deadline is lost; a lock due for refresh joins this batch.
func (c *Client) fire(due []*keepalive.Entry[*Lock]) {
	now := c.cfg.now()
	var batch []*Lock
	for _, e := range due {
		l := e.Value
		l.mu.Lock()
		ended, deadline := l.err != nil, l.lossDeadline()
		refresh := l.auto && !l.refreshAt.After(now.Add(batchWindow))
		l.mu.Unlock()
		switch {
		case ended:
		case !now.Before(deadline):
			l.end(l.ranOut())
		case refresh:
			batch = append(batch, l)
		default:
			l.schedule()
		}
	}
	if len(batch) > 0 {
		c.bg.Go(func() { c.refreshBatch(batch) })
	}
}

// refreshBatch refreshes many locks at once: one pipeline per node, and a
// quorum decision per lock.
func (c *Client) refreshBatch(batch []*Lock) {
	// A lock whose Release or manual Refresh (or a refresh of an earlier
	// batch) is under way is skipped, and looked at again a per-node
	// timeout later, by which time that operation has rescheduled it or
	// ended it: its refresh time, already past, would fire again at once.
	// Each lock taken here is unlocked when its own group is done.
	start := c.cfg.now()
	plans := make([]refreshPlan, 0, len(batch))
	for _, l := range batch {
		if !l.op.TryLock() {
			l.refreshLater(start)
			continue
		}
		ttl, reason, old, ok := l.nextRefresh(start)
		if !ok {
			l.op.Unlock()
			l.schedule()
			continue
		}
		if l.deg != nil {
			// A degraded lock is extended in its lease store.
			c.bg.Go(func() { c.refreshDegradedAuto(start, l, ttl, reason) })
			continue
		}
		t := c.cfg.nodeTimeoutFor(ttl)
		plans = append(plans, refreshPlan{l: l, ttl: ttl, reason: reason, timeout: t, newValid: start.Add(c.cfg.validity(ttl)), oldValid: old})
	}
	// One round per node timeout: a round waits for every node up to its
	// timeout, and a lock with a short TTL must not wait on a dead node
	// for the timeout of a long one.
	var wg sync.WaitGroup
	for len(plans) > 0 {
		timeout := plans[0].timeout
		var group, rest []refreshPlan
		for _, p := range plans {
			if p.timeout == timeout {
				group = append(group, p)
			} else {
				rest = append(rest, p)
			}
		}
		plans = rest
		wg.Go(func() {
			c.refreshGroup(start, timeout, group)
			for _, p := range group {
				p.l.op.Unlock()
			}
		})
	}
	wg.Wait()
}

// refreshPlan is one lock of an automatic refresh: the TTL it asks for,
// its per-node timeout, and its validity before and after.
type refreshPlan struct {
	l        *Lock
	ttl      time.Duration
	reason   TTLReason
	timeout  time.Duration
	newValid time.Time
	oldValid time.Time
}

// refreshGroup refreshes locks that share a per-node timeout: one pipeline
// per node, and a quorum decision per lock.
func (c *Client) refreshGroup(start time.Time, timeout time.Duration, plans []refreshPlan) {
	type batchReply struct {
		results []script.RefreshResult
		errs    []error
	}
	round := quorum.Round[batchReply]{
		Nodes:   c.nodes,
		Quorum:  c.quorum,
		Timeout: timeout,
		Wait:    quorum.WaitAll,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (batchReply, error) {
			items := make([]script.RefreshItem, len(plans))
			for i, p := range plans {
				items[i] = p.l.refreshItem(n.Index, p.ttl)
			}
			results, errs, err := script.RefreshBatch(ctx, n.Client, items, c.guard(n.Index))
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
	batch := round.Run(context.Background(), c.workers)
	observeRTT(c.adapt, batch.Replies, timeout)
	now := c.cfg.now()
	for i, p := range plans {
		// This lock's own round, read out of the batch: decided like a
		// manual refresh's, by refreshDone.
		res := quorum.Result[script.RefreshResult]{Replies: make([]quorum.Reply[script.RefreshResult], len(c.nodes))}
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
				}
			}
		}
		res.Won = res.Agreed >= p.l.quorum && now.Before(minTime(p.oldValid, p.newValid))
		_ = p.l.refreshDone(p.l.eventCtx(), res, start, p.ttl, p.reason, p.timeout, p.newValid, true)
	}
}

// grid moves a refresh time t of a lock refreshed every interval down onto
// a grid of interval/16 steps, so that locks with the same interval fall into
// at most 16 cohorts per period and share pipelines. Refreshing up to
// interval/16 early costs a little traffic and nothing in safety.
func (c *Client) grid(t time.Time, interval time.Duration) time.Time {
	step := interval / 16
	if step <= batchWindow {
		return t
	}
	d := t.Sub(c.epoch)
	return t.Add(-(d % step))
}
