package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Kind is the kind of a lock: the plain lock, or one of the lock family
// (docs/lock-family.md), which share one key layout and contend with each
// other on a name, but never with a plain lock.
type Kind uint8

const (
	// Plain is the lock of Obtain without a family option: one exclusive
	// holder, the cheapest cycle.
	Plain Kind = iota
	// Reentrant is an exclusive lock of a named owner (WithOwner), which
	// the owner may obtain again while it holds it.
	Reentrant
	// Write is the exclusive lock of a read-write lock (WithExclusive).
	Write
	// Read is a shared lock of a read-write lock (WithShared).
	Read
	// Permit is one permit of a semaphore (ObtainPermit).
	Permit
)

// String returns "plain", "reentrant", "write", "read" or "permit".
func (k Kind) String() string {
	switch k {
	case Plain:
		return "plain"
	case Reentrant:
		return "reentrant"
	case Write:
		return "write"
	case Read:
		return "read"
	case Permit:
		return "permit"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ErrWrongKind is the per-node reason, inside an obtain's *QuorumError,
// when the name is held by a lock of another kind: a plain lock and a lock
// of the family (WithOwner, WithShared, WithExclusive) never share a name.
// Obtain does not wait for such a holder: the mix is a bug to fix.
var ErrWrongKind = errors.New("the name is held by a lock of another kind (plain, or read-write and reentrant)")

// WithOwner makes the lock reentrant, held by owner id: an Obtain with the
// same id while the lock is held succeeds at once, through any Client, and
// never waits behind other goroutines of its Client that wait for the
// lock (an owner's obtains queue only behind the same owner's),
// keeps the lock's fencing token (see docs/lock-family.md for when it
// cannot) and counts one more hold. Two first Obtains with one id that run
// at once, neither holding yet, may get different tokens: obtain once
// before starting the work that re-enters. Each hold is a *Lock of its own, with its
// own validity, refresh and Release; the lock is free once every hold is
// released or expired. Another owner, a reader, or a plain lock of the same
// name is refused as usual.
//
// Two holds with one id are one owner: use an id unique to the job that
// holds the lock (a request or run ID), never a constant shared by
// processes that must exclude each other. The id is stored in Redis in
// clear. An empty id is an error wrapping ErrInvalid.
func WithOwner(id string) ObtainOption {
	return obtainOption(func(o *obtainConfig) {
		o.setKind(Reentrant)
		o.owner = id
	})
}

// WithExclusive obtains the exclusive (write) lock of a read-write lock: it
// waits until no reader and no other writer holds the name, and readers
// that come while it waits wait behind it.
func WithExclusive() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.setKind(Write) })
}

// WithShared obtains a shared (read) lock of a read-write lock: any number
// of readers hold the name at once, while no writer (WithExclusive or
// WithOwner) does. A reader's fencing token is greater than that of every
// writer before it and smaller than that of every writer after it; readers
// are not ordered among themselves.
func WithShared() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.setKind(Read) })
}

// setKind records a family option; two different ones are an error.
func (o *obtainConfig) setKind(k Kind) {
	if o.kind == Permit {
		o.kindErr = invalid("%s does not apply to a semaphore's permit (ObtainPermit)", optionOf(k))
		return
	}
	if o.kind != Plain && o.kind != k {
		o.kindErr = invalid("WithOwner, WithExclusive and WithShared exclude each other (got %s and %s)", o.kind, k)
	}
	o.kind = k
}

// validateKind checks the family options.
func (o *obtainConfig) validateKind() error {
	if o.kindErr != nil {
		return o.kindErr
	}
	if o.kind == Permit {
		return checkPermits(o.permits)
	}
	if o.kind == Reentrant && o.owner == "" {
		return invalid("empty owner ID (WithOwner)")
	}
	return nil
}

// newHold is the hold a lock of the family is obtained as: nil for a
// plain lock.
func newHold(o *obtainConfig) *script.Hold {
	switch o.kind {
	case Reentrant:
		return &script.Hold{Mode: 'w', Owner: o.owner, ID: newValue(), Wait: o.wait}
	case Write:
		return &script.Hold{Mode: 'w', Owner: newValue(), ID: newValue(), Wait: o.wait}
	case Read:
		return &script.Hold{Mode: 'r', ID: newValue()}
	case Permit:
		return &script.Hold{Mode: 's', ID: newValue(), Permits: o.permits}
	}
	return nil
}

// Kind returns the lock's kind.
func (l *Lock) Kind() Kind {
	if l == nil {
		return Plain
	}
	return l.kind
}

// acquireCall is the acquire of the lock's hold on node i.
func (l *Lock) acquireCall(i int, ttl time.Duration) script.Call {
	if l.kind == Permit {
		return script.PermitAcquireCall(l.keys(i), *l.hold, ttl, l.c.guard(i))
	}
	if l.hold != nil {
		return script.FamilyAcquireCall(l.keys(i), *l.hold, ttl, l.c.guard(i))
	}
	return script.AcquireCall(l.keys(i), l.args, ttl, l.c.guard(i))
}

