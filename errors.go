package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

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

	// ErrInvalid wraps every error about bad input: options, names, TTLs.
	ErrInvalid = errors.New("redlock: invalid argument")

	// ErrBreakerOpen means an obtain was refused at once, without asking
	// the nodes, because the Client's circuit breaker is open: fewer than a
	// quorum of nodes are reachable (WithBreaker). The error is a
	// *QuorumError that also matches ErrNotObtained and names each
	// unreachable node.
	ErrBreakerOpen = errors.New("redlock: circuit breaker open")

	// ErrDegraded is the error of a refresh of a degraded lock once the
	// circuit breaker has closed after the lock was taken: the lock is not
	// extended, and runs out (see WithDegradedMode). The loss of such a
	// lock wraps it too.
	ErrDegraded = errors.New("redlock: degraded lock not extended: the circuit breaker closed, obtain the lock again on the nodes")

	// ErrHeld is the per-node reason, inside a *QuorumError, when a node
	// answered that another owner holds the lock.
	ErrHeld = errors.New("redlock: held by another owner")

	// ErrNotOwner is the per-node reason, inside a release's *QuorumError,
	// when a node did not hold our value: its key had expired or belongs to
	// another owner.
	ErrNotOwner = errors.New("redlock: key expired or held by another owner")

	// ErrWrongKind is the per-node reason, inside an obtain's *QuorumError,
	// when the name is held by a lock of another kind (a plain lock, the
	// read-write and reentrant locks, a semaphore), or by a semaphore with
	// another number of permits. An obtain does not wait for such a
	// holder: the mix is a bug to fix.
	ErrWrongKind = errors.New("redlock: the name is in use by a lock of another kind, or by a semaphore with another number of permits")

	// ErrNodeRecovering is the per-node reason when a node takes no part in
	// locking yet because its Redis process changed (a restart, or a
	// promoted replica); the reason says for how long. See WithMaxTTL.
	ErrNodeRecovering = errors.New("redlock: node is recovering")

	// ErrNotReplicated is the per-node reason when a node took the lock
	// but WAIT did not confirm the replicas asked for by WithReplicaAck.
	ErrNotReplicated = errors.New("redlock: lock not acknowledged by the replicas (WithReplicaAck)")

	// ErrNodeTimeout is the per-node reason when a node did not answer
	// within the per-node timeout (see WithNodeTimeout).
	ErrNodeTimeout = quorum.ErrTimeout

	// ErrNodePending is the per-node reason when a node had not answered
	// yet when the outcome was already decided without it (a quorum agreed,
	// or enough nodes refused that none could).
	ErrNodePending = quorum.ErrPending

	// ErrNodeSkipped is the per-node reason when a node was not asked: it
	// timed out three times in a row and is skipped for one second before a
	// single probe request may reach it again, or it already had the most
	// requests in flight (WithMaxInFlight).
	ErrNodeSkipped = quorum.ErrSkipped

	// ErrConfigConflict is returned by an obtain of a Client on one set of nodes
	// that sees, on its nodes, that a Client of another set alone is alive or
	// was within the max TTL: the two could hold one lock at once. During a
	// move, it means step 2 of the runbook was cut short
	// (docs/reconfiguration.md). The error names the other configuration.
	ErrConfigConflict = errors.New("redlock: another node configuration is in use on these nodes")
)

// errReleased is Err of a released lock.
var errReleased = fmt.Errorf("%w: it was released", ErrNotHeld)

// errNilLock is the error of a nil *Lock's methods: no lock was obtained.
var errNilLock = fmt.Errorf("%w: nil lock (none was obtained)", ErrNotHeld)

// QuorumError reports an operation that did not reach a quorum of nodes,
// with the reason of each node that did not agree. It wraps ErrNotObtained
// (obtain; and ErrBreakerOpen when the breaker refused it), or ErrNotHeld
// when the nodes answered that the lock is no longer ours; errors.Is also
// matches each node's reason.
type QuorumError struct {
	// Op is "obtain", "obtain (fencing token)", "refresh" or "release".
	Op string
	// Need is the quorum: N/2+1 of N nodes, or the quorum of a
	// semaphore's permit (see Client.Semaphore).
	Need int
	// Agreed is how many nodes agreed; for the breaker's refusal, how many
	// it counts as reachable.
	Agreed int
	// Nodes holds the reason of every node that did not agree, in node
	// order. In the fencing token's round ("obtain (fencing token)") only
	// the nodes that voted for the lock in the first round can agree; the
	// reason of any other is its first round's, which says so.
	Nodes []NodeResult
	// Expired is true when a quorum agreed but the validity of the lock had
	// already run out by the time it did.
	Expired bool

	sentinels []error
	detail    string // said after the count
}

