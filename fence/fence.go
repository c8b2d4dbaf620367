// Package fence makes a resource refuse the writes of a lock holder that
// lost its lock without knowing: it checks a fencing token where the data
// lives, atomically with the operation, and the token comes bound to the
// lock that issued it (a Sequencer: redlock's Lock.Sequencer).
//
// A holder that pauses (a long GC, a stopped process, a slow network) past
// its lock's validity wakes up still believing it holds the lock. Its token
// is lower than the next holder's, so a resource that remembers the highest
// token it has seen, and refuses a lower one, refuses the stale holder's
// work. This package is that check, for three kinds of resource:
//
//   - Redis (Redis): the data and its fence in one hash, checked in one
//     script: fenced Set and Get (the read records the reader's token, so a
//     stalled read-modify-write is refused), a counter change with a floor
//     (Add), the caller's own script run only under a current token (Eval).
//     Any Redis: standalone, Sentinel or Cluster, a lock node or another.
//     With Durable, a write waits until the replicas have it, so that a
//     failover does not lose an acknowledged fence.
//   - SQL (Table): a fence column in the row, a fenced UPDATE and a fenced
//     read-then-write in a transaction, with database/sql.
//   - Any other service (Guard): the highest token per resource in a store
//     you give it (MemoryStore, a *Redis, your own), checked and held while
//     the request's write runs, with a net/http middleware that reads the
//     sequencer from a header and the body before it takes the resource,
//     so that a stalled upload holds nothing.
//
// Every refusal of a token is an error that matches ErrStale and is a
// *StaleError with both tokens; a sequencer of another lock than the one
// the resource follows matches ErrOtherLock.
//
// # Sequencers
//
// A Sequencer is a lock's name, kind and token together, as Chubby's
// sequencers are. A resource records the lock it follows, the lock of the
// first sequencer it admits, and refuses another lock's sequencer however
// high its token (a newer token of another lock would otherwise pass, and
// keep the right lock's holders out). Token gives the sequencer of a bare
// number, which names no lock. Token 0 is refused with ErrInvalid: it is
// the own token of a lock of several names (redlock's Client.All), which
// fences nothing; fence with each of its Parts.
//
// Chubby is the model: its sequencer carries a lock's name, mode and
// generation, and a server may ask the lock service whether it is still
// current (CheckSequencer), as redlock's Client.Check answers Current,
// Superseded or Unknown from a quorum of the lock's nodes. An etcd lock's
// holder proves the same inside an etcd transaction (Mutex.IsOwner);
// Redisson's fenced lock hands out a bare token and leaves its check to
// the application. docs/fencing.md compares the four.
//
// # The rules
//
// Equal tokens are accepted: a holder writes several times with one token.
// A token below the fence is refused. Two holders of an exclusive lock
// never share a token; two permits of a semaphore obtained at the same
// time can, and two read holds or permits held at once are not ordered
// among themselves (docs/fencing.md, "What a sequencer means").
//
// A negative token is refused unless the caller passes AllowNegative. Only
// the degraded mode issues negative tokens (redlock.WithDegradedMode): such
// a lock comes from a lease store, not from a quorum of Redis nodes, and
// excludes only the clients that fell back to the same store, so two
// holders of one name can overlap. Refusing them keeps a resource correct
// through the degraded mode at the price of its availability; accepting
// them (AllowNegative) orders the degraded holders of one lease store among
// themselves, and still refuses every one of them once a token from Redis
// has been seen, since those are all positive.
//
// Tokens are compared exactly as int64, in Lua too (as decimal strings,
// since a Lua number is a double).
//
// # What a Guard trusts
//
// A Guard believes the token a request carries, and one request with a
// token no holder has (2^63-1) raises the fence above every real holder.
// Its checked modes refuse such a token: Checked asks the lock's nodes
// (redlock's Client.Check, through the Checker interface) whether the
// sequencer is current, and trusts a quorum of them; Signed admits a
// request only with the HMAC of its sequencer under a key the lock's
// holders and the guard share (Sign), and trusts every holder of the key.
// A fence raised all the same is lowered with Reset (Redis.Reset,
// Table.Reset, MemoryStore.Reset; redlock fence reset on the command line).
//
// # Retries, transactions, failures
//
// A client sends a command again when its reply is lost (go-redis does by
// default): a retried Set or Get ends as one call does, and a retried Add
// is applied once (the key keeps the ids of its last 8 Add calls); the
// caller's Eval script runs again. Table.Tx rolls back on its function's
// error or panic; under REPEATABLE READ or SERIALIZABLE its fencing
// statement runs again after a conflict, and a conflict it cannot run
// again matches ErrConflict. A NULL fence column is no fence. A nil or
// zero input is an error matching ErrInvalid, never a panic. A Redis that
// evicts any key when full (allkeys-* policies) forgets fences as a DEL
// would: keep them on one with noeviction or a volatile-* policy. A write
// that Durable's replicas did not acknowledge matches ErrNotDurable: the
// master applied it, and a failover may lose it.
//
// The guide, with sequencers and their check, the Guard's modes, durable
// and poisoned fences, the read-modify-write trap, retries, isolation
// levels, MySQL, eviction, the cost and the cleanup of fence records, and
// a comparison with Chubby, etcd and Redisson, is docs/fencing.md, "Using
// the token".
package fence

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
)

