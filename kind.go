package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/reply"
	"github.com/redlock-go/redlock/internal/script"
)

// Kind is a lock's kind, as the events name it (ObtainEvent.Kind and the
// others): the handle that made the lock.
type Kind string

// The kinds (Kinds lists them): the labels of the specs below.
const (
	KindPlain     Kind = "plain"     // Client.Mutex, All, Any, and the Client's Obtain, TryObtain and Do
	KindReentrant Kind = "reentrant" // Client.Reentrant
	KindRead      Kind = "read"      // the reader of Client.RWMutex
	KindWrite     Kind = "write"     // the writer of Client.RWMutex
	KindPermit    Kind = "permit"    // Client.Semaphore
)

// A kind is what sets the primitives apart: the plain lock (Client.Mutex),
// the lock family (Client.Reentrant and Client.RWMutex, one hash per name,
// docs/lock-family.md) and the semaphore's permit (Client.Semaphore). It
// gives a lock of its kind its scripts, its quorum, its vote rule, its
// token rule, and its refresh and release calls; nothing outside this file
// asks which kind a lock is, or which script a mode runs.
//
// A kind's rules hold no state of their own: a handle's kind with its
// state (a reader's or a writer's mode, a reentrant lock's owner, a
// semaphore's number of permits: its prototype hold) is its spec, whose
// methods (newSecret, quorum, group, exclusive, looked, mode) are what the
// rest of the package calls before a lock exists; a lock's own state is
// its secret (value or hold), which the calls on a lock take. The methods
// two kinds share are written once, in the small types embedded below
// (majorityQuorum, pttlProbe, highestTokenRule, noMark, holds).
type kind interface {
	// newSecret makes the secret of a lock of the kind under key, its
	// value (or its hold's ID) id, from the handle's prototype hold; a
	// kind of holds writes the lock's hold to hold (newLock's storage).
	newSecret(key string, proto *script.Hold, id, writerMark string, hold *script.Hold) secret
	// quorum is how many of n nodes must agree to each round of a lock.
	quorum(n int, proto *script.Hold) int
	// acquire, refresh and release are the lock's calls on one node
	// (release publishes on the lock's channel when publish is set; a
	// Redis Cluster node is sharded): the kind picks the script. A
	// refresh carries the lock's token (its re-seed is refused where the
	// counter is above it), and a release retires it (rt).
	acquire(k script.Keys, s *secret, ttl time.Duration, g script.Guard) script.Call
	refresh(k script.Keys, s *secret, token int64, ttl time.Duration) script.RefreshItem
	release(key string, s *secret, rt script.Retire, publish, sharded bool) script.Call
	// enough is the acquire round's vote rule beyond the count of
	// yes-votes (quorum.Round.Enough); nil when the count decides.
	enough(s *secret, q quorum.Rule) func([]quorum.Reply[script.Acquired]) bool
	// token decides a won acquire's fencing token from the yes-votes, and
	// whether a second round must raise a quorum of the yes-voters'
	// counters to it (docs/fencing.md, docs/lock-family.md).
	token(replies []quorum.Reply[script.Acquired], q quorum.Rule) (token int64, raise bool)
	// raise is the second round's call on one node.
	raise(ctx context.Context, n driver.Node, k script.Keys, token int64, s *secret, g script.Guard) error
	// probe is the read of a waiter that looks for a release it may have
	// missed (the commands after the waiters mark), and looked decodes
	// its replies: whether a new lock of the kind could be taken on the
	// node, else how long until the holder (or the soonest permit) runs
	// out (-1 if unknown).
	probe(key string) [][]any
	looked(replies []driver.Reply, proto *script.Hold) (free bool, holder time.Duration)
	// check is the read that tells whether a node holds the lock of s
	// (Client.Resume), and holding decodes its replies: whether it does,
	// and for how much longer.
	check(key string, s *secret) [][]any
	holding(replies []driver.Reply, s *secret) (bool, time.Duration)
	// degradable is true when the kind's obtains may fall back to the
	// degraded mode's lease store.
	degradable() bool
	// group is the key of the local queue of an obtain of the lock key:
	// the key itself, or a reentrant owner's own queue.
	group(key string, proto *script.Hold) string
	// exclusive is true when the kind's refusals leave the writer mark
	// that readers wait behind (the family's writers and owners), which
	// an obtain that gives up withdraws: withdraw deletes the writer mark
	// writerMark from the lock key on one node.
	exclusive(proto *script.Hold) bool
	withdraw(ctx context.Context, n driver.Node, key, writerMark string) error
}

