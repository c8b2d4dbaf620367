// Package goredis is the go-redis v9 driver of the engine's node transport
// (package transport): it adapts a redis.UniversalClient (a standalone
// client, a Sentinel failover client or a Cluster client) to
// transport.Node.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/transport"
)

// hubTimeout bounds one SUBSCRIBE or UNSUBSCRIBE write of a node's
// notification connection.
const hubTimeout = 2 * time.Second

// Node is a go-redis client as a transport.Node.
type Node struct {
	c    redis.UniversalClient
	info transport.Info
	// refusedUntil (unix nanoseconds) is set when the node refused a
	// connection: until then requests fail at once with refused, without
	// reaching go-redis, whose dial retries would outlast the engine's
	// per-node timeout and log each failed dial; then one request goes
	// through, and sets it again if refused.
	refusedUntil atomic.Int64
	refused      atomic.Pointer[error]
}

// refusedFor is how long a node that refused a connection is not dialled
// again.
const refusedFor = time.Second

// errRefused wraps the dial error of a node that refused connections.
type errRefused struct {
	since time.Time
	err   error
}

func (e *errRefused) Error() string {
	return fmt.Sprintf("connection refused: the node refused a connection %v ago, and is dialled again at most once a second: %v",
		time.Since(e.since).Round(time.Millisecond), e.err)
}

func (e *errRefused) Unwrap() error { return e.err }

// gate fails a request at once while the node refuses connections, but
// for one request each refusedFor, which goes through.
func (n *Node) gate() error {
	until := n.refusedUntil.Load()
	if until == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	if now >= until && n.refusedUntil.CompareAndSwap(until, now+int64(refusedFor)) {
		return nil // this request probes the node
	}
	if p := n.refused.Load(); p != nil {
		return *p
	}
	return nil
}

// observe records whether a request found the node refusing connections.
func (n *Node) observe(err error) {
	if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		var already *errRefused
		if !errors.As(err, &already) {
			var e error = &errRefused{since: time.Now(), err: err}
			n.refused.Store(&e)
			n.refusedUntil.Store(time.Now().Add(refusedFor).UnixNano())
		}
		return
	}
	if n.refusedUntil.Load() != 0 {
		n.refusedUntil.Store(0)
	}
}

var _ transport.Node = (*Node)(nil)

// New wraps a go-redis client. It does no I/O.
func New(c redis.UniversalClient) *Node {
	return &Node{c: c, info: describe(c)}
}

// Client returns the go-redis client.
func (n *Node) Client() redis.UniversalClient { return n.c }

func describe(c redis.UniversalClient) transport.Info {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		// A failover client's Addr is a placeholder; only plain clients
		// name their server.
		return transport.Info{Addr: o.Addr, HonoursDeadline: o.ContextTimeoutEnabled, Unique: o.Addr != "FailoverClient"}
	case *redis.ClusterClient:
		o := c.Options()
		return transport.Info{Addr: fmt.Sprintf("cluster%v", o.Addrs), Sharded: true, HonoursDeadline: o.ContextTimeoutEnabled}
	case *redis.Ring:
		return transport.Info{Addr: "ring", HonoursDeadline: c.Options().ContextTimeoutEnabled}
	}
	return transport.Info{Addr: fmt.Sprintf("%T", c)}
}

// Info implements transport.Node.
func (n *Node) Info() transport.Info { return n.info }

// Do implements transport.Node. Redis's nil reply is returned as nil, not
// as redis.Nil.
func (n *Node) Do(ctx context.Context, args ...any) (any, error) {
	if err := n.gate(); err != nil {
		return nil, err
	}
	v, err := n.c.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil, nil
	}
	n.observe(err)
	return plain(v), err
}

// Pipe implements transport.Node.
func (n *Node) Pipe(ctx context.Context, cmds [][]any) ([]transport.Reply, error) {
	if err := n.gate(); err != nil {
		return nil, err
	}
	p := n.c.Pipeline()
	out := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		out[i] = p.Do(ctx, args...)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !transport.IsReply(err) {
		n.observe(err)
		return nil, err
	}
	n.observe(nil)
	replies := make([]transport.Reply, len(cmds))
	for i, cmd := range out {
		v, err := cmd.Result()
		if err == redis.Nil {
			v, err = nil, nil
		}
		replies[i] = transport.Reply{Val: plain(v), Err: err}
	}
	return replies, nil
}

// Notifier implements transport.Node: a Hub on the client.
func (n *Node) Notifier() transport.Notifier {
	return NewHub(n.c, n.info.Sharded, hubTimeout)
}

// Masters implements transport.Node.
func (n *Node) Masters(ctx context.Context) ([]transport.Node, error) {
	cc, ok := n.c.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	var (
		mu      sync.Mutex
		masters []transport.Node
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, New(c))
		return nil
	})
	return masters, err
}

// plain turns a RESP3 map (HGETALL, PUBSUB NUMSUB) into the flat array of
// its keys and values that RESP2 gives, so that the engine reads one shape.
func plain(v any) any {
	if m, ok := v.(map[any]any); ok {
		flat := make([]any, 0, 2*len(m))
		for k, x := range m {
			flat = append(flat, k, x)
		}
		return flat
	}
	return v
}
