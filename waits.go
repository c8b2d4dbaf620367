package redlock

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
	"github.com/redlock-go/redlock/internal/waitq"
)

// Waiting for a contended lock (docs/waiting.md).
//
// The goroutines of one Client that wait for the same lock (or for any of
// the same set of locks, Client.Any) form a FIFO queue (internal/waitq).
// Only the head of the queue attempts; the others wait for their turn. The
// queue holds one subscription to its locks' release channels on every
// node for as long as it exists, so a handover costs no SUBSCRIBE, and a
// release wakes one waiter per Client instead of all of them. A release
// through the same Client wakes the head directly. A reentrant lock's
// owner queues only behind the same owner's obtains (kind.group).
//
// Across Clients, a Client that releases a lock that other Clients wait for
// (PUBLISH reaches their subscriptions) holds back its own next attempt on
// that lock for a grace period of three release round trips, so that a
// notified waiter elsewhere can take it.

// waiting is the part of the engine that makes a Client's obtains wait:
// its local queues, and their subscriptions on the nodes' notifiers.
type waiting struct {
	w      *wiring
	ident  *identities // each node's guard, for the look for a release
	sets   *nodeSets   // a kind's quorum rule, for the same look
	hubs   []driver.Notifier
	queues waitq.Queues
}

// The bounds of the grace period after a release that other Clients heard.
const (
	minGrace = 500 * time.Microsecond
	maxGrace = 20 * time.Millisecond
)

// anyGroup is the key of Client.Any's local queue for a set of lock keys:
// the same set in any order gives the same queue. It cannot collide with a
// lock key, which starts with '{'.
func anyGroup(rkeys []string) string {
	sorted := slices.Clone(rkeys)
	slices.Sort(sorted)
	return "any\x00" + strings.Join(sorted, "\x00")
}

// subscribe makes q's subscription on every node and waits, up to timeout,
// for the nodes to confirm it: only then can no release be missed. Only
// the head of q calls it. A node that has not confirmed within the first
// head's timeout (frozen, or slow) is not waited for by the heads after
// it, which would each lose the timeout again for as long as the queue
// lives: its confirmation wakes the head when it comes (watchLate).
func (wt *waiting) subscribe(ctx context.Context, q *waitq.Queue, timeout time.Duration) {
	wt.queues.Track(q)
	if q.Confirmed == nil {
		q.Confirmed = make([]<-chan struct{}, len(wt.hubs)*len(q.Keys))
		for i, h := range wt.hubs {
			if wt.w.nodes[i].Skipped(wt.w.cfg.now()) {
				continue // its breaker is open: do not wait on it
			}
			for j, k := range q.Keys {
				q.Confirmed[i*len(q.Keys)+j] = h.Subscribe(keys.Channel(k), q.Wake)
			}
		}
	}
	if q.Settled {
		return
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for i, confirmed := range q.Confirmed {
		if confirmed == nil {
			continue
		}
		select {
		case <-confirmed:
		case <-timer.C:
			q.Settled = true
			wt.watchLate(q, i)
			return
		case <-ctx.Done():
			return // the next head waits the rest
		}
	}
	q.Settled = true
}

// watchLate wakes q's head as each confirmation that had not come when
// its head stopped waiting (q.Confirmed from index from on) comes: until a
// node confirms, a release there publishes to nobody, and one that ran
// after the head's look for a missed release (lookForRelease) would
// otherwise wake it only at the holder's TTL or its retry delay. The
// wake-up names the lock of the confirmation, as a message on its channel
// would. The goroutine, one per queue, is wt.w.bg's; it waits for the late
// confirmations together (a node that never confirms holds back no other),
// and ends once they have all come, when the queue's subscriptions are
// dropped (unsubscribe closes q.Late), or when the Client closes (a closed
// Notifier never confirms).
func (wt *waiting) watchLate(q *waitq.Queue, from int) {
	var late []int // indices in q.Confirmed, then their select cases
	for i, c := range q.Confirmed[from:] {
		select {
		case <-c:
		default:
			if c != nil {
				late = append(late, from+i)
			}
		}
	}
	wt.w.life.RLock()
	defer wt.w.life.RUnlock()
	if len(late) == 0 || wt.w.reg.isClosed() {
		return
	}
	q.Late = make(chan struct{})
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(q.Late)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(wt.w.reg.closing)},
	}
	for _, i := range late {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(q.Confirmed[i])})
	}
	const stops = 2 // the cases that end the watch
	wt.w.bg.Go(func() {
		for len(cases) > stops {
			c, _, _ := reflect.Select(cases)
			if c < stops {
				return
			}
			q.Wake.Notify(keys.Channel(q.Keys[late[c-stops]%len(q.Keys)]))
			cases = slices.Delete(cases, c, c+1)
			late = slices.Delete(late, c-stops, c-stops+1)
		}
	})
}

// unsubscribe drops an empty queue's subscriptions, and stops watchLate's
// goroutine.
func (wt *waiting) unsubscribe(q *waitq.Queue) {
	if q.Late != nil {
		close(q.Late)
	}
	if q.Confirmed == nil {
		return
	}
	for i, h := range wt.hubs {
		for j, k := range q.Keys {
			if q.Confirmed[i*len(q.Keys)+j] != nil {
				h.Unsubscribe(keys.Channel(k), q.Wake)
			}
		}
	}
}