// releaseCall is the release of the lock's hold on a node (a Redis Cluster
// node when sharded), publishing on the lock's release channel when
// publish is set.
func (l *Lock) releaseCall(publish, sharded bool) script.Call {
	if l.hold == nil {
		return script.ReleaseCall(l.args, publish, sharded)
	}
	channel := ""
	if publish {
		channel = keys.Channel(l.key)
	}
	if l.kind == Permit {
		return script.PermitReleaseCall(l.key, *l.hold, channel, sharded)
	}
	return script.FamilyReleaseCall(l.key, *l.hold, channel, sharded)
}

// refreshItem is a refresh of the lock's hold to ttl on node i.
func (l *Lock) refreshItem(i int, ttl time.Duration) script.RefreshItem {
	return script.RefreshItem{Keys: l.keys(i), Value: l.value, TTL: ttl, Hold: l.hold}
}

// enoughVotes is the acquire round's Enough: nil for a plain lock, which
// decides on the count of yes-votes. A lock of the family whose votes found
// the owner's lock waits for more replies until a quorum agrees on the
// recorded token (familyToken's rule 1) or every node answered: the votes
// first in may be of nodes that missed the token (a late vote of the first
// acquire, a re-seed), and deciding on them would open a new tenure, with a
// new token, for nothing.
func (l *Lock) enoughVotes() func([]quorum.Reply[script.Acquired]) bool {
	if l.hold == nil || l.hold.Mode != 'w' {
		return nil
	}
	q := l.c.quorum
	return func(replies []quorum.Reply[script.Acquired]) bool {
		existed := false
		for _, r := range replies {
			if r.Yes && r.Val.Existed {
				existed = true
				if agreeing(replies, r.Val.Token) >= q {
					return true
				}
			}
		}
		return !existed
	}
}

// agreeing counts the yes-votes that found the owner's lock with recorded
// token t > 0.
func agreeing(replies []quorum.Reply[script.Acquired], t int64) int {
	if t <= 0 {
		return 0
	}
	n := 0
	for _, r := range replies {
		if r.Yes && r.Val.Existed && r.Val.Token == t {
			n++
		}
	}
	return n
}

// kindError marks a node's REDLOCK_KIND error reply with ErrWrongKind, and
// a semaphore's REDLOCK_PERMITS with ErrPermitCount, keeping the reply in
// the chain (it is a definite answer, not an
// ambiguous failure).
func kindError(err error) error {
	switch {
	case err == nil:
	case redis.HasErrorPrefix(err, "REDLOCK_KIND"):
		return fmt.Errorf("%w: %w", ErrWrongKind, err)
	case redis.HasErrorPrefix(err, "REDLOCK_PERMITS"):
		return fmt.Errorf("%w: %w", ErrPermitCount, err)
	}
	return err
}

// familyToken decides the token of a won acquire of the family
// (docs/lock-family.md, "Fencing tokens"):
//
//  1. at least a quorum of the yes-votes found the owner's lock with one
//     recorded token t > 0: the tenure continues, the token is t;
//  2. otherwise the token is the largest of the counters the fresh votes
//     issued and one more than the counter of each vote that found the
//     owner's lock; a second round (seal) must raise a quorum of the
//     yes-voters to it, unless no vote found the lock and a quorum issued
//     the token itself.
func (c *Client) familyToken(ctx context.Context, l *Lock, replies []quorum.Reply[script.Acquired], validUntil time.Time) (token int64, second bool, err error) {
	// Rule 1: count the recorded tokens of the votes that found the lock.
	// At most one value can reach a quorum.
	for _, r := range replies {
		if r.Yes && r.Val.Existed && agreeing(replies, r.Val.Token) >= c.quorum {
			return r.Val.Token, false, nil
		}
	}
	existed := false
	for _, r := range replies {
		if !r.Yes {
			continue
		}
		v := r.Val.Counter
		if r.Val.Existed {
			v++
			existed = true
		}
		token = max(token, v)
	}
	if !existed {
		equal := 0
		for _, r := range replies {
			if r.Yes && r.Val.Counter == token {
				equal++
			}
		}
		if equal >= c.quorum {
			return token, false, nil
		}
	}
	return token, true, c.raise(ctx, l, replies, token, validUntil)
}

// exclusive reports whether the obtain is of an exclusive hold of the
// family (a writer or a reentrant owner), whose refusals mark the lock as
// waited for by a writer.
func (o *obtainConfig) exclusive() bool { return o.kind == Write || o.kind == Reentrant }

// withdraw takes back the writer mark of an exclusive obtain that gave up
// (family.lua's refuse left it, so that readers wait behind the writer),
// on every node, so that readers are not kept waiting for the mark's TTL.
// It is best effort: a node that does not answer within timeout keeps the
// mark until it expires.
func (c *Client) withdraw(key, wait string, timeout time.Duration) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return
	}
	mark := keys.WriterWaits(key)
	round := quorum.Round[bool]{
		Nodes:   c.nodes,
		Quorum:  len(c.nodes),
		Timeout: max(timeout, minReleaseTimeout),
		Wait:    quorum.WaitAll,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			return script.Withdraw(ctx, n.Client, mark, wait)
		},
		Agree: func(bool) bool { return true },
	}
	round.Run(context.Background(), c.workers)
}
