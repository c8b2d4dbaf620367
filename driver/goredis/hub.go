package goredis

// The notification side of a node (driver.Notifier): a shared pub/sub
// connection per node (per channel on a Redis Cluster, where sharded
// subscriptions are tied to a shard), with reference-counted channels so
// that no subscription outlives its waiters.
//
// Notifications are hints: a waiter that misses one (a broken connection, a
// node restart) still wakes on its own timers. When a connection breaks, the
// hub wakes every waiter so that they try again at once.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
)

// hub is the notification side of one node.
type hub struct {
	client  redis.UniversalClient
	sharded bool          // Redis Cluster: SSUBSCRIBE, one PubSub per channel
	timeout time.Duration // bounds each SUBSCRIBE or UNSUBSCRIBE write

	mu       sync.Mutex
	channels map[string]*channel
	// draining counts, per channel name, the UNSUBSCRIBEs written on the
	// shared connection whose reply has not been read yet (not sharded).
	// It outlives the channel's entry, which goes when the write returns.
	draining map[string]int
	shared   *redis.PubSub // not sharded: one connection for every channel
	closed   bool
	stop     chan struct{}
	loops    sync.WaitGroup

	// cmd serializes the (un)subscribe writes, so that the server's state
	// follows the reference counts in order.
	cmd sync.Mutex
}

// channel is one channel name's subscription.
//
// A confirmation is the server's reply to a SUBSCRIBE: from the moment the
// server sends it, every message on the channel reaches the connection
// until an UNSUBSCRIBE (or a broken connection, which wakes every waiter).
// confirmed is closed by the confirmation of the current subscription, and
// by no other:
//
//   - active is set before the SUBSCRIBE is written, under mu, so that a
//     confirmation read while the write is still returning is not dropped.
//   - The decision to unsubscribe clears active and replaces confirmed,
//     under mu and before the UNSUBSCRIBE is written: a waiter that
//     arrives from then on gets a channel that only the next
//     subscription's confirmation closes, never the old, closed one.
//   - A confirmation read while an UNSUBSCRIBE of the name is in flight
//     (hub.draining) answers a SUBSCRIBE written before that UNSUBSCRIBE:
//     the server may have dropped the subscription since, and the reply is
//     ignored. Replies on one connection come in the order of the commands,
//     so once the UNSUBSCRIBE's reply is read, the next confirmation is the
//     next SUBSCRIBE's. With sharded pub/sub each subscription has a
//     connection of its own, and only a confirmation read from the
//     channel's current connection (ps) counts.
//   - A broken shared connection loses the replies still to come on it:
//     draining is reset, and go-redis subscribes the active channels again
//     on the new connection, whose confirmations close confirmed. (An
//     UNSUBSCRIBE written on the new connection before the receive loop
//     sees the old one fail is forgotten too, so a confirmation may then be
//     taken for a later subscription's: a hint lost, as with any broken
//     connection.)
type channel struct {
	waiters   map[*driver.Waiter]struct{}
	want      bool          // someone waits: should be subscribed
	active    bool          // SUBSCRIBE written or being written, and no UNSUBSCRIBE since
	confirmed chan struct{} // closed when the server confirmed the active subscription
	ps        *redis.PubSub // sharded only
}

// newHub returns a hub for a node's client. sharded selects SSUBSCRIBE
// (Redis Cluster, Redis 7+). timeout bounds each subscription write.
func newHub(c redis.UniversalClient, sharded bool, timeout time.Duration) *hub {
	return &hub{
		client:   c,
		sharded:  sharded,
		timeout:  timeout,
		channels: make(map[string]*channel),
		draining: make(map[string]int),
		stop:     make(chan struct{}),
	}
}

