package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

var (
	// ErrNotObtained means the lock was not obtained: another owner holds it,
	// or no quorum of nodes agreed in time. It is wrapped in a *QuorumError
	// that says why, node by node.
	ErrNotObtained = errors.New("redlock: lock not obtained")

	// ErrNotHeld means a refresh or release found that the lock is no longer
	// ours: its validity had ended, or a quorum of nodes answered that the
	// key had expired or belongs to another owner.
	ErrNotHeld = errors.New("redlock: lock not held")

	// ErrLost means a held lock can no longer be guaranteed: no refresh was
	// confirmed by a quorum in time, a quorum answered that the key is gone
	// or another owner's, or its validity ran out. Lock.Err returns it, and
	// Do's function sees it as its context's cause.
	ErrLost = errors.New("redlock: lock lost")

	// ErrClosed is returned by every call on a closed Client.
	ErrClosed = errors.New("redlock: client closed")

	// ErrInvalid wraps every error about bad input: options, keys, TTLs.
	ErrInvalid = errors.New("redlock: invalid argument")

	// ErrHeld is the per-node reason, inside a *QuorumError, when a node
	// answered that another owner holds the key.
	ErrHeld = errors.New("held by another owner")

	// ErrNodeRecovering is the per-node reason when a node takes no part in
	// locking yet because its Redis process changed (a restart, or a
	// promoted replica): the error is a *RecoveringError that says for how
	// long. See WithMaxTTL.
	ErrNodeRecovering = errors.New("node is recovering")

	// ErrNotReplicated is the per-node reason when a node took the lock
	// but WAIT did not confirm the replicas asked for by WithReplicaAck.
	ErrNotReplicated = errors.New("lock not acknowledged by the replicas (WithReplicaAck)")

	// ErrNotOwner is the per-node reason, inside a release's *QuorumError,
	// when a node did not hold our value: its key had expired or belongs to
	// another owner.
	ErrNotOwner = errors.New("key expired or held by another owner")

	// ErrNodeTimeout is the per-node reason when a node did not answer
	// within the per-node timeout (see WithNodeTimeout).
	ErrNodeTimeout = quorum.ErrTimeout

	// ErrNodePending is the per-node reason when a node had not answered
	// yet when the outcome was already decided without it (a quorum agreed,
	// or enough nodes refused that none could).
	ErrNodePending = quorum.ErrPending

	// ErrNodeSkipped is the per-node reason when a node was not asked:
	// it timed out three times in a row and is skipped for one second
	// before a single probe request may reach it again.
	ErrNodeSkipped = quorum.ErrSkipped

	// ErrNodeOverloaded is the per-node reason when a node already had
	// the maximum number of requests in flight (see WithMaxInFlight).
	ErrNodeOverloaded = quorum.ErrOverloaded
)

// errReleased is Err of a released lock.
var errReleased = fmt.Errorf("%w: it was released", ErrNotHeld)

// errNilLock is the error of a nil *Lock's methods: no lock was obtained.
var errNilLock = fmt.Errorf("%w: nil lock (none was obtained)", ErrNotHeld)

// closedChan is Done of a nil *Lock, and of a lock that had ended before
// Done was first called.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// RecoveringError is the per-node reason of a node that is recovering after
// its Redis process changed. It matches ErrNodeRecovering.
type RecoveringError struct {
	// Remaining is how long the node still recovers (0 when unknown).
	Remaining time.Duration
}

// Error says that the node is recovering, and for how long.
func (e *RecoveringError) Error() string {
	left := "for a while"
	if e.Remaining > 0 {
		left = "for another " + e.Remaining.Round(time.Millisecond).String()
	}
	return "node is recovering after a restart or failover: it takes no part in locking " + left +
		", until every lock it may have forgotten has expired (the recovery window is WithMaxTTL; see docs/fencing.md)"
}

// Unwrap returns ErrNodeRecovering.
func (e *RecoveringError) Unwrap() error { return ErrNodeRecovering }

// NodeError is one node's reason for not agreeing in a quorum operation.
type NodeError struct {
	// Node is the node's index in the slice given to New.
	Node int
	// Addr describes the node for humans (host:port where known).
	Addr string
	// Err is the reason: ErrHeld, ErrNotOwner, *RecoveringError,
	// ErrNotReplicated, ErrNodeTimeout,
	// ErrNodePending, ErrNodeSkipped, ErrNodeOverloaded, or the error of
	// the Redis client.
	Err error
}

// Error names the node and its reason.
func (e *NodeError) Error() string {
	return fmt.Sprintf("node %d (%s): %v", e.Node, e.Addr, e.Err)
}

// Unwrap returns the node's reason.
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError reports an operation that did not reach a quorum of nodes,
// with the reason of each node that did not agree. It wraps ErrNotObtained
// (obtain), or ErrNotHeld when the nodes answered that the lock is no
// longer ours; errors.Is also matches each node's reason.
type QuorumError struct {
	// Op is "obtain", "refresh" or "release".
	Op string
	// Need is the quorum: N/2+1 of N nodes, or PermitQuorum for a
	// semaphore's permit.
	Need int
	// Agreed is how many nodes agreed.
	Agreed int
	// Nodes holds the reason of every node that did not agree, in node
	// order.
	Nodes []*NodeError
	// Expired is true when a quorum agreed but the validity of the lock had
	// already run out by the time it did.
	Expired bool

	sentinel error
}

// Error says what failed, how many nodes agreed of how many needed, and
// each other node's reason.
func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("redlock: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	if e.sentinel != nil {
		msg := strings.TrimPrefix(e.sentinel.Error(), "redlock: ")
		b.WriteString(msg)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%d of %d needed nodes agreed", e.Agreed, e.Need)
	if e.Expired {
		b.WriteString(", but after the lock's validity had run out")
	}
	for _, n := range e.Nodes {
		b.WriteString("; ")
		b.WriteString(n.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel (ErrNotObtained or ErrNotHeld, when set)
// followed by every node's error.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, 0, len(e.Nodes)+1)
	if e.sentinel != nil {
		errs = append(errs, e.sentinel)
	}
	for _, n := range e.Nodes {
		errs = append(errs, n)
	}
	return errs
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
