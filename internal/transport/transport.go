// Package transport is the seam between the lock engine and a Redis client
// library: every Redis call the library makes (its scripts, pipelines,
// pub/sub, INFO and PING) goes through a Node. A driver adapts one client
// library to it; the go-redis driver is package goredis beside this one.
//
// A Node speaks in plain values. A reply is nil (Redis's nil), an int64, a
// string (simple and bulk strings alike), or a []any of such values. An
// error reply from Redis (WRONGTYPE, NOSCRIPT, a script's error) is an error
// that IsReply reports: a definite answer about one command. Any other error
// is a failure of the node or of the connection, after which the command
// may or may not have run.
package transport

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// Node is one independent Redis deployment as the engine reaches it: a
// standalone server, a Sentinel-managed master or a Redis Cluster. It must
// be safe for concurrent use.
type Node interface {
	// Do sends one command and returns its reply. args are the command's
	// name and arguments (strings, integers and []byte); the slice is not
	// kept, and may be shared by calls to other nodes.
	Do(ctx context.Context, args ...any) (any, error)
	// Pipe sends the commands in one round trip and returns each reply in
	// order. err is set when the node itself failed (no reply at all);
	// otherwise every command has its own Reply, an error reply included.
	Pipe(ctx context.Context, cmds [][]any) ([]Reply, error)
	// Notifier returns the node's side of release notifications (pub/sub).
	// The engine calls it once per Node.
	Notifier() Notifier
	// Masters returns one Node per master of a Redis Cluster, for the
	// commands that read a server's own state (INFO); nil otherwise.
	Masters(ctx context.Context) ([]Node, error)
	// Info describes the node.
	Info() Info
}

// Info is what the engine needs to know of a node before it sends anything.
type Info struct {
	// Addr describes the node for humans (host:port where known), and
	// tells apart nodes given twice.
	Addr string
	// Sharded is true for a Redis Cluster: a script may touch only the
	// slot of its keys, and notifications use sharded pub/sub.
	Sharded bool
	// HonoursDeadline is true when a request returns at its context's
	// deadline even while the node is frozen, and frees its connection.
	HonoursDeadline bool
	// Unique is false when Addr does not identify the server (a Sentinel
	// client names its service, not its master).
	Unique bool
}

// Reply is one command's reply in a pipeline.
type Reply struct {
	Val any
	Err error
}

// Notifier delivers the messages of one node's channels to Waiters, with
// one subscription per channel however many waiters it has.
type Notifier interface {
	// Subscribe registers w for messages on channel, subscribing on the
	// node if no other waiter is registered for it. The returned channel
	// is closed once the node has confirmed the subscription: from then
	// on no message on the channel is missed. A broken connection wakes
	// every waiter.
	Subscribe(channel string, w *Waiter) (confirmed <-chan struct{})
	// Unsubscribe removes w from channel, unsubscribing on the node when it
	// was the last waiter.
	Unsubscribe(channel string, w *Waiter)
	// Subscribed reports whether the node is subscribed to channel here.
	Subscribed(channel string) bool
	// Close drops every subscription and waits for the notifier's
	// goroutines.
	Close()
}

// IsReply reports whether err is an error reply from Redis about one
// command, as opposed to a failure of the node or the connection. A driver
// returns error replies as errors that have a RedisError method, as
// go-redis's do.
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

// HasPrefix reports whether err is an error reply that starts with prefix
// (NOSCRIPT, or a script's REDLOCK_KIND).
func HasPrefix(err error, prefix string) bool {
	return IsReply(err) && strings.HasPrefix(err.Error(), prefix)
}

// ErrUnexpected wraps a reply of a type or value the engine did not expect.
var ErrUnexpected = errors.New("unexpected reply")

// Int64 is a reply that must be an integer.
func Int64(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	n, ok := v.(int64)
	if !ok {
		return 0, unexpected(v)
	}
	return n, nil
}

// Slice is a reply that must be an array.
func Slice(v any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	s, ok := v.([]any)
	if !ok {
		return nil, unexpected(v)
	}
	return s, nil
}

// String is a reply that must be a string.
func String(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", unexpected(v)
	}
	return s, nil
}

func unexpected(v any) error {
	return &unexpectedError{v}
}

type unexpectedError struct{ v any }

func (e *unexpectedError) Error() string {
	return "redlock: " + ErrUnexpected.Error() + ": " + describe(e.v)
}

func (e *unexpectedError) Unwrap() error { return ErrUnexpected }

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case string:
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		return "string " + v
	case int64:
		return "integer"
	case []any:
		return "array"
	}
	return "value of another type"
}

// Waiter is woken, through C, by a message on any channel it is registered
// for. C has room for one wake-up; more coalesce.
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
// what a message from the server does, for a caller that learned of a
// release by other means.
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

// Wake wakes w without naming a channel.
func (w *Waiter) Wake() {
	select {
	case w.C <- struct{}{}:
	default:
	}
}