// Error says what failed, how many nodes agreed of how many needed, and
// each other node's reason.
func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("redlock: ")
	b.WriteString(e.Op)
	b.WriteString(": ")
	for _, s := range e.sentinels {
		b.WriteString(strings.TrimPrefix(s.Error(), "redlock: "))
		b.WriteString(": ")
	}
	verb := "agreed"
	if errors.Is(e, ErrBreakerOpen) {
		verb = "reachable"
	}
	fmt.Fprintf(&b, "%d of %d needed nodes %s", e.Agreed, e.Need, verb)
	if e.Expired {
		b.WriteString(", but after the lock's validity had run out")
	}
	b.WriteString(e.detail)
	for _, n := range e.Nodes {
		// Each reason is the package's own error or wraps one: its prefix
		// is said once, at the start.
		fmt.Fprintf(&b, "; node %d (%s): %s", n.Node, n.Addr, strings.TrimPrefix(fmt.Sprint(n.Err), "redlock: "))
	}
	return b.String()
}

// Unwrap returns the sentinels (ErrNotObtained, ErrBreakerOpen or
// ErrNotHeld, as they apply) followed by every node's reason.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, 0, len(e.Nodes)+len(e.sentinels))
	errs = append(errs, e.sentinels...)
	for _, n := range e.Nodes {
		errs = append(errs, n.Err)
	}
	return errs
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// ctxErr is the error of an ended context: its Err, joined with its cause
// when the cause says more, so that errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}

// reason is a node's reason as NodeResult.Reason's label.
func reason(err error) Reason {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrHeld):
		return ReasonHeld
	case errors.Is(err, ErrNotOwner):
		return ReasonNotOwner
	case errors.Is(err, ErrWrongKind):
		return ReasonWrongKind
	case errors.Is(err, ErrNodeRecovering):
		return ReasonRecovering
	case errors.Is(err, ErrNodeTimeout):
		return ReasonTimeout
	case errors.Is(err, ErrNodePending):
		return ReasonPending
	case errors.Is(err, ErrNodeSkipped):
		return ReasonSkipped
	case errors.Is(err, ErrNotReplicated):
		return ReasonNotReplicated
	}
	return ReasonError
}

// attemptResult is AttemptEvent.Result.
func attemptResult(obtained bool, err error) Result {
	var qe *QuorumError
	switch {
	case obtained:
		return ResultObtained
	case errors.Is(err, ErrHeld):
		return ResultHeld
	case errors.As(err, &qe):
		return ResultNoQuorum
	}
	return ResultError
}

// obtainResult is ObtainEvent.Result.
func obtainResult(err error) Result {
	var qe *QuorumError
	switch {
	case err == nil:
		return ResultObtained
	case errors.Is(err, ErrClosed):
		return ResultClosed
	case errors.Is(err, ErrHeld):
		return ResultHeld
	case errors.Is(err, ErrBreakerOpen):
		return ResultBreakerOpen
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ResultCanceled
	case errors.As(err, &qe):
		return ResultNoQuorum
	}
	return ResultError
}

// refreshResult is RefreshEvent.Result.
func refreshResult(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrNotHeld):
		return ResultNotHeld
	case errors.Is(err, ErrClosed):
		return ResultClosed
	}
	return ResultFailed
}

// releaseResult is ReleaseEvent.Result.
func releaseResult(err error) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrNotHeld):
		return ResultNotHeld
	}
	return ResultFailed
}

// isNilValue reports whether v, a non-nil interface, holds a nil pointer,
// func, map, slice, channel or interface: a typed nil, whose methods would
// panic.
func isNilValue(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// errNilContext is the error of an obtain given a nil context.
var errNilContext = invalid("nil context")