// spec is a handle's kind with its state: the kind's rules, its prototype
// hold (a mode, an owner, a number of permits), and the label that events
// name it by. The functions below make the spec of each handle, and check
// what a handle's maker can get wrong; its methods are the kind's calls
// that need the state, so that no caller passes the prototype around.
type spec struct {
	label Kind
	kind  kind
	proto script.Hold
}

var (
	plainSpec  = spec{KindPlain, plainKind, script.Hold{}}
	readerSpec = spec{KindRead, familyKind, script.Hold{Mode: keys.ModeRead}}
	writerSpec = spec{KindWrite, familyKind, script.Hold{Mode: keys.ModeWrite}}
)

// newSecret makes the secret of a new lock of the spec under key: its
// value (or hold's ID) id, and an exclusive hold's writer mark wait.
func (sp *spec) newSecret(key, id, writerMark string, hold *script.Hold) secret {
	return sp.kind.newSecret(key, &sp.proto, id, writerMark, hold)
}

// hasHold is true for the kinds of holds (the family and the semaphore),
// whose locks are stored with their hold (newLock).
func (sp *spec) hasHold() bool { return sp.proto.Mode != 0 }

// quorum is how many of n nodes must agree to each round of the spec's
// locks.
func (sp *spec) quorum(n int) int { return sp.kind.quorum(n, &sp.proto) }

// group is the key of the local queue of an obtain of the lock key.
func (sp *spec) group(key string) string { return sp.kind.group(key, &sp.proto) }

// exclusive is true when an obtain of the spec leaves a writer mark.
func (sp *spec) exclusive() bool { return sp.kind.exclusive(&sp.proto) }

// mode is the mode of the spec's holds as Lock.Handoff's form writes it
// (modeOf).
func (sp *spec) mode() string { return modeOf(&sp.proto) }

// looked decodes a waiter's probe (kind.probe) of one node.
func (sp *spec) looked(replies []driver.Reply) (bool, time.Duration) {
	return sp.kind.looked(replies, &sp.proto)
}

// reentrantSpec is the spec of a reentrant lock held by owner.
func reentrantSpec(owner string) (spec, error) {
	if owner == "" {
		return spec{}, invalid("empty owner of a reentrant lock")
	}
	return spec{KindReentrant, familyKind, script.Hold{Mode: keys.ModeWrite, Owner: owner}}, nil
}

// permitSpec is the spec of a permit of a semaphore of k permits.
func permitSpec(k int) (spec, error) {
	if k < 1 || k > limits.MaxPermits {
		return spec{}, invalid("%d permits: a semaphore has 1 to %d", k, limits.MaxPermits)
	}
	return spec{KindPermit, permitKind, script.Hold{Mode: keys.ModePermit, Permits: k}}, nil
}

// specOf is the spec of a lock of this label (Client.Resume): owner is a
// reentrant lock's or a writer's owner, permits a permit's semaphore's.
func specOf(label Kind, owner string, permits int) (spec, error) {
	switch label {
	case KindPlain:
		return plainSpec, nil
	case KindRead:
		return readerSpec, nil
	case KindWrite, KindReentrant:
		s, err := reentrantSpec(owner)
		s.label = label
		return s, err
	case KindPermit:
		return permitSpec(permits)
	}
	return spec{}, invalid("unknown kind %q", label)
}

// Kinds returns the Kind of every handle, in a fixed order: for a hook
// that shows a series per kind from the start (the adapters do).
func Kinds() []Kind {
	return []Kind{KindPlain, KindReentrant, KindWrite, KindRead, KindPermit}
}

// The three kinds.
var (
	plainKind  kind = plain{}
	familyKind kind = family{}
	permitKind kind = permit{}
)

// modeOf is the mode of a hold as Lock.Handoff's form writes it: "w" or
// "r" for the family, "s" for a permit, "" for a plain lock.
func modeOf(h *script.Hold) string {
	if h.Mode == 0 {
		return ""
	}
	return string(h.Mode)
}

// The methods two kinds share, each written once.

// majorityQuorum: a lock of the plain kind or of the family needs a majority.
type majorityQuorum struct{}

