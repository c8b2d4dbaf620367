// Package redigo is the redigo driver of redlock (package driver): it
// adapts a redigo connection pool (github.com/gomodule/redigo/redis) to
// driver.Node, for redlock.NewFromNodes.
//
//	addr := "10.0.0.1:6379"
//	pool := &redis.Pool{
//		DialContext: func(ctx context.Context) (redis.Conn, error) {
//			return redis.DialContext(ctx, "tcp", addr)
//		},
//		MaxIdle:     16,
//		IdleTimeout: time.Minute,
//	}
//	defer pool.Close()
//	lock, err := redlock.NewFromNodes([]driver.Node{redigodriver.New(pool, addr)})
//
// redigo speaks to one server: a standalone node. It has no Sentinel and
// no Redis Cluster support of its own, and neither has this driver (so
// WithReplicaAck's WAIT always runs on the connection of the acquire it
// follows, and Cluster is not a topology this driver offers). A
// pool whose Dial asks Sentinel for the master (a library of your own
// choice) is a node too; give it the address "", since its server changes
// with a failover. This driver has not been tested that way.
//
// Deadlines: a request takes a connection with Pool.GetContext (which
// waits for a free one, when the pool is bounded, within the context) and
// sends the command with a read deadline at the context's deadline
// (DoWithTimeout), so that a frozen server does not hold it longer; the
// connection is then closed, not returned to the pool. That needs
// Pool.DialContext, whose dial and handshake (AUTH, SELECT) honour the
// context too: with Pool.Dial alone, a dial to an unreachable host waits
// for redigo's connect timeout (30 s by default), and the node says that
// it does not honour deadlines (Info.HonoursDeadline), so that redlock runs
// each request on a goroutine of its own. A context without a deadline
// that can be cancelled uses DoContext, which runs the command on a
// goroutine that redigo starts for it.
//
// After a server restart, each idle connection of the pool fails one
// request before the pool dials again; Pool.TestOnBorrow avoids it, at a
// PING per borrow.
//
// Notifications: pub/sub on a connection of its own per node, dialled
// with the pool's DialContext (or Dial) and not taken from the pool, built
// with driver.Hub. redigo has no RESP3: the connection is quiet between
// messages, so it sends a PING every 10 s and counts it broken when
// nothing has been read for 30 s.
package redigo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/driver"
)

// hubTimeout bounds each dial, SUBSCRIBE and UNSUBSCRIBE of a node's
// notifications.
const hubTimeout = 2 * time.Second

// The liveness of a pub/sub connection: a PING every pingEvery, and the
// connection counts as broken when nothing was read for quietFor.
const (
	pingEvery = 10 * time.Second
	quietFor  = 3 * pingEvery
)

// Node is a redigo pool as a driver.Node.
type Node struct {
	pool *redis.Pool
	info driver.Info
}

var _ driver.Node = (*Node)(nil)

// New wraps a pool of connections to the server at addr (host:port),
// which names the node in errors and lets redlock refuse one server given
// twice; "" for a pool whose Dial chooses its server (it is then not
// checked). Give the pool a DialContext (see the package documentation).
// New does no I/O. The caller keeps the pool, and closes it after the
// redlock Client that uses the node. A nil pool gives a nil node, which
// redlock.NewFromNodes refuses with ErrInvalid.
func New(pool *redis.Pool, addr string) *Node {
	if pool == nil {
		return nil
	}
	info := driver.Info{Addr: addr, Unique: addr != "", HonoursDeadline: pool.DialContext != nil}
	if addr == "" {
		info.Addr = fmt.Sprintf("redigo pool %p", pool)
	}
	return &Node{pool: pool, info: info}
}

// Pool returns the redigo pool.
func (n *Node) Pool() *redis.Pool { return n.pool }

// Info implements driver.Node.
func (n *Node) Info() driver.Info { return n.info }

// Masters implements driver.Node: a redigo node is never a Redis Cluster.
func (n *Node) Masters(context.Context) ([]driver.Node, error) { return nil, nil }

var (
	errNoCommand = errors.New("redlock: an empty command")
	// errNoPool is the error of a Node that New did not make (a zero
	// Node), which has no pool.
	errNoPool = errors.New("redlock: a redigo Node without a pool: make it with New")
)

// Do implements driver.Node.
func (n *Node) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errNoCommand
	}
	name, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("redlock: a command name of type %T", args[0])
	}
	if n.pool == nil {
		return nil, errNoPool
	}
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	v, err := do(ctx, conn, name, args[1:]...)
	if err != nil {
		return nil, replyErr(err)
	}
	return plain(v), nil
}

