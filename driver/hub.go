package driver

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"
)

// PubSubConn is one pub/sub connection of a driver, as a Hub drives it.
// A Hub calls Subscribe, Unsubscribe and Close from one goroutine at a
// time, and Receive from another.
type PubSubConn interface {
	// Subscribe sends SUBSCRIBE channel (SSUBSCRIBE on a sharded Hub). It
	// may return before or after the server confirms; the confirmation
	// itself must come through Receive.
	Subscribe(ctx context.Context, channel string) error
	// Unsubscribe sends UNSUBSCRIBE channel; its confirmation must come
	// through Receive. A sharded Hub does not call it: it closes the
	// channel's connection instead.
	Unsubscribe(ctx context.Context, channel string) error
	// Receive blocks until the connection reads a message or a
	// confirmation, and returns it; other replies (PONG) it skips. It
	// returns an error once the connection has failed or been closed, and
	// is not called again. A connection that can go quiet must find out
	// by itself that its server is gone (PING, read deadlines), and then
	// fail Receive.
	Receive() (PubSubEvent, error)
	// Close closes the connection: a Receive blocked on it returns. It
	// must not block for long on a frozen server.
	Close() error
}

// PubSubEvent is what a PubSubConn read: a message on a channel, or the
// server's confirmation of a SUBSCRIBE (SSUBSCRIBE) or UNSUBSCRIBE.
type PubSubEvent struct {
	Kind    EventKind
	Channel string
}

// EventKind is the kind of a PubSubEvent.
type EventKind int

const (
	// EventMessage is a message (message, smessage).
	EventMessage EventKind = iota + 1
	// EventSubscribed confirms a subscription (subscribe, ssubscribe).
	EventSubscribed
	// EventUnsubscribed confirms an unsubscription (unsubscribe,
	// sunsubscribe).
	EventUnsubscribed
)

// Dialer opens a pub/sub connection. On a sharded Hub it is called once
// per channel, and the connection must reach the shard that serves it; on
// another Hub channel is "" and one connection serves every channel. ctx
// bounds the dial.
type Dialer func(ctx context.Context, channel string) (PubSubConn, error)

// The bounds of a Hub's wait between reconnections: doubled after every
// failure, back to the least once a connection confirms a subscription.
const (
	minRedial = 10 * time.Millisecond
	maxRedial = time.Second
)

// Hub is a Notifier built on pub/sub connections: one connection for
// every channel of a node, or one per channel on a sharded Hub (a Redis
// Cluster, where a sharded subscription is tied to its shard), with
// reference-counted channels so that no subscription outlives its
// waiters. It subscribes again on a new connection after one breaks,
// waking every waiter of the broken one, and dials again with a backoff
// (10 ms doubling to 1 s) while that fails.
//
// The network work (dials, SUBSCRIBE and UNSUBSCRIBE) runs on goroutines
// of the Hub, one at a time, each bounded by the Hub's timeout; Close
// waits for them.
type Hub struct {
	dial    Dialer
	sharded bool
	timeout time.Duration

	mu       sync.Mutex
	channels map[string]*hubChannel
	// draining counts, per channel name, the UNSUBSCRIBEs written on the
	// shared connection whose confirmation has not been read yet (not
	// sharded). It outlives the channel's entry.
	draining map[string]int
	shared   *hubConn // not sharded: the connection of every channel, or nil
	closed   bool
	stop     chan struct{}
	loops    sync.WaitGroup
	retrying bool          // a redial loop runs
	backoff  time.Duration // the redial loop's next wait

	// cmd serializes the network work, so that the server's state follows
	// the reference counts in order.
	cmd sync.Mutex
}

// hubConn is one connection; its identity tells its confirmations from
// another's.
type hubConn struct {
	c      PubSubConn
	closed bool // Close called (under Hub.mu)
}

// hubChannel is one channel name's subscription.
//
// confirmed is closed by the confirmation of the current subscription,
// and by no other:
//
//   - active is set before the SUBSCRIBE is written, under mu, so that a
//     confirmation read while the write is still returning is not dropped.
//   - The decision to unsubscribe clears active and replaces confirmed,
//     under mu and before the UNSUBSCRIBE is written: a waiter that arrives
//     from then on gets a channel that only the next subscription's
//     confirmation closes.
//   - A confirmation read on the shared connection while an UNSUBSCRIBE of
//     the name is in flight (draining) answers a SUBSCRIBE written before
//     it, and is ignored: replies on one connection come in the order of
//     the commands. On a sharded Hub only a confirmation read from the
//     channel's own connection counts.
//   - A broken connection clears active for its channels and replaces a
//     closed confirmed: the subscription on the next connection must be
//     confirmed again.
//
// A broken connection wakes the channel's waiters, as a release may have
// been missed; the node may be down then (a restart), so that what the
// woken waiter reads there fails. The confirmation of the subscription
// on the next connection wakes them once more (rewake): the node answers
// again, and a release may have been missed until then too.
type hubChannel struct {
	waiters   map[*Waiter]struct{}
	want      bool          // someone waits: should be subscribed
	active    bool          // SUBSCRIBE written or being written, and no UNSUBSCRIBE since
	confirmed chan struct{} // closed when the server confirmed the active subscription
	conn      *hubConn      // sharded only: the channel's connection
	rewake    bool          // broken since the last confirmation: the next one wakes the waiters
}

