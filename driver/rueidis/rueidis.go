// Package rueidis is the rueidis driver of redlock (package driver): it
// adapts a rueidis.Client (github.com/redis/rueidis) to driver.Node, for
// redlock.NewFromNodes. A standalone server, a Sentinel-managed master
// (ClientOption.Sentinel) and a Redis Cluster are supported.
//
//	c, err := rueidis.NewClient(rueidis.ClientOption{
//		InitAddress:       []string{"10.0.0.1:6379"},
//		ForceSingleClient: true, // a standalone node; see below
//	})
//	...
//	lock, err := redlock.NewFromNodes([]driver.Node{rueidisdriver.New(c)})
//
// For a standalone node, set ForceSingleClient: NewClient then returns a
// client even when the server is down (with the dial's error, which a
// Redlock deployment of several nodes should log and ignore), instead of
// failing, and it does not probe the server with CLUSTER commands.
//
// Auto-pipelining: every command goes through rueidis's Do and DoMulti, so
// the requests of concurrent goroutines to one node share its pipelined
// connection and leave in one write, as rueidis does for any non-blocking
// command. A request alone on its connection is written and read at once
// (rueidis's synchronous path); once requests overlap, rueidis switches the
// connection to its pipelining mode and keeps it there. WAIT (WithReplicaAck)
// blocks its connection, so it is sent as a blocking command, on a
// connection of rueidis's pool of its own, with the acquire it follows. On
// a Redis Cluster rueidis sends a keyless command of a pipeline with the
// commands of the pipeline's slot, so WAIT reaches the master that ran the
// acquire; a pipeline with a keyless command and keys of several slots,
// which rueidis would panic on, is refused with an error.
//
// Deadlines: a request returns at its context's deadline even while the
// node is frozen (Info.HonoursDeadline), with one limit below. A request
// alone on its connection sets the connection's deadline, and a timeout
// closes that connection; a pipelined request stops waiting at its
// deadline, its reply is read and dropped later by a goroutine rueidis
// starts for it, and the connection is closed once it has waited for
// replies longer than ClientOption.ConnWriteTimeout (10 s by default).
//
// The limit: rueidis's default queue of pipelined requests, a ring of
// 2^RingScaleEachConn slots per connection (1024 by default), does not
// watch the context when it is full, and a request that stopped waiting
// keeps its slot until its reply comes or the connection is closed. When
// more requests are outstanding on a frozen node's connection than its
// ring holds, the next ones wait past their deadline, up to
// ConnWriteTimeout. redlock keeps at most WithMaxInFlight requests (512 by
// default) in flight to a node, and a node that times out three times in
// a row is skipped but for a probe a second; a failed attempt adds its
// clean-ups, on goroutines of the Client that Close waits for. Measured
// with a ring of 256 and one connection, 600 obtains on a frozen node: up
// to 12 s each with WithMaxInFlight(512); with WithMaxInFlight(200), each
// within its deadline, but Close waited 11.7 s for the clean-ups. Run the
// process with RUEIDIS_QUEUE_TYPE=flowbuffer, rueidis's queue that watches
// the context, to keep every request within its deadline whatever the
// load (the same run: 0.4 s at most, Close 0.3 s); or keep WithMaxInFlight
// well below the ring, and the node's other traffic in mind.
//
// Notifications: pub/sub, on a connection of rueidis's pool dedicated to
// it (Client.Dedicate with pub/sub hooks), one per node, or one per
// channel on a Redis Cluster (SSUBSCRIBE), built with driver.Hub. rueidis
// can also track keys for client-side caching and report their
// invalidations, which rueidislock waits on; redlock does not use them.
// Its wait protocol is built on the release channel: a release publishes
// only when a waiter marked the lock, PUBLISH's count of receivers tells
// the releasing Client that waiters in other processes heard it (its grace
// period lets them take the lock), and a waiter that has subscribed looks
// for a release it may have missed. An invalidation would also come for
// every refresh of the held lock (PEXPIRE writes the key), it would need
// a tracked read of the key by every waiter, and the releasing Client
// would not learn who heard it.
//
// On a Redis Cluster, commands are routed by their first key: the keys of
// EVAL and EVALSHA (after numkeys), none for the commands that name no key
// (PING, INFO, TIME, WAIT, PUBLISH, PUBSUB, SCRIPT, CLUSTER, CONFIG,
// CLIENT...), and the first argument of any other command. Those are the
// commands redlock sends.
package rueidis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/driver"
)