// Pipe implements driver.Node: the commands are written together and their
// replies read together, on one connection.
func (n *Node) Pipe(ctx context.Context, cmds [][]any) ([]driver.Reply, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	if n.pool == nil {
		return nil, errNoPool
	}
	conn, err := n.pool.GetContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	for _, args := range cmds {
		if len(args) == 0 {
			return nil, errNoCommand
		}
		name, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("redlock: a command name of type %T", args[0])
		}
		if err := conn.Send(name, args[1:]...); err != nil {
			return nil, err
		}
	}
	v, err := do(ctx, conn, "") // flush, and read every pending reply
	if err != nil {
		return nil, err
	}
	all, ok := v.([]any)
	if !ok || len(all) != len(cmds) {
		return nil, fmt.Errorf("redlock: %d replies to a pipeline of %d commands", len(all), len(cmds))
	}
	replies := make([]driver.Reply, len(all))
	for i, r := range all {
		if e, ok := r.(redis.Error); ok {
			replies[i].Err = driver.ReplyError(e)
			continue
		}
		replies[i].Val = plain(r)
	}
	return replies, nil
}

// do sends a command on conn within ctx: with a read deadline at ctx's
// deadline, or, for a context without one that can be cancelled, with
// redigo's DoContext.
func do(ctx context.Context, conn redis.Conn, name string, args ...any) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		d := time.Until(dl)
		if d <= 0 {
			return nil, context.DeadlineExceeded
		}
		return redis.DoWithTimeout(conn, d, name, args...)
	}
	if ctx.Done() != nil {
		return redis.DoContext(conn, ctx, name, args...)
	}
	return conn.Do(name, args...)
}

// replyErr turns redigo's error reply into a driver.ReplyError; other
// errors are failures of the connection.
func replyErr(err error) error {
	if e, ok := err.(redis.Error); ok {
		return driver.ReplyError(e)
	}
	return err
}

// plain turns a redigo reply into the shapes of driver.Node: bulk strings
// ([]byte) become strings, arrays are converted in place, and an error
// reply inside an array becomes a driver.ReplyError. redigo speaks RESP2
// only: there are no maps, booleans or doubles.
func plain(v any) any {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case []any:
		for i, x := range v {
			v[i] = plain(x)
		}
		return v
	case redis.Error:
		return driver.ReplyError(v)
	}
	return v
}

// Notifier implements driver.Node: a driver.Hub on connections of its own.
func (n *Node) Notifier() driver.Notifier {
	return driver.NewHub(func(ctx context.Context, _ string) (driver.PubSubConn, error) {
		var (
			c   redis.Conn
			err error
		)
		switch {
		case n.pool == nil:
			err = errNoPool
		case n.pool.DialContext != nil:
			c, err = n.pool.DialContext(ctx)
		case n.pool.Dial != nil:
			c, err = n.pool.Dial()
		default:
			err = errors.New("redlock: the redigo pool has neither DialContext nor Dial")
		}
		if err == nil && c == nil {
			err = errors.New("redlock: the redigo pool's dial returned no connection and no error")
		}
		if err != nil {
			return nil, err
		}
		p := &pubsub{c: c, done: make(chan struct{})}
		p.pinger.Go(p.ping)
		return p, nil
	}, false, hubTimeout)
}

// pubsub is a redigo connection in pub/sub mode, as a driver.PubSubConn.
type pubsub struct {
	c      redis.Conn
	wmu    sync.Mutex // one writer at a time: the hub's commands and the PINGs
	done   chan struct{}
	pinger sync.WaitGroup
	once   sync.Once
}

func (p *pubsub) write(cmd, channel string) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var err error
	if channel == "" {
		err = p.c.Send(cmd)
	} else {
		err = p.c.Send(cmd, channel)
	}
	if err != nil {
		return err
	}
	return p.c.Flush()
}

// Subscribe implements driver.PubSubConn.
func (p *pubsub) Subscribe(_ context.Context, channel string) error {
	return p.write("SUBSCRIBE", channel)
}

// Unsubscribe implements driver.PubSubConn.
func (p *pubsub) Unsubscribe(_ context.Context, channel string) error {
	return p.write("UNSUBSCRIBE", channel)
}

// ping writes a PING every pingEvery until Close.
func (p *pubsub) ping() {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if p.write("PING", "") != nil {
				return // the connection failed: Receive says so
			}
		case <-p.done:
			return
		}
	}
}

// Receive implements driver.PubSubConn.
func (p *pubsub) Receive() (driver.PubSubEvent, error) {
	for {
		v, err := redis.ReceiveWithTimeout(p.c, quietFor)
		if err != nil {
			return driver.PubSubEvent{}, err
		}
		a, ok := v.([]any)
		if !ok || len(a) < 2 {
			continue // PONG, outside pub/sub mode
		}
		kind, _ := a[0].([]byte)
		channel, _ := a[1].([]byte)
		switch string(kind) {
		case "message":
			return driver.PubSubEvent{Kind: driver.EventMessage, Channel: string(channel)}, nil
		case "subscribe":
			return driver.PubSubEvent{Kind: driver.EventSubscribed, Channel: string(channel)}, nil
		case "unsubscribe":
			return driver.PubSubEvent{Kind: driver.EventUnsubscribed, Channel: string(channel)}, nil
		}
	}
}

// Close implements driver.PubSubConn: it closes the network connection,
// which ends a Receive or write blocked on it, and stops the PINGs.
func (p *pubsub) Close() error {
	var err error
	p.once.Do(func() {
		close(p.done)
		err = p.c.Close()
		p.pinger.Wait()
	})
	return err
}
