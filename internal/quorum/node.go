// Package quorum fans one operation out to independent Redis nodes in
// parallel, decides as soon as the outcome is known, and hands replies that
// arrive after the decision to a settle function. It also keeps each node's
// health: a bound on the work in flight, and a breaker that skips a node
// which keeps timing out instead of letting every attempt wait on it.
package quorum

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/driver"
)

// Defaults of the per-node admission control.
const (
	// DefaultMaxInFlight bounds the requests in flight to one node.
	DefaultMaxInFlight = 512
	// TripAfter consecutive timeouts open a node's breaker.
	TripAfter = 3
	// Cooldown is how long an open breaker skips the node before it lets
	// one probe request through.
	Cooldown = time.Second
)

var (
	// ErrSkipped is the per-node error when a node was not asked: it
	// timed out TripAfter times in a row and is cooling down, or it already
	// has MaxInFlight requests outstanding (ErrOverloaded, which wraps it).
	ErrSkipped = errors.New("node skipped: it timed out repeatedly")
	// ErrOverloaded is the per-node error when the node already has
	// MaxInFlight requests outstanding; it matches ErrSkipped.
	ErrOverloaded error = overloaded{}
	// ErrPending is the per-node error when a node had not answered yet
	// when the outcome was decided without it.
	ErrPending = errors.New("no reply yet when the outcome was decided")
	// ErrTimeout is the per-node error when a node did not answer within the
	// per-node timeout.
	ErrTimeout = errors.New("node did not answer in time")
)

// Node is one independent Redis deployment and its health.
type Node struct {
	Conn  driver.Node
	Index int
	Addr  string
	// HonoursDeadline is true when the client is known to abort a blocked
	// read when its context's deadline passes (ContextTimeoutEnabled).
	HonoursDeadline bool
	// Cluster is true for a Redis Cluster: a script may touch only its own
	// slot, and pub/sub is sharded.
	Cluster bool
	// Spread is true when the client spreads the node's keys over several
	// servers (driver.Info.Spread): the identity is on one of them.
	Spread bool
	// OnErrorReply, when set before the node's first request, is called
	// with every error reply the node gives (a script's error, WRONGTYPE):
	// the engine learns from one that the node is not the server it
	// identified (identity.go).
	OnErrorReply func(err error)

	maxInFlight int64
	inflight    atomic.Int64
	fails       atomic.Int32 // consecutive timeouts
	tripped     atomic.Bool
	// down counts consecutive requests that got no reply from Redis
	// (timeouts, refused or broken connections); lastDown is the error of
	// the last one. The Client's breaker reads them (Unreachable).
	down     atomic.Int32
	lastDown atomic.Pointer[error]

	mu        sync.Mutex
	openUntil time.Time
	probing   bool

	deadlines deadlines // the Done channels of single-node requests
}

// NewNode wraps a driver's node. maxInFlight ≤ 0 means
// DefaultMaxInFlight.
func NewNode(index int, c driver.Node, maxInFlight int) *Node {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	var info driver.Info
	if c != nil { // tests of rounds that never send
		info = c.Info()
	}
	return &Node{Conn: c, Index: index, Addr: info.Addr, HonoursDeadline: info.HonoursDeadline, Cluster: info.Sharded,
		Spread: info.Spread, maxInFlight: int64(maxInFlight)}
}

// admit reserves a slot for one request. probe is true when this request is
// the one allowed through an open breaker; it must be passed to done.
func (n *Node) admit(now time.Time) (probe bool, err error) {
	if n.inflight.Add(1) > n.maxInFlight {
		n.inflight.Add(-1)
		return false, ErrOverloaded
	}
	if !n.tripped.Load() {
		return false, nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.tripped.Load() {
		return false, nil
	}
	if n.probing || now.Before(n.openUntil) {
		n.inflight.Add(-1)
		return false, ErrSkipped
	}
	n.probing = true
	return true, nil
}

// outcome is what an admitted request tells about the node's health.
type outcome int

const (
	answered outcome = iota // the node answered (or refused the connection)
	timedOut                // the node did not answer before the round's deadline
)

// forceAdmit counts a request that must reach the node whatever its health
// (the clean-up of an earlier admitted request, so it is bounded by those).
func (n *Node) forceAdmit() { n.inflight.Add(1) }

// done records the outcome of an admitted request.
func (n *Node) done(probe bool, o outcome, now time.Time) {
	n.inflight.Add(-1)
	if o == timedOut {
		if f := n.fails.Add(1); f >= TripAfter || probe {
			n.mu.Lock()
			n.openUntil = now.Add(Cooldown)
			n.probing = false
			n.tripped.Store(true)
			n.mu.Unlock()
		}
		return
	}
	if n.fails.Load() != 0 {
		n.fails.Store(0)
	}
	if probe || n.tripped.Load() {
		n.mu.Lock()
		n.probing = false
		n.tripped.Store(false)
		n.mu.Unlock()
	}
}

// observe records in the node's reachability whether a finished request
// got a reply from Redis: an error reply (WRONGTYPE, NOPERM, a script's
// error) is a reply; a timeout, a refused or broken connection is not.
func (n *Node) observe(err error) {
	if err == nil || driver.IsReply(err) {
		if n.down.Load() != 0 {
			n.down.Store(0)
		}
		n.ErrorReplied(err)
		return
	}
	last := err // a copy: taking err's address would move every call's err to the heap
	n.lastDown.Store(&last)
	n.down.Add(1)
}

// ErrorReplied passes err, when it is an error reply, to OnErrorReply: a
// round observes its requests' errors itself; a caller passes those of
// the items of a pipeline.
func (n *Node) ErrorReplied(err error) {
	if err != nil && n.OnErrorReply != nil && driver.IsReply(err) {
		n.OnErrorReply(err)
	}
}

// Unreachable returns how many requests in a row got no reply from the
// node, and the error of the last one (nil when the count is 0).
func (n *Node) Unreachable() (int, error) {
	c := int(n.down.Load())
	if c == 0 {
		return 0, nil
	}
	if p := n.lastDown.Load(); p != nil {
		return c, *p
	}
	return c, nil
}

// Skipped reports whether the node's breaker is open at now: requests to
// it would be skipped.
func (n *Node) Skipped(now time.Time) bool {
	if !n.tripped.Load() {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.probing || now.Before(n.openUntil)
}

// InFlight is the number of requests outstanding to the node.
func (n *Node) InFlight() int { return int(n.inflight.Load()) }

// classify tells what a request's error says about the node: a timeout of
// the round's own deadline (requests do not see the caller's cancellation),
// or an answer.
func classify(err error) outcome {
	if err == nil {
		return answered
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return timedOut
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return timedOut
	}
	return answered
}

// overloaded is ErrOverloaded: its own message, and ErrSkipped's identity.
type overloaded struct{}

func (overloaded) Error() string        { return "node skipped: too many requests in flight" }
func (overloaded) Is(target error) bool { return target == ErrSkipped }