var _ Notifier = (*Hub)(nil)

// NewHub returns a Hub that opens its connections with dial. sharded
// selects sharded pub/sub (SSUBSCRIBE, a connection per channel), for a
// Redis Cluster. timeout bounds each dial, SUBSCRIBE and UNSUBSCRIBE; 0 or
// less means 2 s. A nil dial makes a Hub that never confirms (its waiters
// wait on their timers), and so does a dial that returns no connection
// (nil, or a nil pointer) and no error. NewHub does no I/O: the first
// Subscribe dials.
func NewHub(dial Dialer, sharded bool, timeout time.Duration) *Hub {
	if timeout <= 0 {
		timeout = defaultHubTimeout
	}
	if dial == nil {
		dial = func(context.Context, string) (PubSubConn, error) { return nil, errNoDialer }
	}
	return &Hub{
		dial:     dial,
		sharded:  sharded,
		timeout:  timeout,
		channels: make(map[string]*hubChannel),
		draining: make(map[string]int),
		stop:     make(chan struct{}),
		backoff:  minRedial,
	}
}

// Subscribe implements Notifier.
func (h *Hub) Subscribe(name string, w *Waiter) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		ch = &hubChannel{waiters: make(map[*Waiter]struct{}), confirmed: make(chan struct{})}
		h.channels[name] = ch
	}
	ch.waiters[w] = struct{}{}
	ch.want = true
	h.reconcileLocked(name)
	return ch.confirmed
}

// Unsubscribe implements Notifier.
func (h *Hub) Unsubscribe(name string, w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.channels[name]
	if ch == nil {
		return
	}
	delete(ch.waiters, w)
	ch.want = len(ch.waiters) > 0
	h.reconcileLocked(name)
}

// Subscribed implements Notifier.
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

// reconcileLocked starts a reconcile of name on a goroutine of the hub.
// h.mu must be held.
func (h *Hub) reconcileLocked(name string) {
	if h.closed {
		return
	}
	h.loops.Go(func() { h.reconcile(name) })
}

// reconcile brings the server's subscription to name in line with whether
// anyone waits for it. Each change of state is decided under h.mu before
// its command is written (see hubChannel).
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
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		if ch.want {
			ch.active = true
			h.mu.Unlock()
			err := h.subscribe(ctx, name, ch)
			cancel()
			if err != nil {
				h.mu.Lock()
				ch.active = false
				h.redialLocked()
				h.mu.Unlock()
				return // waiters fall back to their timers until the redial
			}
			continue
		}
		ch.active = false
		ch.confirmed = make(chan struct{})
		conn := ch.conn
		ch.conn = nil
		var shared *hubConn
		if !h.sharded {
			shared = h.shared
			if shared != nil {
				h.draining[name]++
			}
		}
		h.mu.Unlock()
		if h.sharded {
			h.closeConn(conn)
		} else if shared != nil && shared.c.Unsubscribe(ctx, name) != nil {
			// Not written, or on a connection that failed: no
			// confirmation will be read. A connection that failed
			// is closed by its receive loop.
			h.mu.Lock()
			h.undrain(name)
			h.mu.Unlock()
		}
		cancel()
	}
}

// subscribe writes the SUBSCRIBE of name, dialling first if its connection
// is not open; h.cmd is held.
func (h *Hub) subscribe(ctx context.Context, name string, ch *hubChannel) error {
	h.mu.Lock()
	conn := h.shared
	h.mu.Unlock()
	if h.sharded || conn == nil {
		c, err := h.dial(ctx, name)
		if err == nil && isNilConn(c) {
			err = errNoConn
		}
		if err != nil {
			return err
		}
		conn = &hubConn{c: c}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = c.Close()
			return errClosedHub
		}
		if h.sharded {
			ch.conn = conn
		} else {
			h.shared = conn
		}
		h.mu.Unlock()
		// The receive loop reads from the start: a driver may wait in
		// Subscribe for a confirmation that only reading delivers.
		h.loops.Go(func() { h.receive(conn) })
	}
	if err := conn.c.Subscribe(ctx, name); err != nil {
		// The connection is in doubt: close it, and let its receive
		// loop wake its waiters and redial.
		h.closeConn(conn)
		return err
	}
	return nil
}

var (
	errClosedHub = errors.New("redlock: the notifier is closed")
	errNoDialer  = errors.New("redlock: the notifier has no dialer")
	errNoConn    = errors.New("redlock: the notifier's dialer returned no connection and no error")
)