// hubTimeout bounds each dial, SUBSCRIBE and UNSUBSCRIBE of a node's
// notifications.
const hubTimeout = 2 * time.Second

// Node is a rueidis client as a driver.Node.
type Node struct {
	c    rueidis.Client
	info driver.Info
}

var _ driver.Node = (*Node)(nil)

// New wraps a rueidis client: standalone (ForceSingleClient, or a single
// InitAddress that is not a cluster), Sentinel (ClientOption.Sentinel) or
// Redis Cluster. It does no I/O. The caller keeps the client, and closes
// it after the redlock Client that uses the node. A nil client (or a nil
// pointer behind the interface) gives a nil node, which
// redlock.NewFromNodes refuses with ErrInvalid.
func New(c rueidis.Client) *Node {
	if c == nil {
		return nil
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil // a typed nil behind the interface
	}
	return &Node{c: c, info: describe(c)}
}

// Client returns the rueidis client.
func (n *Node) Client() rueidis.Client { return n.c }

func describe(c rueidis.Client) driver.Info {
	addrs := make([]string, 0, 1)
	for addr := range c.Nodes() {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	switch c.Mode() {
	case rueidis.ClientModeCluster:
		return driver.Info{Addr: fmt.Sprintf("cluster%v", addrs), Sharded: true, HonoursDeadline: true}
	case rueidis.ClientModeSentinel:
		// The master the sentinels named when the client started: it
		// changes with a failover, so it does not identify the node.
		return driver.Info{Addr: fmt.Sprintf("sentinel master %v", addrs), HonoursDeadline: true}
	}
	if len(addrs) == 1 {
		return driver.Info{Addr: addrs[0], HonoursDeadline: true, Unique: true}
	}
	return driver.Info{Addr: fmt.Sprintf("%v", addrs), HonoursDeadline: true}
}

// Info implements driver.Node.
func (n *Node) Info() driver.Info { return n.info }

// Do implements driver.Node.
func (n *Node) Do(ctx context.Context, args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errNoCommand
	}
	if n.c == nil {
		return nil, errNoClient
	}
	return reply(n.c.Do(ctx, n.build(args)))
}

// Pipe implements driver.Node: one DoMulti. err is set when no command
// got a reply.
func (n *Node) Pipe(ctx context.Context, cmds [][]any) ([]driver.Reply, error) {
	if len(cmds) == 0 {
		return nil, nil
	}
	if n.c == nil {
		return nil, errNoClient
	}
	built := make(rueidis.Commands, len(cmds))
	for i, args := range cmds {
		if len(args) == 0 {
			return nil, errNoCommand
		}
		built[i] = n.build(args)
	}
	if n.info.Sharded && mixesSlots(n.c, built) {
		// rueidis sends a keyless command with the commands of its slot,
		// and panics when the others span several slots.
		return nil, errMixedSlots
	}
	results := n.c.DoMulti(ctx, built...)
	replies := make([]driver.Reply, len(results))
	failed := 0
	var first error
	for i, r := range results {
		if err := r.NonRedisError(); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
		replies[i].Val, replies[i].Err = reply(r)
	}
	if failed == len(results) {
		return nil, first
	}
	return replies, nil
}

var (
	errNoCommand = errors.New("redlock: an empty command")
	// errNoClient is the error of a Node that New did not make (a zero
	// Node), which has no client.
	errNoClient   = errors.New("redlock: a rueidis Node without a client: make it with New")
	errMixedSlots = errors.New("redlock: on a Redis Cluster, a pipeline with a keyless command (WAIT) needs keys of one slot, for the command to run on their connection")
)

// mixesSlots reports whether cmds holds a command with no key beside
// commands of more than one slot.
func mixesSlots(c rueidis.Client, cmds rueidis.Commands) bool {
	none := c.B().Ping().Build() // a command without a key
	noSlot := none.Slot()
	keyless, slot, several := false, noSlot, false
	for i := range cmds {
		switch s := cmds[i].Slot(); {
		case s == noSlot:
			keyless = true
		case slot == noSlot:
			slot = s
		case s != slot:
			several = true
		}
	}
	return keyless && several
}