// ErrStale is matched (errors.Is) by every refusal of a token: one below
// the resource's fence, or a negative token without AllowNegative. The
// error is a *StaleError.
var ErrStale = errors.New("fence: stale token")

// ErrInvalid is matched by the errors of bad arguments: an empty key or
// resource, a bad identifier, a malformed token header, and a nil client,
// store, database, function or context (a typed nil too), or a Redis,
// Table or Guard not made by its constructor.
var ErrInvalid = errors.New("fence: invalid argument")

// ErrConflict is matched by the error of a Table statement that the
// database could not serialize with a concurrent transaction (SQLSTATE
// 40001, a serialization failure, or 40P01, a deadlock) and that the
// package did not run again: one in fn's statements or at the commit of
// Table.Tx, or one inside the caller's transaction, or the last of the
// attempts. Nothing of its transaction was written; the caller may run it
// again. The error wraps the driver's too. Drivers whose errors have a
// SQLState method (pgx, lib/pq) report conflicts.
var ErrConflict = errors.New("fence: serialization conflict")

// ErrOtherLock is matched (errors.Is) by the refusal of a sequencer of
// another lock than the one the resource follows (the lock of the first
// sequencer it admitted), or of a bare token (Token) once it follows one.
// The resource is unchanged but for its count of refusals.
var ErrOtherLock = errors.New("fence: a sequencer of another lock")

// ErrBound is matched by the error of Redis.Add when the change would take
// the counter below its floor. The error is a *BoundError; the counter is
// unchanged.
var ErrBound = errors.New("fence: counter bound")

// StaleError is a refused token. It matches ErrStale.
type StaleError struct {
	Resource string // the key, row or resource name
	Lock     string // the refused sequencer's lock ("" for a bare token)
	Token    int64  // the refused token
	// Fence is the lowest token the resource accepts: the highest it has
	// seen, or 0 for a negative token refused because AllowNegative was
	// not given.
	Fence    int64
	Negative bool // refused as a negative (degraded mode) token
	// Superseded: refused because the lock's nodes said the sequencer is
	// not the lock's latest (a Guard's Checked mode); Fence is then 0.
	Superseded bool
}

func (e *StaleError) Error() string {
	if e.Superseded {
		return fmt.Sprintf("fence: %s: stale token %d: the nodes of lock %q say a later holder superseded it", e.Resource, e.Token, e.Lock)
	}
	if e.Negative {
		return fmt.Sprintf("fence: %s: stale token %d: a negative (degraded mode) token, below 0, the least this resource accepts without AllowNegative", e.Resource, e.Token)
	}
	return fmt.Sprintf("fence: %s: stale token %d: the resource has seen token %d", e.Resource, e.Token, e.Fence)
}

