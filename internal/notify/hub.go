// Package notify delivers release notifications from one Redis node to the
// waiters of one Client: a shared pub/sub connection per node (per channel
// on a Redis Cluster, where sharded subscriptions are tied to a shard), with
// reference-counted channels so that no subscription outlives its waiters.
//
// Notifications are hints: a waiter that misses one (a broken connection, a
// node restart) still wakes on its own timers. When a connection breaks, the
// hub wakes every waiter so that they try again at once.
package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waiter is woken, through C, by a message on any channel it is
// registered for. C has room for one wake-up; more coalesce.
type Waiter struct {
	C chan struct{}
}

// NewWaiter returns a Waiter.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

func (w *Waiter) wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}

// Hub is the notification side of one node.
type Hub struct {
	client  redis.UniversalClient
	sharded bool          // Redis Cluster: SSUBSCRIBE, one PubSub per channel
	timeout time.Duration // bounds each SUBSCRIBE or UNSUBSCRIBE write

	mu       sync.Mutex
	channels map[string]*channel
	shared   *redis.PubSub // not sharded: one connection for every channel
	closed   bool
	stop     chan struct{}
	loops    sync.WaitGroup

	// cmd serializes the (un)subscribe writes, so that the server's state
	// follows the reference counts in order.
	cmd sync.Mutex
}

type channel struct {
	waiters   map[*Waiter]struct{}
	want      bool          // someone waits: should be subscribed
	active    bool          // SUBSCRIBE sent and not undone
	confirmed chan struct{} // closed when the server confirmed the subscription
	ps        *redis.PubSub // sharded only
}

// NewHub returns a Hub for a node's client. sharded selects SSUBSCRIBE
// (Redis Cluster, Redis 7+). timeout bounds each subscription write.
func NewHub(c redis.UniversalClient, sharded bool, timeout time.Duration) *Hub {
	return &Hub{
		client:   c,
		sharded:  sharded,
		timeout:  timeout,
		channels: make(map[string]*channel),
		stop:     make(chan struct{}),
	}
}

// Subscribe registers w for name and returns a channel that is closed once
// the server has confirmed the subscription: from then on a message on name
// wakes w. A Hub that is closed, or a node that cannot be reached, never
// confirms; the caller bounds its wait.
func (h *Hub) Subscribe(name string, w *Waiter) <-chan struct{} {
	h.mu.Lock()
	ch := h.channels[name]
	if ch == nil {
		ch = &channel{waiters: make(map[*Waiter]struct{}), confirmed: make(chan struct{})}
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
func (h *Hub) Unsubscribe(name string, w *Waiter) {
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
func (h *Hub) reconcileLocked(name string) {
	if h.closed {
		return
	}
	h.loops.Go(func() { h.reconcile(name) })
}

// Sharded reports whether the hub uses sharded pub/sub (Redis Cluster).
func (h *Hub) Sharded() bool { return h.sharded }

// Subscribed reports whether this hub is subscribed to name on its node, so
// that a caller can tell its own subscription from other clients' in
// PUBLISH's count of receivers.
func (h *Hub) Subscribed(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	return ch != nil && ch.active
}

// Channels is the number of channels with waiters or a subscription.
func (h *Hub) Channels() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.channels)
}

// reconcile brings the server's subscription for name in line with whether
// anyone waits for it.
//
// A waiter that arrives while the last one's UNSUBSCRIBE is under way may
// see the old confirmation and miss a message sent before the channel is
// subscribed again; notifications are hints, and it wakes on its timers.
func (h *Hub) reconcile(name string) {
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
		want := ch.want
		h.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		if want {
			err := h.subscribe(ctx, name, ch)
			cancel()
			h.mu.Lock()
			ch.active = err == nil
			h.mu.Unlock()
			if err != nil {
				return // waiters fall back to their timers
			}
			continue
		}
		h.unsubscribe(ctx, name, ch)
		cancel()
		h.mu.Lock()
		ch.active = false
		if ch.want {
			ch.confirmed = make(chan struct{}) // subscribe again, wait for a new confirmation
		}
		h.mu.Unlock()
	}
}

// subscribe sends the SUBSCRIBE for name; h.cmd is held.
func (h *Hub) subscribe(ctx context.Context, name string, ch *channel) error {
	if h.sharded {
		ps := h.client.SSubscribe(ctx)
		if err := ps.SSubscribe(ctx, name); err != nil {
			_ = ps.Close()
			return err
		}
		h.mu.Lock()
		ch.ps = ps
		h.mu.Unlock()
		h.startLoop(ps)
		return nil
	}
	h.mu.Lock()
	ps := h.shared
	if ps == nil {
		ps = h.client.Subscribe(ctx)
		h.shared = ps
		h.mu.Unlock()
		h.startLoop(ps)
	} else {
		h.mu.Unlock()
	}
	return ps.Subscribe(ctx, name)
}

// unsubscribe undoes subscribe; h.cmd is held.
func (h *Hub) unsubscribe(ctx context.Context, name string, ch *channel) {
	if h.sharded {
		h.mu.Lock()
		ps := ch.ps
		ch.ps = nil
		h.mu.Unlock()
		if ps != nil {
			_ = ps.Close() // its loop ends with it
		}
		return
	}
	h.mu.Lock()
	ps := h.shared
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Unsubscribe(ctx, name)
	}
}

// startLoop starts the receive loop of a new connection; called from a
// reconcile goroutine, which the loops WaitGroup counts, so it never adds
// to it while Close waits.
func (h *Hub) startLoop(ps *redis.PubSub) {
	h.loops.Go(func() { h.receive(ps) })
}

// receive reads one PubSub connection until it is closed: messages wake
// the channel's waiters, confirmations mark the channel confirmed, and a
// broken connection wakes every waiter before go-redis reconnects and
// resubscribes.
func (h *Hub) receive(ps *redis.PubSub) {
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
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				h.confirm(m.Channel)
			}
		case *redis.Message:
			h.deliver(m.Channel)
		}
	}
}

func (h *Hub) confirm(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.channels[name]; ch != nil && ch.active {
		select {
		case <-ch.confirmed:
		default:
			close(ch.confirmed)
		}
	}
}

func (h *Hub) deliver(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.channels[name]; ch != nil {
		for w := range ch.waiters {
			w.wake()
		}
	}
}

// broken wakes the waiters of every channel served by ps: messages may have
// been lost while the connection was down.
func (h *Hub) broken(ps *redis.PubSub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range h.channels {
		if h.sharded && ch.ps != ps {
			continue
		}
		for w := range ch.waiters {
			w.wake()
		}
	}
}

func (h *Hub) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// Close closes every connection and waits for the receive loops. Waiters
// still registered are woken.
func (h *Hub) Close() {
	h.cmd.Lock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.cmd.Unlock()
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
			w.wake()
		}
	}
	h.mu.Unlock()
	h.cmd.Unlock()
	for _, ps := range conns {
		_ = ps.Close()
	}
	h.loops.Wait()
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