// build makes the rueidis command of args; on a Redis Cluster it names
// the command's keys, so that rueidis routes it to their slot. The
// arguments are appended one by one to the command rueidis takes from its
// pool, with no slice of their own.
func (n *Node) build(args []any) rueidis.Completed {
	name := driver.Arg(args[0])
	a := n.c.B().Arbitrary(name)
	if !n.info.Sharded {
		for _, arg := range args[1:] {
			a = a.Args(driver.Arg(arg))
		}
	} else {
		first, last := keyRange(name, args)
		for i := 1; i < len(args); i++ {
			if i >= first && i < last {
				a = a.Keys(driver.Arg(args[i]))
			} else {
				a = a.Args(driver.Arg(args[i]))
			}
		}
	}
	// WAIT blocks its connection: rueidis sends a blocking command on a
	// connection of its own rather than stalling the pipelined one.
	if strings.EqualFold(name, "WAIT") || strings.EqualFold(name, "WAITAOF") {
		return a.Blocking()
	}
	return a.Build()
}

// keyRange returns the positions in args of a command's keys, [first,
// last).
func keyRange(name string, args []any) (first, last int) {
	switch strings.ToUpper(name) {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
		if len(args) < 3 {
			return 0, 0
		}
		numkeys, err := strconv.Atoi(driver.Arg(args[2]))
		if err != nil || numkeys < 0 {
			return 0, 0
		}
		return 3, min(3+numkeys, len(args))
	case "PING", "ECHO", "INFO", "TIME", "WAIT", "WAITAOF", "PUBLISH", "PUBSUB", "SCRIPT",
		"CLUSTER", "CONFIG", "CLIENT", "COMMAND", "DBSIZE", "FLUSHALL", "FLUSHDB", "LASTSAVE",
		"ROLE", "HELLO", "AUTH", "SELECT", "DEBUG", "MEMORY", "LATENCY", "SLOWLOG", "FUNCTION":
		return 0, 0
	}
	return 1, min(2, len(args))
}

// reply turns a rueidis result into the shapes of driver.Node: a
// connection failure as it is, an error reply as a driver.ReplyError with
// Redis's text (rueidis drops its "ERR " prefix), nil, integers, strings,
// arrays, and maps flattened.
func reply(r rueidis.RedisResult) (any, error) {
	if err := r.NonRedisError(); err != nil {
		return nil, err
	}
	msg, _ := r.ToMessage()
	return plain(&msg)
}

func plain(m *rueidis.RedisMessage) (any, error) {
	switch {
	case m.IsNil():
		return nil, nil
	case m.IsInt64():
		return m.ToInt64()
	case m.IsString():
		return m.ToString()
	case m.IsArray():
		elems, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(elems))
		for i := range elems {
			v, err := plain(&elems[i])
			if err != nil && !driver.IsReply(err) {
				return nil, err
			}
			if err != nil {
				v = err // an error reply inside an array
			}
			out[i] = v
		}
		return out, nil
	case m.IsMap():
		fields, err := m.ToMap()
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, 2*len(fields))
		for k, x := range fields {
			v, err := plain(&x)
			if err != nil && !driver.IsReply(err) {
				return nil, err
			}
			if err != nil {
				v = err
			}
			out = append(out, k, v)
		}
		return out, nil
	case m.IsBool():
		b, err := m.AsBool()
		if b {
			return int64(1), err
		}
		return int64(0), err
	}
	// An error reply, a double, a big number or a verbatim string: their
	// text, which ToString returns for every one of them.
	s, _ := m.ToString()
	if m.Error() != nil {
		return nil, driver.ReplyError(s)
	}
	if !m.IsFloat64() && len(s) >= 4 && s[3] == ':' {
		s = s[4:] // a verbatim string's format ("txt:"); a big number has none
	}
	return s, nil
}