// Subscribe registers w for name and returns a channel that is closed once
// the server has confirmed the subscription: from then on a message on name
// wakes w. A hub that is closed, or a node that cannot be reached, never
// confirms; the caller bounds its wait.
func (h *hub) Subscribe(name string, w *driver.Waiter) <-chan struct{} {
	h.mu.Lock()
	ch := h.channels[name]
	if ch == nil {
		ch = &channel{waiters: make(map[*driver.Waiter]struct{}), confirmed: make(chan struct{})}
		h.channels[name] = ch
	}
	ch.waiters[w] = struct{}{}
	ch.want = true
	confirmed := ch.confirmed
	h.reconcileLocked(name)
	h.mu.Unlock()
	return confirmed
}

// Unsubscribe removes w from name; the last waiter out unsubscribes.
func (h *hub) Unsubscribe(name string, w *driver.Waiter) {
	h.mu.Lock()
	ch := h.channels[name]
	if ch == nil {
		h.mu.Unlock()
		return
	}
	delete(ch.waiters, w)
	ch.want = len(ch.waiters) > 0
	h.reconcileLocked(name)
	h.mu.Unlock()
}

// reconcileLocked starts a reconcile of name on a goroutine of the hub:
// the network write may block (a node that does not answer a dial), and no
// waiter should wait on it longer than its own bound. h.mu must be held.
func (h *hub) reconcileLocked(name string) {
	if h.closed {
		return
	}
	h.loops.Go(func() { h.reconcile(name) })
}

// Subscribed reports whether this hub is subscribed to name on its node, so
// that a caller can tell its own subscription from other clients' in
// PUBLISH's count of receivers.
func (h *hub) Subscribed(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	return ch != nil && ch.active
}

// Channels is the number of channels with waiters or a subscription.
func (h *hub) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.channels)
}

// reconcile brings the server's subscription for name in line with whether
// anyone waits for it. Each change of state is decided under h.mu before its
// command is written (see channel).
func (h *hub) reconcile(name string) {
	h.cmd.Lock()
	defer h.cmd.Unlock()
	for {
		h.mu.Lock()
		ch := h.channels[name]
		if ch == nil || h.closed {
			h.mu.Unlock()
			return
		}
		if !ch.want && !ch.active {
			delete(h.channels, name)
			h.mu.Unlock()
			return
		}
		if ch.want == ch.active {
			h.mu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		if ch.want {
			ch.active = true
			h.mu.Unlock()
			err := h.subscribe(ctx, name, ch)
			cancel()
			if err != nil {
				return // waiters fall back to their timers
			}
			continue
		}
		ch.active = false
		ch.confirmed = make(chan struct{})
		ps := ch.ps
		ch.ps = nil
		if !h.sharded {
			h.draining[name]++
		}
		h.mu.Unlock()
		h.unsubscribe(ctx, name, ps)
		cancel()
	}
}

// subscribe sends the SUBSCRIBE for name; h.cmd is held. A sharded
// subscription that fails leaves the channel inactive; a failed SUBSCRIBE on
// the shared connection leaves it active, as go-redis subscribes again when
// it reconnects.
func (h *hub) subscribe(ctx context.Context, name string, ch *channel) error {
	if h.sharded {
		ps := h.client.SSubscribe(ctx)
		if err := ps.SSubscribe(ctx, name); err != nil {
			_ = ps.Close()
			h.mu.Lock()
			ch.active = false
			h.mu.Unlock()
			return err
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = ps.Close()
			return errHubClosed
		}
		ch.ps = ps
		h.mu.Unlock()
		h.startLoop(ps)
		return nil
	}
	h.mu.Lock()
	ps := h.shared
	if ps == nil {
		if h.closed {
			h.mu.Unlock()
			return errHubClosed
		}
		ps = h.client.Subscribe(ctx)
		h.shared = ps
		h.mu.Unlock()
		h.startLoop(ps)
	} else {
		h.mu.Unlock()
	}
	return ps.Subscribe(ctx, name)
}

var errHubClosed = errors.New("redlock: the notifier is closed")

// unsubscribe undoes subscribe: it closes a sharded subscription's
// connection ps, or sends the UNSUBSCRIBE on the shared one. h.cmd is held.
func (h *hub) unsubscribe(ctx context.Context, name string, ps *redis.PubSub) {
	if h.sharded {
		if ps != nil {
			_ = ps.Close() // its loop ends with it
		}
		return
	}
	h.mu.Lock()
	shared := h.shared
	h.mu.Unlock()
	if shared == nil || shared.Unsubscribe(ctx, name) != nil {
		// Not written, or written on a connection that go-redis has
		// closed: no reply will be read.
		h.mu.Lock()
		h.undrain(name)
		h.mu.Unlock()
	}
}

// undrain counts an UNSUBSCRIBE of name as answered. h.mu must be held.
func (h *hub) undrain(name string) {
	if n := h.draining[name]; n > 1 {
		h.draining[name] = n - 1
	} else {
		delete(h.draining, name)
	}
}

// startLoop starts the receive loop of a new connection; called from a
// reconcile goroutine, which the loops WaitGroup counts, so it never adds
// to it while Close waits.
func (h *hub) startLoop(ps *redis.PubSub) {
	h.loops.Go(func() { h.receive(ps) })
}

// receive reads one PubSub connection until it is closed: messages wake
// the channel's waiters, confirmations mark the channel confirmed, and a
// broken connection wakes every waiter before go-redis reconnects and
// resubscribes.
func (h *hub) receive(ps *redis.PubSub) {
	backoff := 10 * time.Millisecond
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), 30*time.Second)
		if err != nil {
			if h.isClosed() || errors.Is(err, redis.ErrClosed) {
				return
			}
			if isTimeout(err) {
				// Quiet for 30 s: check the connection is alive.
				_ = ps.Ping(context.Background())
				continue
			}
			h.broken(ps)
			timer.Reset(backoff)
			select {
			case <-timer.C:
			case <-h.stop:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirm(ps, m.Channel)
			case "unsubscribe":
				h.mu.Lock()
				h.undrain(m.Channel)
				h.mu.Unlock()
			}
		case *redis.Message:
			h.deliver(m.Channel)
		}
	}
}

