// Package goredis is the go-redis v9 driver of redlock (package driver): it
// adapts a redis.UniversalClient (a standalone client, a Sentinel failover
// client or a Cluster client) to driver.Node. redlock.New uses it;
// redlock.NewFromNodes takes its nodes beside those of other drivers.
//
// Deadlines: with ContextTimeoutEnabled set in the client's options,
// go-redis sets each request's connection deadline from its context, so a
// request to a frozen node returns at its deadline and the connection is
// closed; Info.HonoursDeadline says so (unless ReadTimeout or WriteTimeout
// is -2, with which go-redis sets no connection deadline at all, the
// context's included). Without it go-redis reads until its
// ReadTimeout (3 s by default before v9.22.0, 5 s from it), and redlock
// runs each request on a goroutine of its own that it stops waiting for
// at the deadline.
//
// Auto-pipelining (WithAutoPipelining, on by default on a standalone or
// Sentinel client): requests that concurrent goroutines send to a node
// while others of the Node are in flight there leave together, as one
// go-redis pipeline (one write, one read), sent by a goroutine of the
// Node's that runs while requests are queued; a request alone on its node
// goes straight out, as a go-redis Do. A queued request returns at its own
// deadline whatever its pipeline does, and is not sent once its deadline
// has passed. WAIT and WAITAOF, whose reply depends on their connection,
// always go straight out; a Cluster or Ring client is not auto-pipelined.
// New(c, WithAutoPipelining(false)) sends every request on its own.
//
// Notifications: a driver.Hub on go-redis PubSub connections, one per
// node for every channel (one per channel on a Redis Cluster, with
// SSUBSCRIBE, on the master of the channel's slot). A connection that
// breaks, or a sharded subscription that the server ends (its slot moved
// to another master), wakes its waiters, and the hub subscribes again on
// a new connection; a PubSub quiet for 10 s is sent a PING, and counts as
// broken after 10 s more without an answer.
//
// A node that refuses connections: go-redis retries a refused dial
// (DialerRetries, 5 by default, DialerRetryTimeout apart), retries the
// request on a dial error (MaxRetries), and logs each failed series of
// dials through its process-wide logger (redis.SetLogger), which belongs
// to the application, not to this package. New adds a dial hook to a
// standalone or Sentinel client (redis.Client.AddHook), once for the
// client's life however many Nodes and redlock Clients use it; they all
// share the hook's state, so the client behaves as if it had one owner.
// A refused dial marks the node for a second (renewed by each refusal
// after it, ended at once by any connection the node accepts): while the
// mark lasts, go-redis's dials of the node fail at once, without touching
// the network, and each request of a Node first dials the node once
// itself, through the hook's dialer, outside go-redis's pool. The request
// fails at once with the refusal unless that dial connects, which ends the
// mark (while one request dials, the others fail at once). So go-redis
// logs a refusing node once when it is found refusing (once per series of
// dials in flight then), not once per request of a Node; a node that is
// back is used by the next request, and by any request, the application's
// own included, at most a second after the last refusal. A Cluster client
// gets no hook (one shard's refusal must not close every shard): there a
// refused request marks the node, requests fail at once for a second, and
// then go through go-redis again.
//
// WithReplicaAck on a Redis Cluster or a Ring: a pipeline that holds a
// WAIT is sent, whole, on one connection to the server of its keys
// (go-redis's client of that master, ClusterClient.MasterForKey, or of that
// shard, Ring.GetShardClientForKey), so that WAIT counts the replicas of
// the script it follows; go-redis's Cluster and Ring pipelines would send
// the keyless WAIT to another master or shard. A pipeline with WAIT whose
// keys are on several servers is refused with an error.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
)

// Node is a go-redis client as a driver.Node.
type Node struct {
	c    redis.UniversalClient
	info driver.Info
	// g is the client's refusal state, shared by every Node on the client
	// (refusal.go).
	g *refusal
	// ap pipelines the requests of concurrent goroutines (pipeline.go);
	// nil when WithAutoPipelining(false), or on a Cluster or Ring client.
	ap *pipeliner
}

// Option configures a Node (New).
type Option func(*options)

type options struct {
	noAutoPipelining bool
}

// WithAutoPipelining turns auto-pipelining on (the default) or off. On, the
// requests that concurrent goroutines send to a standalone or Sentinel
// node while others of the Node are in flight there leave in one write,
// as one go-redis pipeline, and their replies come back in one read; a
// request alone on its node goes straight out, as it does off. Each
// request keeps its deadline: it returns at it whatever its batch does.
// Off, every request is a go-redis Do of its own. A Cluster or Ring client
// is never auto-pipelined (a batch would wait for its slowest master).
func WithAutoPipelining(on bool) Option {
	return func(o *options) { o.noAutoPipelining = !on }
}

var _ driver.Node = (*Node)(nil)

