package redlock

// The labels of the events (events.go): short, stable values that hooks
// and the adapters (redlockprom, redlockotel) match and use as metric
// labels and span attributes. Each is a string type of its own, so that a
// hook compares with the constants below and the compiler catches a typo;
// string(v) gives the label as it is written. The lock's Kind, with its
// constants, is in kind.go, with the kinds.

// Result is an outcome as the events' Result field labels it. Each event
// type uses some of the values: see its Result field.
type Result string

// The results.
const (
	ResultObtained    Result = "obtained"     // AttemptEvent, ObtainEvent: the lock is ours
	ResultHeld        Result = "held"         // AttemptEvent, ObtainEvent: another owner has the lock
	ResultNoQuorum    Result = "no_quorum"    // AttemptEvent, ObtainEvent: no quorum agreed in time
	ResultBreakerOpen Result = "breaker_open" // ObtainEvent: the circuit breaker was open
	ResultCanceled    Result = "canceled"     // ObtainEvent: the context ended first
	ResultClosed      Result = "closed"       // ObtainEvent, RefreshEvent: the Client was closed
	ResultError       Result = "error"        // AttemptEvent, ObtainEvent: any other failure
	ResultOK          Result = "ok"           // RefreshEvent, ReleaseEvent: done
	ResultNotHeld     Result = "not_held"     // RefreshEvent, ReleaseEvent: the lock is no longer this owner's
	ResultFailed      Result = "failed"       // RefreshEvent, ReleaseEvent: any other failure
	ResultHandedOff   Result = "handed_off"   // ReleaseEvent: handed to another process (Lock.Handoff)
)

// Reason is a node's reason as NodeResult.Reason labels it: "" when the
// node agreed.
type Reason string

// The reasons, one per per-node error (NodeResult.Err).
const (
	ReasonHeld          Reason = "held"           // ErrHeld
	ReasonNotOwner      Reason = "not_owner"      // ErrNotOwner
	ReasonWrongKind     Reason = "wrong_kind"     // ErrWrongKind
	ReasonRecovering    Reason = "recovering"     // ErrNodeRecovering
	ReasonNotReplicated Reason = "not_replicated" // ErrNotReplicated
	ReasonTimeout       Reason = "timeout"        // ErrNodeTimeout
	ReasonPending       Reason = "pending"        // ErrNodePending
	ReasonSkipped       Reason = "skipped"        // ErrNodeSkipped
	ReasonError         Reason = "error"          // any other failure: the Redis client's error
)

// WokenBy says what ended a wait (WaitEvent.WokenBy).
type WokenBy string

// What ends a wait.
const (
	WokenByRelease WokenBy = "release" // a release notification, or the key found gone after subscribing
	WokenByTimer   WokenBy = "timer"   // the backoff, or the holder's remaining TTL
	WokenByContext WokenBy = "context" // the caller's context ended
	WokenByTurn    WokenBy = "turn"    // a waiter ahead in this Client's queue left
)

// BreakerState is a state of the circuit breaker (Client.BreakerState,
// BreakerEvent).
type BreakerState string

// The circuit breaker's states.
const (
	BreakerClosed   BreakerState = "closed"    // a quorum of nodes is reachable
	BreakerOpen     BreakerState = "open"      // obtains are refused, wait, or fall back to the degraded mode
	BreakerHalfOpen BreakerState = "half_open" // a probe is under way
)