func (majorityQuorum) quorum(n int, _ *script.Hold) int { return limits.Majority(n) }

// pttlProbe: a waiter of a plain lock or of the family looks for a
// missed release with PTTL: the key is gone, or has that long left.
type pttlProbe struct{}

func (pttlProbe) probe(key string) [][]any { return [][]any{{"PTTL", key}} }

func (pttlProbe) looked(replies []driver.Reply, _ *script.Hold) (bool, time.Duration) {
	return pttlGone(replies[0])
}

// highestTokenRule: the plain lock's and the permit's token rule (highestToken),
// with no vote rule beyond the count, and their second round (fence.lua).
type highestTokenRule struct{}

func (highestTokenRule) enough(*secret, quorum.Rule) func([]quorum.Reply[script.Acquired]) bool {
	return nil
}

func (highestTokenRule) token(replies []quorum.Reply[script.Acquired], q quorum.Rule) (int64, bool) {
	return highestToken(replies, q)
}

func (highestTokenRule) raise(ctx context.Context, n driver.Node, k script.Keys, token int64, _ *secret, g script.Guard) error {
	return script.Fence(ctx, n, k, token, g)
}

// noMark: a plain lock and a permit leave no writer mark, and queue by
// the lock key.
type noMark struct{}

func (noMark) group(key string, _ *script.Hold) string { return key }

func (noMark) exclusive(*script.Hold) bool { return false }

func (noMark) withdraw(context.Context, driver.Node, string, string) error { return nil }

// holds: a lock of the family and a permit are holds in a hash (holds.lua),
// read by their expiry field; neither falls back to the degraded mode.
type holds struct{}

func (holds) check(key string, s *secret) [][]any { return holdCheck(key, s) }

func (holds) holding(replies []driver.Reply, s *secret) (bool, time.Duration) {
	return holdLeft(replies)
}

func (holds) degradable() bool { return false }

// releaseChannel is the channel a release of the lock key publishes on
// (none unless publish): the family's and the permit's scripts take it.
func releaseChannel(key string, publish bool) string {
	if publish {
		return keys.Channel(key)
	}
	return ""
}

// plain is the plain lock: one exclusive holder, its random value in a
// string key (acquire.lua); the cheapest cycle.
type plain struct {
	majorityQuorum
	pttlProbe
	highestTokenRule
	noMark
}

func (plain) newSecret(key string, _ *script.Hold, id, _ string, _ *script.Hold) secret {
	return secret{id: id, args: script.NewLockArgs(key, id)}
}

func (plain) acquire(k script.Keys, s *secret, ttl time.Duration, g script.Guard) script.Call {
	return script.AcquireCall(k, s.args, ttl, g)
}

func (plain) refresh(k script.Keys, s *secret, token int64, ttl time.Duration) script.RefreshItem {
	return script.RefreshItem{Keys: k, Value: s.id, Token: token, TTL: ttl, Boxed: s.args}
}

func (plain) release(_ string, s *secret, rt script.Retire, publish, sharded bool) script.Call {
	return script.ReleaseCall(s.args, rt, publish, sharded)
}

func (plain) check(key string, _ *secret) [][]any { return [][]any{{"GET", key}, {"PTTL", key}} }

// holding: the key holds the value (a hash of another kind answers
// WRONGTYPE, no holding either).
func (plain) holding(replies []driver.Reply, s *secret) (bool, time.Duration) {
	v, err := reply.String(replies[0].Val, replies[0].Err)
	if err != nil || v != s.id {
		return false, 0
	}
	ms, err := reply.Int64(replies[1].Val, replies[1].Err)
	if err != nil || ms <= 0 {
		return false, 0
	}
	return true, time.Duration(ms) * time.Millisecond
}

func (plain) degradable() bool { return true }

// highestToken is the token rule of the plain lock and the permit: the
// highest counter among the yes-votes; unless a quorum of them issued it,
// a second round raises the others (docs/fencing.md).
func highestToken(replies []quorum.Reply[script.Acquired], q quorum.Rule) (int64, bool) {
	token := int64(0)
	for _, r := range replies {
		if r.Yes && r.Val.Token > token {
			token = r.Val.Token
		}
	}
	var equal uint64
	for i, r := range replies {
		if r.Yes && r.Val.Token == token {
			equal |= 1 << i
		}
	}
	return token, !q.Met(equal)
}

