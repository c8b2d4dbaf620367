package goredis

// The notification side of a node: a driver.Hub on go-redis PubSub
// connections, each used as one connection of the hub's. go-redis
// reconnects a broken PubSub and subscribes it again inside the Receive
// that reports the break; the hub closes it there and dials a new one, so
// that the hub alone decides what is subscribed and when a subscription
// counts as confirmed (on a Redis Cluster, the server's sunsubscribe of a
// slot that moved is such a break).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
)

// hubTimeout bounds each dial, SUBSCRIBE and UNSUBSCRIBE of a node's
// notifications.
const hubTimeout = 2 * time.Second

// pingEvery is the liveness of a pub/sub connection: quiet for pingEvery,
// it is sent a PING; quiet for pingEvery more, it counts as broken.
const pingEvery = 10 * time.Second

// newNotifier returns a driver.Hub on c: one PubSub for every channel of
// the node, or, sharded (a Redis Cluster), one per channel, which go-redis
// connects to the master of the channel's slot.
func newNotifier(c redis.UniversalClient, sharded bool) *driver.Hub {
	return driver.NewHub(func(ctx context.Context, _ string) (driver.PubSubConn, error) {
		// Neither call does I/O: the PubSub connects on the first
		// Subscribe.
		var ps *redis.PubSub
		if sharded {
			ps = c.SSubscribe(ctx)
		} else {
			ps = c.Subscribe(ctx)
		}
		return &pubsub{ps: ps, sharded: sharded, ready: make(chan struct{})}, nil
	}, sharded, hubTimeout)
}

// pubsub is a go-redis PubSub as a driver.PubSubConn.
type pubsub struct {
	ps      *redis.PubSub
	sharded bool
	// ready is closed once the first Subscribe has returned, or by Close.
	// Receive waits for it: a PubSub connects on the first call that needs
	// a connection, and a sharded one connects to the master of its first
	// channel's slot only if that call is the SSUBSCRIBE (a Receive first
	// would connect it to any master).
	ready chan struct{}
	once  sync.Once
}

func (p *pubsub) markReady() { p.once.Do(func() { close(p.ready) }) }

// Subscribe implements driver.PubSubConn: it returns once SSUBSCRIBE
// (SUBSCRIBE) is written; its confirmation comes through Receive.
func (p *pubsub) Subscribe(ctx context.Context, channel string) error {
	defer p.markReady()
	if p.sharded {
		return p.ps.SSubscribe(ctx, channel)
	}
	return p.ps.Subscribe(ctx, channel)
}

// Unsubscribe implements driver.PubSubConn.
func (p *pubsub) Unsubscribe(ctx context.Context, channel string) error {
	return p.ps.Unsubscribe(ctx, channel)
}

// Receive implements driver.PubSubConn. It fails on the first error of
// the connection (go-redis has connected again by then, which Close
// undoes), on an error reply (a MOVED to a SSUBSCRIBE sent with a stale
// view of the slots), and when nothing, not even the answer to a PING,
// came for twice pingEvery.
func (p *pubsub) Receive() (driver.PubSubEvent, error) {
	<-p.ready
	pinged := false
	for {
		m, err := p.ps.ReceiveTimeout(context.Background(), pingEvery)
		if err != nil {
			if !pinged && isTimeout(err) {
				pinged = true
				if err := p.ps.Ping(context.Background()); err != nil {
					return driver.PubSubEvent{}, err
				}
				continue
			}
			return driver.PubSubEvent{}, err
		}
		pinged = false
		switch m := m.(type) {
		case *redis.Message:
			return driver.PubSubEvent{Kind: driver.EventMessage, Channel: m.Channel}, nil
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				return driver.PubSubEvent{Kind: driver.EventSubscribed, Channel: m.Channel}, nil
			case "unsubscribe", "sunsubscribe":
				return driver.PubSubEvent{Kind: driver.EventUnsubscribed, Channel: m.Channel}, nil
			}
		}
		// A Pong, or a kind the hub does not use.
	}
}

// Close implements driver.PubSubConn: it closes the connection, which
// ends a Receive blocked on it.
func (p *pubsub) Close() error {
	p.markReady()
	err := p.ps.Close()
	if errors.Is(err, redis.ErrClosed) {
		return nil // closed already
	}
	return err
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
