// Package driver is the seam between redlock and a Redis client library.
// Every Redis call a redlock Client makes (its scripts, pipelines, pub/sub,
// INFO and PING) goes through a Node; a driver adapts one client library
// to it, and redlock.NewFromNodes takes the nodes of any driver.
//
// Three drivers exist: go-redis (package goredis beside this one, in the
// core module; redlock.New uses it), rueidis and redigo (the modules
// github.com/redlock-go/redlock/driver/rueidis and
// github.com/redlock-go/redlock/driver/redigo, so that the core's module
// graph does not include them).
//
// # Writing a driver
//
// A driver is one small package with a type that implements Node:
//
//   - Do and Pipe send commands. The arguments are strings, integers (int,
//     int64) and []byte; Arg gives one as the string Redis receives. Replies are plain values: nil (Redis's nil), int64,
//     string (simple, bulk and verbatim strings alike), or []any of such
//     values. A RESP3 map is returned as the flat array of its keys and
//     values that RESP2 gives, a RESP3 boolean as the integer 1 or 0, and a
//     RESP3 double or big number as its string, so that the engine reads
//     one shape whatever the protocol.
//   - An error reply from Redis (WRONGTYPE, NOSCRIPT, a script's error) is
//     returned as an error that IsReply recognizes: one with a RedisError
//     method, as go-redis's are, or a ReplyError. Any other error is a
//     failure of the node or of the connection, after which the command may
//     or may not have run. A driver must never return a connection failure
//     as a reply, nor a reply as a connection failure: the engine counts
//     the first as an answer and the second as an unreachable node.
//   - A request must return once its context's deadline has passed, even
//     while the node is frozen, if Info.HonoursDeadline says so; a driver
//     that cannot promise it says false, and the engine then runs each
//     request on a goroutine of its own and stops waiting for it at the
//     deadline.
//   - Notifier returns the node's release notifications. A driver whose
//     client can open a pub/sub connection builds it with NewHub, which
//     does the reference counting, confirmations, reconnections and
//     wake-ups, from a PubSubConn of a few methods.
//
// The conformance suite, package drivertest, checks all of this on real
// redis-server processes; a driver's tests call drivertest.Run.
package driver

import (
	"context"
	"errors"
	"sync"
)

// Node is one independent Redis deployment as redlock reaches it: a
// standalone server, a Sentinel-managed master or a Redis Cluster. It must
// be safe for concurrent use.
type Node interface {
	// Do sends one command and returns its reply. args are the command's
	// name and arguments (strings, integers and []byte); the slice is not
	// kept, and may be shared by calls to other nodes: a driver must not
	// modify it.
	Do(ctx context.Context, args ...any) (any, error)
	// Pipe sends the commands in one round trip and returns each reply in
	// order. err is set when the node itself failed (no reply at all);
	// otherwise every command has its own Reply, an error reply included.
	// cmds is not kept, and must not be modified; an empty command is an
	// error of the whole pipeline. On a node that is neither Sharded nor
	// Spread every pipeline runs on one connection, in order: an acquire
	// reads its node's identity after its script in one pipeline, which
	// must be the identity of the server that ran the script. A pipeline
	// that holds a WAIT (WithReplicaAck) must run on one connection, in
	// order, on any node, so that WAIT counts the replicas of the writes
	// before it: on a Redis Cluster, a connection to the master of those
	// writes' keys, not whichever master a keyless command would be routed
	// to. A driver that cannot (WAIT after writes to several masters)
	// returns an error.
	Pipe(ctx context.Context, cmds [][]any) ([]Reply, error)
	// Notifier returns the node's side of release notifications. A Client
	// calls it once, and closes the Notifier when it closes.
	Notifier() Notifier
	// Masters returns one Node per master of a Redis Cluster, for the
	// commands that read a server's own state (INFO); nil otherwise.
	Masters(ctx context.Context) ([]Node, error)
	// Info describes the node. It does no I/O.
	Info() Info
}

