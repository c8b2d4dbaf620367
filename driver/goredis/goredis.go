// Package goredis is the go-redis v9 driver of redlock (package driver): it
// adapts a redis.UniversalClient (a standalone client, a Sentinel failover
// client or a Cluster client) to driver.Node. redlock.New uses it;
// redlock.NewFromNodes takes its nodes beside those of other drivers.
//
// Deadlines: with ContextTimeoutEnabled set in the client's options,
// go-redis sets each request's connection deadline from its context, so a
// request to a frozen node returns at its deadline and the connection is
// closed; Info.HonoursDeadline says so. Without it go-redis reads until its
// ReadTimeout (3 s by default), and redlock runs each request on a
// goroutine of its own that it stops waiting for at the deadline.
//
// Notifications: go-redis pub/sub, one connection per node for every
// channel (per channel on a Redis Cluster, with SSUBSCRIBE); go-redis
// reconnects a broken connection and subscribes again, and every waiter is
// woken when it breaks.
//
// A node that refused a connection fails requests at once with the
// refusal, without dialling, for a second; then one request dials again.
// go-redis retries a refused dial and logs each failure through its
// process-wide logger: without this gate a closed port would cost every
// request its whole deadline and fill the log.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
)

// hubTimeout bounds one SUBSCRIBE or UNSUBSCRIBE write of a node's
// notification connection.
const hubTimeout = 2 * time.Second

// Node is a go-redis client as a driver.Node.
type Node struct {
	c    redis.UniversalClient
	info driver.Info
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

var _ driver.Node = (*Node)(nil)

// New wraps a go-redis client: a *redis.Client (standalone, or a Sentinel
// failover client from redis.NewFailoverClient) or a *redis.ClusterClient.
// It does no I/O. The caller keeps the client, and closes it after the
// redlock Client that uses the node.
func New(c redis.UniversalClient) *Node {
	return &Node{c: c, info: describe(c)}
}

// Client returns the go-redis client.
func (n *Node) Client() redis.UniversalClient { return n.c }

func describe(c redis.UniversalClient) driver.Info {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		// A failover client's Addr is a placeholder; only plain clients
		// name their server.
		return driver.Info{Addr: o.Addr, HonoursDeadline: o.ContextTimeoutEnabled, Unique: o.Addr != "FailoverClient"}
	case *redis.ClusterClient:
		o := c.Options()
		return driver.Info{Addr: fmt.Sprintf("cluster%v", o.Addrs), Sharded: true, HonoursDeadline: o.ContextTimeoutEnabled}
	case *redis.Ring:
		return driver.Info{Addr: "ring", HonoursDeadline: c.Options().ContextTimeoutEnabled}
	}
	return driver.Info{Addr: fmt.Sprintf("%T", c)}
}

// Info implements driver.Node.
func (n *Node) Info() driver.Info { return n.info }

// Do implements driver.Node. Redis's nil reply is returned as nil, not
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

// Pipe implements driver.Node.
func (n *Node) Pipe(ctx context.Context, cmds [][]any) ([]driver.Reply, error) {
	if err := n.gate(); err != nil {
		return nil, err
	}
	p := n.c.Pipeline()
	out := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		out[i] = p.Do(ctx, args...)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !driver.IsReply(err) {
		n.observe(err)
		return nil, err
	}
	n.observe(nil)
	replies := make([]driver.Reply, len(cmds))
	for i, cmd := range out {
		v, err := cmd.Result()
		if err == redis.Nil {
			v, err = nil, nil
		}
		replies[i] = driver.Reply{Val: plain(v), Err: err}
	}
	return replies, nil
}

// Notifier implements driver.Node: a hub on the client.
func (n *Node) Notifier() driver.Notifier {
	return newHub(n.c, n.info.Sharded, hubTimeout)
}

// Masters implements driver.Node.
func (n *Node) Masters(ctx context.Context) ([]driver.Node, error) {
	cc, ok := n.c.(*redis.ClusterClient)
	if !ok {
		return nil, nil
	}
	var (
		mu      sync.Mutex
		masters []driver.Node
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, New(c))
		return nil
	})
	return masters, err
}

// plain turns a reply into the shapes of driver.Node: a RESP3 map (HGETALL,
// PUBSUB NUMSUB) into the flat array of its keys and values that RESP2
// gives, a boolean into 1 or 0, a double or big number into its string,
// at any depth; arrays are converted in place, and returned in the
// interface they came in (a new one would allocate).
func plain(a any) any {
	switch v := a.(type) {
	case nil, int64, string:
		return v
	case []any:
		for i, x := range v {
			v[i] = plain(x)
		}
		return a
	case map[any]any:
		flat := make([]any, 0, 2*len(v))
		for k, x := range v {
			flat = append(flat, plain(k), plain(x))
		}
		return flat
	case map[string]string:
		flat := make([]any, 0, 2*len(v))
		for k, x := range v {
			flat = append(flat, k, x)
		}
		return flat
	case bool:
		if v {
			return int64(1)
		}
		return int64(0)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case *big.Int:
		return v.String()
	case redis.Error:
		// An error reply inside an array (EXEC, a script that returns
		// one) is kept as the error it is.
		return v
	}
	return a
}