// Masters implements driver.Node: the masters of a Redis Cluster, from
// CLUSTER SLOTS, each a node on rueidis's client of it.
func (n *Node) Masters(ctx context.Context) ([]driver.Node, error) {
	if !n.info.Sharded || n.c == nil {
		return nil, nil
	}
	v, err := n.Do(ctx, "CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	slots, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redlock: CLUSTER SLOTS: unexpected reply %T", v)
	}
	clients := n.c.Nodes()
	var masters []driver.Node
	seen := make(map[string]bool)
	for _, s := range slots {
		r, ok := s.([]any)
		if !ok || len(r) < 3 {
			return nil, fmt.Errorf("redlock: CLUSTER SLOTS: unexpected range %v", s)
		}
		m, ok := r[2].([]any)
		if !ok || len(m) < 2 {
			return nil, fmt.Errorf("redlock: CLUSTER SLOTS: unexpected master %v", r[2])
		}
		addr := fmt.Sprintf("%v:%v", m[0], m[1])
		if seen[addr] {
			continue
		}
		seen[addr] = true
		c, ok := clients[addr]
		if !ok {
			return nil, fmt.Errorf("redlock: the master %s of CLUSTER SLOTS is not among the client's nodes", addr)
		}
		masters = append(masters, New(c))
	}
	return masters, nil
}

// Notifier implements driver.Node: a driver.Hub on dedicated connections.
func (n *Node) Notifier() driver.Notifier {
	sharded := n.info.Sharded
	if n.c == nil {
		return driver.NewHub(nil, sharded, hubTimeout) // never confirms
	}
	return driver.NewHub(func(context.Context, string) (driver.PubSubConn, error) {
		return newPubSub(n.c, sharded), nil
	}, sharded, hubTimeout)
}

// pubsub is a dedicated rueidis connection with pub/sub hooks, as a
// driver.PubSubConn. The hooks run on rueidis's reading goroutine of the
// connection, and hand what they read to Receive.
type pubsub struct {
	dc      rueidis.DedicatedClient
	sharded bool
	events  chan driver.PubSubEvent
	errs    <-chan error // closed when the hooks will not be called again
	done    chan struct{}
	close   sync.Once
}

var errClosed = errors.New("redlock: the pub/sub connection is closed")

// newPubSub takes a connection from c's pool of dedicated connections
// (for a Redis Cluster, the connection is picked by the first
// subscription's slot).
func newPubSub(c rueidis.Client, sharded bool) *pubsub {
	dc, _ := c.Dedicate() // dc.Close returns it to the pool
	p := &pubsub{dc: dc, sharded: sharded, events: make(chan driver.PubSubEvent, 64), done: make(chan struct{})}
	p.errs = dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			p.push(driver.PubSubEvent{Kind: driver.EventMessage, Channel: m.Channel})
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			switch s.Kind {
			case "subscribe", "ssubscribe":
				p.push(driver.PubSubEvent{Kind: driver.EventSubscribed, Channel: s.Channel})
			case "unsubscribe", "sunsubscribe":
				p.push(driver.PubSubEvent{Kind: driver.EventUnsubscribed, Channel: s.Channel})
			}
		},
	})
	return p
}

func (p *pubsub) push(e driver.PubSubEvent) {
	select {
	case p.events <- e:
	case <-p.done:
	}
}

// Subscribe implements driver.PubSubConn: rueidis returns once the
// server has confirmed.
func (p *pubsub) Subscribe(ctx context.Context, channel string) error {
	if p.sharded {
		return p.dc.Do(ctx, p.dc.B().Ssubscribe().Channel(channel).Build()).Error()
	}
	return p.dc.Do(ctx, p.dc.B().Subscribe().Channel(channel).Build()).Error()
}

// Unsubscribe implements driver.PubSubConn.
func (p *pubsub) Unsubscribe(ctx context.Context, channel string) error {
	return p.dc.Do(ctx, p.dc.B().Unsubscribe().Channel(channel).Build()).Error()
}

// Receive implements driver.PubSubConn.
func (p *pubsub) Receive() (driver.PubSubEvent, error) {
	select {
	case e := <-p.events:
		return e, nil
	default:
	}
	select {
	case e := <-p.events:
		return e, nil
	case err, ok := <-p.errs:
		if !ok || err == nil {
			err = errClosed
		}
		return driver.PubSubEvent{}, err
	case <-p.done:
		return driver.PubSubEvent{}, errClosed
	}
}

// Close implements driver.PubSubConn: the connection is closed (rueidis
// waits at most a second for a frozen server) and leaves the pool.
func (p *pubsub) Close() error {
	p.close.Do(func() {
		close(p.done)
		p.dc.Close()
	})
	return nil
}