// confirm handles a confirmation of name read from ps: it closes the
// channel's confirmed when it answers the current subscription (see
// channel).
func (h *hub) confirm(ps *redis.PubSub, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil || !ch.active {
		return
	}
	if h.sharded && ch.ps != ps || !h.sharded && h.draining[name] > 0 {
		return // a reply to an earlier subscription
	}
	select {
	case <-ch.confirmed:
	default:
		close(ch.confirmed)
	}
}

func (h *hub) deliver(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.channels[name]; ch != nil {
		for w := range ch.waiters {
			w.Notify(name)
		}
	}
}

// broken wakes the waiters of every channel served by ps: messages may have
// been lost while the connection was down.
func (h *hub) broken(ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sharded {
		clear(h.draining) // their replies were lost with the connection
	}
	for _, ch := range h.channels {
		if h.sharded && ch.ps != ps {
			continue
		}
		for w := range ch.waiters {
			w.Wake()
		}
	}
}

func (h *hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Close closes every connection and waits for the receive loops. Waiters
// still registered are woken.
//
// It does not wait for the subscription work in flight (h.cmd): that work
// ends with the connections, or at its timeout, and the work queued behind
// it sees the hub closed, so that a frozen node costs Close one timeout at
// most, not one per queued change.
func (h *hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	var conns []*redis.PubSub
	if h.shared != nil {
		conns = append(conns, h.shared)
	}
	for _, ch := range h.channels {
		if ch.ps != nil {
			conns = append(conns, ch.ps)
		}
		for w := range ch.waiters {
			w.Wake()
		}
	}
	h.mu.Unlock()
	for _, ps := range conns {
		_ = ps.Close()
	}
	h.loops.Wait()
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