// Is reports whether target is ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Option configures a Redis, a Table or a Guard.
type Option interface{ apply(*options) }

type options struct {
	allowNegative bool
	isolation     sql.IsolationLevel // Table.Tx's
	maxBody       int64              // Guard.Middleware's limit, when maxBodySet
	maxBodySet    bool
	lockColumn    string  // Table's column of the lock a row follows
	checker       Checker // Guard's, when checkerSet
	checkerSet    bool
	key           []byte  // Guard.Middleware's signing key; nil: not Signed
	ack           durable // Redis's writes wait for replicas (Durable)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// AllowNegative accepts negative tokens, those of locks obtained in
// degraded mode (redlock.WithDegradedMode), ordered like any other token.
// By default they are refused (see the package documentation for why).
func AllowNegative() Option {
	return optionFunc(func(o *options) { o.allowNegative = true })
}

// Isolation sets the isolation level of Table.Tx's transactions; without
// it they have the database's default (sql.LevelDefault). Every level
// orders the holders of a row alike: see Table.Tx for REPEATABLE READ and
// SERIALIZABLE. A level the driver does not support fails Tx's begin.
// Redis and Guard ignore it.
func Isolation(level sql.IsolationLevel) Option {
	return optionFunc(func(o *options) { o.isolation = level })
}

// LockColumn names the column in which a Table's rows keep the lock they
// follow (a text column, NULL until a row's first sequencer of a lock):
// with it, a sequencer of another lock, or a bare token once the row
// follows a lock, is refused (ErrOtherLock), as Redis and Guard do. Without
// it, a Table compares tokens only, whatever lock issued them. Redis and
// Guard ignore it.
func LockColumn(name string) Option {
	return optionFunc(func(o *options) { o.lockColumn = name })
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return o
}

// errZeroToken is why token 0 is refused.
const errZeroToken = "token 0, which no lock is issued: a lock of several names (redlock's Client.All) has 0 as its own token; fence with each of its Lock.Parts(), which have tokens of their own"

// admit refuses a sequencer that no lock issued (token 0, a name without
// a kind or a kind without a name), and a negative token unless allowed.
func (o options) admit(resource string, s Sequencer) error {
	switch {
	case s.Token == 0:
		return invalid("%s: %s", resource, errZeroToken)
	case (s.Lock == "") != (s.Kind == ""):
		return invalid("%s: sequencer %+v: a lock's name and its kind go together (redlock's Lock.Sequencer gives both; Token gives neither)", resource, s)
	}
	if s.Token < 0 && !o.allowNegative {
		return &StaleError{Resource: resource, Token: s.Token, Negative: true}
	}
	return nil
}

// otherLockError is a sequencer of another lock than the one the
// resource follows. It matches ErrOtherLock.
type otherLockError struct {
	resource string
	s        Sequencer // the refused one
	follows  string    // the lock the resource follows
}

func (e *otherLockError) Error() string {
	if e.s.Lock == "" {
		return fmt.Sprintf("fence: %s: a bare token %d, which names no lock: the resource follows lock %q (pass that lock's Lock.Sequencer)", e.resource, e.s.Token, e.follows)
	}
	return fmt.Sprintf("fence: %s: a sequencer of lock %q (token %d): the resource follows lock %q", e.resource, e.s.Lock, e.s.Token, e.follows)
}

func (e *otherLockError) Is(target error) bool { return target == ErrOtherLock }

// invalid is an error matching ErrInvalid: "fence: invalid argument: " and
// the problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// isNil reports whether v is nil, or holds a nil pointer, map, slice,
// channel or function (a typed nil, which a nil check of an interface
// misses).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