// New wraps a go-redis client: a *redis.Client (standalone, or a Sentinel
// failover client from redis.NewFailoverClient) or a *redis.ClusterClient.
// It does no I/O. A standalone or Sentinel node is auto-pipelined unless
// opts say WithAutoPipelining(false). To a *redis.Client it adds a dial hook (AddHook) that
// watches for refused connections (see the package doc), once for the
// client's life: every Node on one client, however many redlock Clients
// use it, shares that hook and its state, so that the client behaves as
// if it had one owner. The caller keeps the client, and closes it after
// the redlock Clients that use it. A nil client, or a nil pointer of a
// client type ((*redis.Client)(nil)), gives a nil node, which
// redlock.NewFromNodes refuses with ErrInvalid.
func New(c redis.UniversalClient, opts ...Option) *Node {
	if isNil(c) {
		return nil
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	n := &Node{c: c, info: describe(c), g: refusalOf(c)}
	if rc, ok := c.(*redis.Client); ok && !o.noAutoPipelining {
		n.ap = newPipeliner(rc)
	}
	return n
}

// isNil reports whether c is nil or a nil value of a type that can be
// nil (a typed nil behind the interface).
func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// Client returns the go-redis client.
func (n *Node) Client() redis.UniversalClient { return n.c }

func describe(c redis.UniversalClient) driver.Info {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		// A failover client's Addr is a placeholder; only plain clients
		// name their server.
		return driver.Info{Addr: o.Addr, HonoursDeadline: honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout), Unique: o.Addr != "FailoverClient"}
	case *redis.ClusterClient:
		o := c.Options()
		return driver.Info{Addr: fmt.Sprintf("cluster%v", o.Addrs), Sharded: true, HonoursDeadline: honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)}
	case *redis.Ring:
		o := c.Options()
		return driver.Info{Addr: "ring", Spread: true, HonoursDeadline: honours(o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout)}
	}
	return driver.Info{Addr: fmt.Sprintf("%T", c)}
}

// honours reports whether a go-redis client of these options (after
// go-redis's Options.init) sets each request's connection deadlines from
// its context: ContextTimeoutEnabled, and neither timeout -1 (given as -2),
// with which go-redis sets no connection deadline at all, the context's
// included.
func honours(contextTimeout bool, read, write time.Duration) bool {
	return contextTimeout && read >= 0 && write >= 0
}

// Info implements driver.Node.
func (n *Node) Info() driver.Info { return n.info }

// errNoClient is the error of a Node that New did not make (a zero Node),
// which has no client.
var (
	errNoClient  = errors.New("redlock: a go-redis Node without a client: make it with goredis.New")
	errNoCommand = errors.New("redlock: an empty command")
)

// Do implements driver.Node. Redis's nil reply is returned as nil, not
// as redis.Nil.
func (n *Node) Do(ctx context.Context, args ...any) (any, error) {
	if n.c == nil {
		return nil, errNoClient
	}
	if err := n.g.check(ctx); err != nil {
		return nil, err
	}
	var (
		v   any
		err error
	)
	if n.ap != nil && !connBound1(args) {
		v, err = n.ap.do(ctx, args)
	} else {
		cmd := newCmd(ctx, args)
		_ = n.c.Process(ctx, cmd)
		v, err = cmd.Result()
	}
	if err == redis.Nil {
		n.g.observe(nil)
		return nil, nil
	}
	n.g.observe(err)
	return plain(v), err
}

// Pipe implements driver.Node. On a Redis Cluster, a pipeline with a WAIT
// runs whole on one connection to the master of its keys (see
// connPipeline).
func (n *Node) Pipe(ctx context.Context, cmds [][]any) ([]driver.Reply, error) {
	if n.c == nil {
		return nil, errNoClient
	}
	if err := n.g.check(ctx); err != nil {
		return nil, err
	}
	p, err := n.pipeline(ctx, cmds)
	if err != nil {
		return nil, err
	}
	// The commands are queued in one call, which the pipeline copies once:
	// queued one by one, its queue would grow by doubling (a batch of the
	// keep-alive holds thousands).
	out := make([]redis.Cmder, len(cmds))
	for i, args := range cmds {
		if len(args) == 0 {
			return nil, errNoCommand
		}
		out[i] = newCmd(ctx, args)
	}
	if err := p.BatchProcess(ctx, out...); err != nil {
		return nil, err
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && !driver.IsReply(err) {
		n.g.observe(err)
		return nil, err
	}
	n.g.observe(nil)
	n.redirected(ctx, out)
	replies := make([]driver.Reply, len(cmds))
	for i, c := range out {
		v, err := c.(*redis.Cmd).Result()
		if err == redis.Nil {
			v, err = nil, nil
		}
		replies[i] = driver.Reply{Val: plain(v), Err: err}
	}
	return replies, nil
}

// Notifier implements driver.Node: a driver.Hub on the client's PubSub
// connections (pubsub.go).
func (n *Node) Notifier() driver.Notifier {
	if n.c == nil {
		return driver.NewHub(nil, false, hubTimeout) // never confirms
	}
	return newNotifier(n.c, n.info.Sharded)
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
		masters = append(masters, &Node{c: c, info: describe(c), g: &refusal{}})
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