// lookForRelease tells a head that has just subscribed whether one of its
// locks was released since its last attempt, which no notification will
// say: it reads each lock's state on every node (the kind's probe), and
// wakes w when a lock is free on enough nodes for an attempt to win. It
// also marks each lock as waited for (keys.Waiters), so that the release
// it waits for publishes: the mark goes first, so a release that runs
// after it publishes, and one that runs before it leaves the lock free. It
// is not an attempt: WithMaxAttempts does not count it and the hook does
// not see it. It returns the shortest remaining time a node reported for a
// holder, or holderTTL when no node did.
func (wt *waiting) lookForRelease(ctx context.Context, r *request, w *driver.Waiter, holderTTL time.Duration) time.Duration {
	wt.w.life.RLock()
	defer wt.w.life.RUnlock()
	if wt.w.reg.isClosed() {
		return holderTTL // the next attempt says ErrClosed
	}
	need := wt.sets.rule(r.spec)
	type look struct {
		free   []bool
		holder []time.Duration
	}
	round := newRound[look](wt.w, need, wt.w.cfg.nodeTimeoutFor(r.ttl), quorum.Early)
	round.Call = func(ctx context.Context, n *quorum.Node) (look, error) {
		var cmds [][]any
		var per int
		for _, k := range r.keys {
			probe := r.kind.probe(k)
			per = len(probe) + 1
			cmds = append(cmds, []any{"SET", keys.Waiters(k), "1", "PX", wt.ident.guard(n.Index).FenceTTL.Milliseconds()})
			cmds = append(cmds, probe...)
		}
		replies, err := n.Conn.Pipe(ctx, cmds)
		if err != nil {
			return look{}, err
		}
		lk := look{free: make([]bool, len(r.keys)), holder: make([]time.Duration, len(r.keys))}
		for i := range r.keys {
			lk.free[i], lk.holder[i] = r.spec.looked(replies[i*per+1 : (i+1)*per])
		}
		return lk, nil
	}
	// Decided early: once enough nodes have one of the locks free
	// (for one lock, enough for an attempt to win), or so many have
	// none that no lock can be free on enough of them.
	round.Agree = func(lk look) bool { return slices.Contains(lk.free, true) }
	res := round.Run(ctx, wt.w.workers)
	shortest := time.Duration(-1)
	for i, k := range r.keys {
		var free uint64
		for n, rep := range res.Replies {
			if rep.Err != nil {
				continue
			}
			if rep.Val.free[i] {
				free |= 1 << n
			} else if d := rep.Val.holder[i]; d >= 0 && (shortest < 0 || d < shortest) {
				shortest = d
			}
		}
		if need.Met(free) {
			w.Notify(keys.Channel(k))
			return holderTTL
		}
	}
	if shortest < 0 {
		return holderTTL
	}
	return shortest
}

// waitTurn blocks until m is the head of its queue, or ctx ends.
func (wt *waiting) waitTurn(ctx context.Context, name string, id uint64, m *waitq.Member) error {
	select {
	case <-m.Turn:
		return nil // the head: no wait to report
	default:
	}
	start := wt.w.cfg.now()
	why, err := "turn", error(nil)
	select {
	case <-m.Turn:
	case <-ctx.Done():
		why, err = "context", ctxErr(ctx)
	}
	wt.waited(ctx, name, id, start, why)
	return err
}

// waitRelease waits for the first of: a release notification, the
// holder's remaining TTL (plus a millisecond: Redis reports 0 in a key's
// last millisecond), the backoff delay, or the end of ctx. It says what
// ended the wait (WaitEvent.WokenBy).
func (wt *waiting) waitRelease(ctx context.Context, name string, id uint64, wake <-chan struct{}, delay, holderTTL time.Duration) (string, error) {
	if holderTTL >= 0 {
		delay = min(delay, holderTTL+time.Millisecond)
	}
	start := wt.w.cfg.now()
	t := time.NewTimer(delay)
	defer t.Stop()
	why, err := "timer", error(nil)
	select {
	case <-wake:
		why = "release"
	case <-t.C:
	case <-ctx.Done():
		why, err = "context", ctxErr(ctx)
	}
	wt.waited(ctx, name, id, start, why)
	return why, err
}

// waited reports a wait of an obtain that began at start to the hook.
func (wt *waiting) waited(ctx context.Context, name string, id uint64, start time.Time, why string) {
	if wt.w.cfg.hook != nil {
		wt.w.cfg.emit(ctx, WaitEvent{Name: name, ObtainID: id, Waited: wt.w.cfg.now().Sub(start), WokenBy: WokenBy(why)})
	}
}

// afterRelease wakes this Client's waiters for the lock, and starts a grace
// period when the release was heard by other Clients' waiters: PUBLISH
// counted more receivers than this Client's own subscription.
func (wt *waiting) afterRelease(key string, replies []quorum.Reply[script.Released], took time.Duration) {
	wt.queues.WakeLocal(key)
	channel := ""
	for i, r := range replies {
		if r.Err != nil || r.Val.Receivers == 0 {
			continue
		}
		if channel == "" {
			channel = keys.Channel(key) // formed only when someone heard
		}
		own := int64(0)
		if wt.hubs[i].Subscribed(channel) {
			own = 1
		}
		if r.Val.Receivers > own {
			grace := min(max(3*took, minGrace), maxGrace)
			now := wt.w.cfg.now()
			wt.queues.SetGrace(key, now.Add(grace), now)
			return
		}
	}
}