// Info is what redlock needs to know of a node before it sends anything.
type Info struct {
	// Addr describes the node for humans (host:port where known), and
	// tells apart nodes given twice.
	Addr string
	// Sharded is true for a Redis Cluster: a script may touch only the
	// slot of its keys, and notifications use sharded pub/sub
	// (SSUBSCRIBE).
	Sharded bool
	// Spread is true when the client spreads the node's keys over several
	// servers itself (a go-redis Ring): the server of a lock's keys need
	// not be the one that keeps the node's identity ({PREFIX}:id), which
	// is then checked at the first contact only, as on a Redis Cluster.
	Spread bool
	// HonoursDeadline is true when a request returns at its context's
	// deadline even while the node is frozen, and holds no connection
	// that other requests wait for once it has returned.
	HonoursDeadline bool
	// Unique is true when Addr identifies the server, so that two nodes
	// with the same Addr are one server given twice. It is false when
	// Addr does not (a Sentinel client names its service, not its
	// current master).
	Unique bool
}

// Reply is one command's reply in a pipeline: its value, or the error
// reply (IsReply) that Redis gave for it.
type Reply struct {
	Val any
	Err error
}

// Notifier delivers the messages of one node's channels to Waiters, with
// one subscription per channel however many waiters it has.
//
// Notifications are hints: a waiter that misses one (a broken connection, a
// node restart) still wakes on its own timers. A Notifier must never make a
// waiter wait longer than its own bound: Subscribe and Unsubscribe do not
// block on the network.
type Notifier interface {
	// Subscribe registers w for messages on channel, subscribing on the
	// node if no other waiter is registered for it. The returned channel
	// is closed once the node has confirmed the subscription: from then
	// on no message on the channel is missed until the connection breaks,
	// and a broken connection wakes every waiter. A Notifier that is
	// closed, or a node that cannot be reached, never confirms.
	Subscribe(channel string, w *Waiter) (confirmed <-chan struct{})
	// Unsubscribe removes w from channel, unsubscribing on the node when it
	// was the last waiter.
	Unsubscribe(channel string, w *Waiter)
	// Subscribed reports whether this Notifier holds a subscription to
	// channel on the node, so that redlock can tell its own subscription
	// from other processes' in PUBLISH's count of receivers.
	Subscribed(channel string) bool
	// Close drops every subscription, wakes the waiters still registered
	// and waits for the notifier's goroutines.
	Close()
}

// IsReply reports whether err is an error reply from Redis about one
// command (it or an error in its chain has a RedisError method, as
// go-redis's error replies and ReplyError do), as opposed to a failure of
// the node or the connection.
func IsReply(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := err.(replyError); ok {
		return true
	}
	var r replyError
	return errors.As(err, &r)
}

type replyError interface {
	error
	RedisError()
}

// ReplyError is an error reply from Redis (its text, such as "NOSCRIPT No
// matching script"), for a driver whose client library does not mark its
// error replies with a RedisError method.
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// RedisError marks e as an error reply (IsReply).
func (ReplyError) RedisError() {}

// Waiter is woken, through C, by a message on any channel it is registered
// for. C has room for one wake-up; more coalesce. redlock makes the
// waiters; a Notifier calls Notify for a message and Wake for a broken
// connection.
type Waiter struct {
	C chan struct{}

	// heard, for a waiter made by NewTrackingWaiter, holds the channels
	// whose messages came since the last Heard.
	mu    sync.Mutex
	heard map[string]struct{}
}

// NewWaiter returns a Waiter.
func NewWaiter() *Waiter { return &Waiter{C: make(chan struct{}, 1)} }

// NewTrackingWaiter returns a Waiter that also records which channels woke
// it, for a waiter registered on several channels (Heard).
func NewTrackingWaiter() *Waiter {
	return &Waiter{C: make(chan struct{}, 1), heard: make(map[string]struct{})}
}

// Notify records a message on channel name, if w tracks them, and wakes w:
// what a Notifier does for a message from the server.
func (w *Waiter) Notify(name string) {
	if w.heard != nil {
		w.mu.Lock()
		w.heard[name] = struct{}{}
		w.mu.Unlock()
	}
	w.Wake()
}

// Heard returns the channels whose messages woke a tracking waiter since
// the last call, and forgets them; nil for a waiter that does not track.
// A broken connection wakes a waiter without naming a channel.
func (w *Waiter) Heard() []string {
	if w.heard == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.heard) == 0 {
		return nil
	}
	names := make([]string, 0, len(w.heard))
	for name := range w.heard {
		names = append(names, name)
	}
	clear(w.heard)
	return names
}

// Wake wakes w without naming a channel: what a Notifier does when its
// connection breaks.
func (w *Waiter) Wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}
