package redlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/notify"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Waiting for a contended lock.
//
// The goroutines of one Client that wait for the same lock form a FIFO
// queue. Only the head of the queue attempts to obtain the lock; the others
// wait for their turn. The queue holds one subscription to the lock's
// release channel on every node for as long as it exists, so a handover
// costs no SUBSCRIBE, and a release wakes one waiter per Client instead of
// all of them. A release through the same Client wakes the head directly.
//
// Fairness: within a Client, waiters are served in order of arrival, and a
// goroutine that releases and obtains again joins the tail. Across Clients,
// a Client that releases a lock that other Clients wait for (PUBLISH reaches
// their subscriptions) holds back its own next attempt on that lock for a
// grace period of three release round trips, so that a notified waiter
// elsewhere can take it.

// waitQueue is the local queue of waiters for one lock.
type waitQueue struct {
	key     string
	members []*member
	wake    *notify.Waiter
	// confirmed holds each node's subscription confirmation, once the
	// first head has subscribed.
	confirmed []<-chan struct{}
	// settled is set once a head has waited for the confirmations until
	// they came or its timeout passed: later heads do not wait again.
	settled bool
}

type member struct {
	turn chan struct{} // closed when the member is the head of the queue
}

// waits tracks the queues and the grace periods of one Client.
type waits struct {
	mu     sync.Mutex
	queues map[string]*waitQueue
	grace  map[string]time.Time // lock key → no own attempt before this time
}

func (w *waits) queued(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queues[key] != nil
}

// join adds a member at the tail of key's queue, creating it if needed.
func (w *waits) join(key string) (*waitQueue, *member) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queues[key]
	if q == nil {
		q = &waitQueue{key: key, wake: notify.NewWaiter()}
		w.queues[key] = q
	}
	m := &member{turn: make(chan struct{})}
	q.members = append(q.members, m)
	if len(q.members) == 1 {
		close(m.turn)
	}
	return q, m
}

// leave removes m from q and passes the turn on. It reports whether q is
// now empty and gone, in which case the caller must drop its subscriptions.
func (w *waits) leave(q *waitQueue, m *member) (gone bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, x := range q.members {
		if x != m {
			continue
		}
		q.members = append(q.members[:i], q.members[i+1:]...)
		if i == 0 && len(q.members) > 0 {
			// The lock may be free already: the new head looks
			// (lookForRelease) or makes its first attempt at once.
			close(q.members[0].turn)
		}
		break
	}
	if len(q.members) > 0 {
		return false
	}
	delete(w.queues, q.key)
	return true
}

// wakeLocal wakes the head of key's queue: the lock was released here.
func (w *waits) wakeLocal(key string) {
	w.mu.Lock()
	q := w.queues[key]
	w.mu.Unlock()
	if q != nil {
		select {
		case q.wake.C <- struct{}{}:
		default:
		}
	}
}

// setGrace holds back this Client's next attempt on key until t.
func (w *waits) setGrace(key string, t time.Time, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.grace) >= 1024 {
		for k, until := range w.grace {
			if !until.After(now) {
				delete(w.grace, k)
			}
		}
	}
	w.grace[key] = t
}

// graceUntil is the end of key's grace period, or the zero time.
func (w *waits) graceUntil(key string, clock func() time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.grace) == 0 {
		return time.Time{}
	}
	t, ok := w.grace[key]
	if ok && !t.After(clock()) {
		delete(w.grace, key)
		return time.Time{}
	}
	return t
}