// pttlGone reads a PTTL reply: the key is gone (-2), or has that long left.
func pttlGone(r driver.Reply) (bool, time.Duration) {
	ms, err := reply.Int64(r.Val, r.Err)
	switch {
	case err != nil:
		return false, -1
	case ms == -2:
		return true, -1
	case ms < 0:
		return false, -1
	}
	return false, time.Duration(ms) * time.Millisecond
}

// family is the lock family: reentrant locks (a caller's owner ID, mode
// 'w'), writers (a random owner, mode 'w') and readers (mode 'r'), as holds
// in one hash per name (family.lua, docs/lock-family.md).
type family struct {
	majorityQuorum
	pttlProbe
	holds
}

func (family) newSecret(_ string, proto *script.Hold, id, writerMark string, h *script.Hold) secret {
	*h = *proto
	h.ID = id
	if h.Mode == keys.ModeWrite {
		if h.Owner == "" { // a writer: an owner of its own
			h.Owner = newValue()
		}
		h.Wait = writerMark
	}
	return secret{id: id, hold: h}
}

func (family) acquire(k script.Keys, s *secret, ttl time.Duration, g script.Guard) script.Call {
	return script.FamilyAcquireCall(k, *s.hold, ttl, g)
}

func (family) refresh(k script.Keys, s *secret, token int64, ttl time.Duration) script.RefreshItem {
	return script.FamilyRefresh(k, s.hold, token, ttl)
}

func (family) release(key string, s *secret, rt script.Retire, publish, sharded bool) script.Call {
	return script.FamilyReleaseCall(key, *s.hold, rt, releaseChannel(key, publish), sharded)
}

// enough: an exclusive hold whose votes found the owner's lock waits for
// more replies until a quorum agrees on the recorded token (token's rule
// 1) or every node answered: the votes first in may be of nodes that
// missed the token (a late vote of the first acquire, a re-seed), and
// deciding on them would open a new tenure, with a new token, for nothing.
func (family) enough(s *secret, q quorum.Rule) func([]quorum.Reply[script.Acquired]) bool {
	if s.hold.Mode != keys.ModeWrite {
		return nil
	}
	return func(replies []quorum.Reply[script.Acquired]) bool {
		existed := false
		for _, r := range replies {
			if r.Yes && r.Val.Existed {
				existed = true
				if q.Met(agreeing(replies, r.Val.Token)) {
					return true
				}
			}
		}
		return !existed
	}
}

// token decides the token of a won acquire of the family
// (docs/lock-family.md, "Fencing tokens"):
//
//  1. at least a quorum of the yes-votes found the owner's lock with one
//     recorded token t > 0: the tenure continues, the token is t;
//  2. otherwise the token is the largest of the counters the fresh votes
//     issued and one more than the counter of each vote that found the
//     owner's lock; a second round (seal) must raise a quorum of the
//     yes-voters to it, unless no vote found the lock and a quorum issued
//     the token itself.
func (family) token(replies []quorum.Reply[script.Acquired], q quorum.Rule) (int64, bool) {
	// Rule 1: count the recorded tokens of the votes that found the lock.
	// At most one value can reach a quorum.
	for _, r := range replies {
		if r.Yes && r.Val.Existed && q.Met(agreeing(replies, r.Val.Token)) {
			return r.Val.Token, false
		}
	}
	token, existed := int64(0), false
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
		var equal uint64
		for i, r := range replies {
			if r.Yes && r.Val.Counter == token {
				equal |= 1 << i
			}
		}
		if q.Met(equal) {
			return token, false
		}
	}
	return token, true
}

// agreeing is the set of the yes-votes that found the owner's lock with
// recorded token t > 0.
func agreeing(replies []quorum.Reply[script.Acquired], t int64) uint64 {
	if t <= 0 {
		return 0
	}
	var m uint64
	for i, r := range replies {
		if r.Yes && r.Val.Existed && r.Val.Token == t {
			m |= 1 << i
		}
	}
	return m
}

// raise seals: it raises the counter and records the token as the owner's
// (seal.lua).
func (family) raise(ctx context.Context, n driver.Node, k script.Keys, token int64, s *secret, g script.Guard) error {
	return script.Seal(ctx, n, k, token, s.hold.Owner, g)
}

