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
// A node that refuses connections: go-redis retries a refused dial
// (DialerRetries, 5 by default, DialerRetryTimeout apart), retries the
// request on a dial error (MaxRetries), and logs each failed series of
// dials through its process-wide logger (redis.SetLogger), which belongs
// to the application, not to this package. New adds a dial hook to a
// standalone or Sentinel client (redis.Client.AddHook; the hook stays on
// the client) that sees the first refused dial. From then on go-redis's
// dials of the node fail at once, without touching the network, and each
// request first dials the node once itself, through the hook's dialer,
// outside go-redis's pool: the request fails at once with the refusal
// unless that dial connects (while one request dials, the others fail at
// once). So go-redis logs a refusing node once when it is found refusing
// (once per series of dials in flight then), not once per request, and a
// node that is back is used by the next request. A Cluster client gets no
// hook (one shard's refusal must not close every shard): there the first
// refused request closes the gate, and once a second one request goes
// through go-redis to probe.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net"
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
	// connection; while it is, requests fail at once with refused. With a
	// probe (the dial hook's), each request dials the node first and goes
	// on if it connects; without, one request goes through to go-redis
	// once refusedUntil has passed, and sets it again if refused.
	refusedUntil atomic.Int64
	refused      atomic.Pointer[error]
	// probe, set by the dial hook at the first refused dial, dials the
	// node outside go-redis's pool; probing is set while a request does.
	probe   atomic.Pointer[func(context.Context) error]
	probing atomic.Bool
}

// refusedFor is how long a node without a dial hook that refused a
// connection is not dialled again.
const refusedFor = time.Second

// errRefused is the error of a node that refused connections: it names
// the dial's error and is syscall.ECONNREFUSED for errors.Is. It does not
// unwrap to the dial's error: go-redis retries a request whose error is a
// dial's *net.OpError, or carries a Timeout method as syscall.Errno does,
// and the dial hook's refusal must end the request instead.
type errRefused struct {
	since time.Time
	err   error
}

func (e *errRefused) Error() string {
	return fmt.Sprintf("connection refused: the node has refused connections for %v: %v",
		time.Since(e.since).Round(time.Millisecond), e.err)
}

// Is reports whether target is syscall.ECONNREFUSED.
func (e *errRefused) Is(target error) bool { return target == syscall.ECONNREFUSED }

// gate fails a request at once while the node refuses connections, unless
// it dials the node through the dial hook's probe (when there is one, and
// no other request is dialling) and connects, or (without a probe) it is
// the one request each refusedFor that goes through to go-redis.
func (n *Node) gate(ctx context.Context) error {
	until := n.refusedUntil.Load()
	if until == 0 {
		return nil
	}
	if p := n.probe.Load(); p != nil {
		if n.probing.CompareAndSwap(false, true) {
			err := (*p)(ctx)
			n.probing.Store(false)
			if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
				// Accepted, or not refused (a timeout is the request's to
				// meet): go-redis dials it.
				n.refusedUntil.Store(0)
				return nil
			}
		}
	} else if now := time.Now().UnixNano(); now >= until && n.refusedUntil.CompareAndSwap(until, now+int64(refusedFor)) {
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
		n.refuse(err)
		return
	}
	if n.refusedUntil.Load() != 0 {
		n.refusedUntil.Store(0)
	}
}

// refuse closes the gate after a refused connection, unless err is the
// gate's own refusal.
func (n *Node) refuse(err error) {
	var already *errRefused
	if errors.As(err, &already) {
		return
	}
	var e error = &errRefused{since: time.Now(), err: err}
	n.refused.Store(&e)
	n.refusedUntil.Store(time.Now().Add(refusedFor).UnixNano())
}

// dialWatch is the go-redis hook New adds to a standalone or Sentinel
// client: it watches the client's dials, and keeps go-redis's dials off a
// node that refuses them.
type dialWatch struct{ n *Node }

// DialHook implements redis.Hook. A refused dial closes the node's gate
// and gives it a probe that dials through next; while the gate is closed
// a dial fails at once with the refusal, without touching the network,
// so that a series of dials in flight ends soon. Every refused dial
// returns the node's errRefused, which go-redis does not retry.
func (w dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if w.n.refusedUntil.Load() != 0 {
			if p := w.n.refused.Load(); p != nil {
				return nil, *p
			}
		}
		conn, err := next(ctx, network, addr)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			probe := func(ctx context.Context) error {
				c, err := next(ctx, network, addr)
				if err != nil {
					return err
				}
				return c.Close()
			}
			w.n.probe.Store(&probe)
			w.n.refuse(err)
			if p := w.n.refused.Load(); p != nil {
				return nil, *p
			}
		}
		return conn, err
	}
}

// ProcessHook implements redis.Hook: requests pass unchanged.
func (dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook implements redis.Hook: pipelines pass unchanged.
func (dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

var _ driver.Node = (*Node)(nil)

// New wraps a go-redis client: a *redis.Client (standalone, or a Sentinel
// failover client from redis.NewFailoverClient) or a *redis.ClusterClient.
// It does no I/O. To a *redis.Client it adds a dial hook (AddHook) that
// watches for refused connections (see the package doc); the hook stays
// on the client, so wrap each client once rather than once per use. The
// caller keeps the client, and closes it after the redlock Client that
// uses the node.
func New(c redis.UniversalClient) *Node {
	n := &Node{c: c, info: describe(c)}
	if rc, ok := c.(*redis.Client); ok {
		rc.AddHook(dialWatch{n})
	}
	return n
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
	if err := n.gate(ctx); err != nil {
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
	if err := n.gate(ctx); err != nil {
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
		// No dial hook: the cluster client's node clients are its own,
		// and a hook added on each call would stay on them.
		masters = append(masters, &Node{c: c, info: describe(c)})
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