// isNilConn reports whether c is nil, or a nil pointer behind the
// interface.
func isNilConn(c PubSubConn) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// defaultHubTimeout is NewHub's timeout when it is given none.
const defaultHubTimeout = 2 * time.Second

// closeConn closes c once.
func (h *Hub) closeConn(c *hubConn) {
	if c == nil {
		return
	}
	h.mu.Lock()
	done := c.closed
	c.closed = true
	h.mu.Unlock()
	if !done {
		_ = c.c.Close()
	}
}

// receive reads one connection until it fails or is closed.
func (h *Hub) receive(c *hubConn) {
	for {
		ev, err := c.c.Receive()
		if err != nil {
			h.broken(c)
			return
		}
		switch ev.Kind {
		case EventSubscribed:
			h.confirm(c, ev.Channel)
		case EventUnsubscribed:
			if h.sharded {
				// A sharded hub never unsubscribes: the server dropped
				// the subscription (its slot moved). Start again.
				h.closeConn(c)
				continue
			}
			h.mu.Lock()
			if c == h.shared {
				h.undrain(ev.Channel)
			}
			h.mu.Unlock()
		case EventMessage:
			h.deliver(ev.Channel)
		}
	}
}

// confirm handles a confirmation of name read from c: it closes the
// channel's confirmed when it answers the current subscription.
func (h *Hub) confirm(c *hubConn, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.backoff = minRedial // c works
	ch := h.channels[name]
	if ch == nil || !ch.active {
		return
	}
	if h.sharded && ch.conn != c || !h.sharded && (c != h.shared || h.draining[name] > 0) {
		return // a reply to an earlier subscription
	}
	select {
	case <-ch.confirmed:
	default:
		close(ch.confirmed)
		if ch.rewake {
			ch.rewake = false
			for w := range ch.waiters {
				w.Wake()
			}
		}
	}
}

func (h *Hub) deliver(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := h.channels[name]; ch != nil {
		for w := range ch.waiters {
			w.Notify(name)
		}
	}
}

// broken handles the end of connection c: its channels need a new
// subscription, and their waiters are woken, as messages may have been
// lost. A connection closed by an unsubscribe or by Close serves no
// channel by then.
func (h *Hub) broken(c *hubConn) {
	h.mu.Lock()
	closed := c.closed
	c.closed = true
	if h.closed {
		h.mu.Unlock()
		if !closed {
			_ = c.c.Close()
		}
		return
	}
	if !h.sharded {
		if h.shared != c {
			h.mu.Unlock() // an earlier connection: it serves no channel
			if !closed {
				_ = c.c.Close()
			}
			return
		}
		h.shared = nil
		clear(h.draining) // their confirmations were lost with the connection
	}
	lost := false
	for name, ch := range h.channels {
		if h.sharded && ch.conn != c || !h.sharded && !ch.active {
			continue
		}
		ch.conn = nil
		ch.active = false
		select {
		case <-ch.confirmed:
			ch.confirmed = make(chan struct{})
		default:
		}
		for w := range ch.waiters {
			w.Wake()
		}
		if ch.want {
			ch.rewake = true
			lost = true
		} else {
			delete(h.channels, name)
		}
	}
	if lost {
		h.redialLocked()
	}
	h.mu.Unlock()
	if !closed {
		_ = c.c.Close()
	}
}

// redialLocked starts the redial loop unless it runs. h.mu must be held.
func (h *Hub) redialLocked() {
	if h.closed || h.retrying {
		return
	}
	h.retrying = true
	h.loops.Go(h.redial)
}

// redial subscribes again, after a backoff, every channel that has
// waiters and no subscription, until none is left or the hub closes.
func (h *Hub) redial() {
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		h.mu.Lock()
		wait := h.backoff
		h.backoff = min(2*h.backoff, maxRedial)
		h.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-h.stop:
			return
		}
		h.mu.Lock()
		var names []string
		for name, ch := range h.channels {
			if ch.want && !ch.active {
				names = append(names, name)
			}
		}
		if len(names) == 0 || h.closed {
			h.retrying = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		for _, name := range names {
			h.reconcile(name)
		}
	}
}

// undrain counts an UNSUBSCRIBE of name as answered. h.mu must be held.
func (h *Hub) undrain(name string) {
	if n := h.draining[name]; n > 1 {
		h.draining[name] = n - 1
	} else {
		delete(h.draining, name)
	}
}

// Close implements Notifier: it closes every connection, wakes the
// waiters still registered and waits for the hub's goroutines. The network
// work in flight ends with its connection or at its timeout, and the work
// queued behind it sees the hub closed: a frozen node costs Close one
// timeout at most.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.stop)
	var conns []*hubConn
	if h.shared != nil {
		conns = append(conns, h.shared)
	}
	for _, ch := range h.channels {
		if ch.conn != nil {
			conns = append(conns, ch.conn)
		}
		for w := range ch.waiters {
			w.Wake()
		}
	}
	h.mu.Unlock()
	for _, c := range conns {
		h.closeConn(c)
	}
	h.loops.Wait()
}