// holdCheck reads the expiry of a hold (holds.lua: a hash field h:ID whose
// value is its expiry on the node's clock) and the node's time.
func holdCheck(key string, s *secret) [][]any {
	return [][]any{{"HGET", key, keys.Hold(s.id)}, {"TIME"}}
}

// holdLeft decodes holdCheck's replies: the hold is live, for that long.
func holdLeft(replies []driver.Reply) (bool, time.Duration) {
	v, err := reply.String(replies[0].Val, replies[0].Err)
	if err != nil {
		return false, 0
	}
	exp, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false, 0
	}
	now, ok := nodeTime(replies[1])
	if !ok || exp <= now {
		return false, 0
	}
	return true, time.Duration(exp-now) * time.Millisecond
}

// nodeTime reads a TIME reply as milliseconds.
func nodeTime(r driver.Reply) (int64, bool) {
	now, err := reply.Slice(r.Val, r.Err)
	if err != nil || len(now) != 2 {
		return 0, false
	}
	secs, err1 := strconv.ParseInt(fmt.Sprint(now[0]), 10, 64)
	micros, err2 := strconv.ParseInt(fmt.Sprint(now[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return secs*1000 + micros/1000, true
}

// group: a reentrant owner's obtains queue among themselves only, never
// behind other waiters of the name, which may be waiting for the owner's
// own lock: a re-entry must never wait behind anyone. The group cannot
// collide with a lock key, which starts with '{'.
func (family) group(key string, proto *script.Hold) string {
	if proto.Mode == keys.ModeWrite && proto.Owner != "" {
		return "owner\x00" + key + "\x00" + proto.Owner
	}
	return key
}

func (family) exclusive(proto *script.Hold) bool { return proto.Mode == keys.ModeWrite }

func (family) withdraw(ctx context.Context, n driver.Node, key, writerMark string) error {
	_, err := script.Withdraw(ctx, n, keys.WriterWaits(key), writerMark)
	return err
}

// permit is one permit of a semaphore of proto.Permits (permit.lua): a
// hash like the family's, one expiring field per permit.
type permit struct {
	highestTokenRule
	noMark
	holds
}

func (permit) newSecret(_ string, proto *script.Hold, id, _ string, h *script.Hold) secret {
	*h = *proto
	h.ID = id
	return secret{id: id, hold: h}
}

// quorum is limits.PermitQuorum: floor(n·k/(k+1)) + 1 (docs/safety.md,
// "Semaphores").
func (permit) quorum(n int, proto *script.Hold) int { return limits.PermitQuorum(n, proto.Permits) }

func (permit) acquire(k script.Keys, s *secret, ttl time.Duration, g script.Guard) script.Call {
	return script.PermitAcquireCall(k, *s.hold, ttl, g)
}

func (permit) refresh(k script.Keys, s *secret, token int64, ttl time.Duration) script.RefreshItem {
	return script.PermitRefresh(k, s.hold, token, ttl)
}

func (permit) release(key string, s *secret, rt script.Retire, publish, sharded bool) script.Call {
	return script.PermitReleaseCall(key, *s.hold, rt, releaseChannel(key, publish), sharded)
}

func (permit) probe(key string) [][]any { return [][]any{{"HGETALL", key}, {"TIME"}} }

// looked counts the semaphore's live permits at the node's time as the
// scripts do (holds.lua): free when fewer than k are live, else the time
// until the soonest expires.
func (permit) looked(replies []driver.Reply, proto *script.Hold) (bool, time.Duration) {
	fields, err := reply.Slice(replies[0].Val, replies[0].Err)
	if err != nil {
		return false, -1
	}
	ms, ok := nodeTime(replies[1])
	if !ok {
		return false, -1
	}
	live, soonest := 0, int64(-1)
	for i := 0; i+1 < len(fields); i += 2 {
		f, _ := fields[i].(string)
		v, _ := fields[i+1].(string)
		if !strings.HasPrefix(f, keys.HoldPrefix) {
			continue
		}
		exp, err := strconv.ParseInt(v, 10, 64)
		if err != nil || exp <= ms {
			continue
		}
		live++
		if soonest < 0 || exp < soonest {
			soonest = exp
		}
	}
	if live < proto.Permits {
		return true, -1
	}
	return false, time.Duration(soonest-ms) * time.Millisecond
}
