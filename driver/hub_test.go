package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	"github.com/redlock-go/redlock/driver/goredis"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// pubsubConn is a go-redis PubSub as a driver.PubSubConn: one connection,
// which the Hub closes when it fails (go-redis would otherwise reconnect
// it on its own, which is the Hub's work here).
type pubsubConn struct {
	ps      *redis.PubSub
	sharded bool
}

func (c pubsubConn) Subscribe(ctx context.Context, channel string) error {
	if c.sharded {
		return c.ps.SSubscribe(ctx, channel)
	}
	return c.ps.Subscribe(ctx, channel)
}

func (c pubsubConn) Unsubscribe(ctx context.Context, channel string) error {
	return c.ps.Unsubscribe(ctx, channel)
}

func (c pubsubConn) Receive() (driver.PubSubEvent, error) {
	for {
		m, err := c.ps.Receive(context.Background())
		if err != nil {
			return driver.PubSubEvent{}, err
		}
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
	}
}

func (c pubsubConn) Close() error { return c.ps.Close() }

// hubNode is the go-redis node with its Notifier replaced by a driver.Hub
// on go-redis PubSub connections.
type hubNode struct {
	*goredis.Node
}

func (n hubNode) Notifier() driver.Notifier {
	c, sharded := n.Client(), n.Info().Sharded
	return driver.NewHub(func(ctx context.Context, _ string) (driver.PubSubConn, error) {
		if sharded {
			return pubsubConn{c.SSubscribe(ctx), true}, nil
		}
		return pubsubConn{c.Subscribe(ctx), false}, nil
	}, sharded, 2*time.Second)
}

// The conformance suite with driver.Hub as every node's Notifier: its
// confirmations, reference counts, reconnections after a broken
// connection or a restart, churn, Close, a frozen node, sharded
// subscriptions on a Redis Cluster, Sentinel, and redlock's waits.
func TestHubConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Driver{
		Name: "go-redis with driver.Hub",
		Standalone: func(t testing.TB, addr string) driver.Node {
			rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			return hubNode{goredis.New(rc)}
		},
		Cluster: func(t testing.TB, addrs []string) driver.Node {
			rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			return hubNode{goredis.New(rc)}
		},
		Sentinel: func(t testing.TB, master string, sentinels []string) driver.Node {
			rc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			return hubNode{goredis.New(rc)}
		},
	})
}

// A Hub without a dialer or a timeout does not panic: it never confirms,
// and closes.
func TestHubWithoutDialer(t *testing.T) {
	h := driver.NewHub(nil, false, 0)
	w := driver.NewWaiter()
	confirmed := h.Subscribe("ch", w)
	timer := time.NewTimer(200 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-confirmed:
		t.Fatal("a hub without a dialer confirmed a subscription")
	case <-timer.C:
	}
	h.Unsubscribe("ch", w)
	h.Close()
}