// subscribe makes q's subscription on every node and waits, up to timeout,
// for the nodes to confirm it: only then can no release be missed. Only
// the head of q calls it. A node that has not confirmed within the first
// head's timeout (frozen, or slow) is not waited for by the heads after
// it, which would each lose the timeout again for as long as the queue
// lives.
func (c *Client) subscribe(ctx context.Context, q *waitQueue, timeout time.Duration) {
	if q.confirmed == nil {
		q.confirmed = make([]<-chan struct{}, len(c.hubs))
		for i, h := range c.hubs {
			if c.nodes[i].Skipped(c.cfg.now()) {
				continue // its breaker is open: do not wait on it
			}
			q.confirmed[i] = h.Subscribe(keys.Channel(q.key), q.wake)
		}
	}
	if q.settled {
		return
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for _, confirmed := range q.confirmed {
		if confirmed == nil {
			continue
		}
		select {
		case <-confirmed:
		case <-timer.C:
			q.settled = true
			return
		case <-ctx.Done():
			return // the next head waits the rest
		}
	}
	q.settled = true
}

// lookForRelease tells a head that has just subscribed whether the lock
// was released since its last attempt, which no notification will say: it
// reads the key's remaining TTL on every node, and wakes w when the key is
// gone from enough nodes for an attempt to win. It also marks the lock as
// waited for (keys.Waiters), so that the release it waits for publishes. It
// is not an attempt: WithMaxAttempts does not count it and the hook does
// not see it. For a semaphore of permits > 0 permits, a node counts as
// released when fewer than permits of its permits are live (freePermit),
// and the quorum is the permit's.
// It returns the shortest remaining TTL a node reported for the holder
// (for a semaphore, until its soonest permit expires), or holderTTL when
// no node did.
func (c *Client) lookForRelease(ctx context.Context, key string, ttl time.Duration, permits int, w *notify.Waiter, holderTTL time.Duration) time.Duration {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return holderTTL // the next attempt says ErrClosed
	}
	const gone = -2 // PTTL of a missing key
	need := c.quorum
	if permits > 0 {
		need = PermitQuorum(len(c.nodes), permits)
	}
	round := quorum.Round[time.Duration]{
		Nodes:   c.nodes,
		Quorum:  need,
		Timeout: c.cfg.nodeTimeoutFor(ttl),
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (time.Duration, error) {
			// Mark the lock as waited for, as a refused attempt does
			// (acquire.lua), so that its next release publishes: this
			// head may have made no attempt since the last release. The
			// mark goes first: a release that runs after it publishes,
			// and one that runs before it leaves the key gone for PTTL.
			var (
				pttl  *redis.DurationCmd
				holds *redis.MapStringStringCmd
				now   *redis.TimeCmd
			)
			_, err := n.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, keys.Waiters(key), "1", c.guard(n.Index).FenceTTL)
				if permits > 0 {
					holds, now = p.HGetAll(ctx, key), p.Time(ctx)
				} else {
					pttl = p.PTTL(ctx, key)
				}
				return nil
			})
			if err != nil {
				return 0, err
			}
			if permits > 0 {
				return freePermit(holds.Val(), now.Val(), permits), nil
			}
			return pttl.Val(), nil
		},
		Agree: func(d time.Duration) bool { return d == gone },
	}
	res := round.Run(ctx, &c.bg)
	if res.Won {
		select {
		case w.C <- struct{}{}:
		default:
		}
		return holderTTL
	}
	shortest := time.Duration(-1)
	for _, r := range res.Replies {
		if r.Err == nil && r.Val >= 0 && (shortest < 0 || r.Val < shortest) {
			shortest = r.Val
		}
	}
	if shortest < 0 {
		return holderTTL
	}
	return shortest
}

// freePermit reads a semaphore's hash (permit.lua) at the node's time now,
// counting its live permits as the scripts do (holds.lua): -2 (as PTTL of
// a missing key) when fewer than k are live, else the time until the
// soonest expires.
func freePermit(fields map[string]string, now time.Time, k int) time.Duration {
	ms := now.UnixMilli()
	live, soonest := 0, int64(-1)
	for f, v := range fields {
		if !strings.HasPrefix(f, "h:") {
			continue
		}
		exp, err := strconv.ParseInt(v, 10, 64)
		if err != nil || exp <= ms {
			continue
		}
		live++
		if soonest < 0 || exp < soonest {
			soonest = exp
		}
	}
	if live < k {
		return -2
	}
	return time.Duration(soonest-ms) * time.Millisecond
}

// unsubscribe drops an empty queue's subscriptions.
func (c *Client) unsubscribe(q *waitQueue) {
	for i, h := range c.hubs {
		if q.confirmed != nil && q.confirmed[i] != nil {
			h.Unsubscribe(keys.Channel(q.key), q.wake)
		}
	}
}

// waitTurn blocks until m is the head of its queue, or ctx ends.
func (c *Client) waitTurn(ctx context.Context, name string, id uint64, m *member) error {
	select {
	case <-m.turn:
		return nil // the head: no wait to report
	default:
	}
	start := time.Now()
	reason, err := WokenByTurn, error(nil)
	select {
	case <-m.turn:
	case <-ctx.Done():
		reason, err = WokenByContext, ctxErr(ctx)
	}
	c.waited(ctx, name, id, start, reason)
	return err
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// afterRelease wakes this Client's waiters for the lock, and starts a grace
// period when the release was heard by other Clients' waiters: PUBLISH
// counted more receivers than this Client's own subscription.
func (c *Client) afterRelease(key string, replies []quorum.Reply[script.Released], took time.Duration) {
	c.waits.wakeLocal(key)
	channel := keys.Channel(key)
	for i, r := range replies {
		if r.Err != nil {
			continue
		}
		own := int64(0)
		if c.hubs[i].Subscribed(channel) {
			own = 1
		}
		if r.Val.Receivers > own {
			grace := min(max(3*took, minGrace), maxGrace)
			now := c.cfg.now()
			c.waits.setGrace(key, now.Add(grace), now)
			return
		}
	}
}

// The bounds of the grace period after a release that other Clients heard.
const (
	minGrace = 500 * time.Microsecond
	maxGrace = 20 * time.Millisecond
)
