// Package script holds the Lua scripts that run on each Redis node, their
// argument encoding and the decoding of their replies.
//
// Each script is wrapped once in redis.NewScript, so it runs with EVALSHA and
// falls back to EVAL when the node answers NOSCRIPT (after SCRIPT FLUSH or a
// restart).
package script

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed epoch.lua
	epochSrc string
	//go:embed acquire.lua
	acquireSrc string
	//go:embed release.lua
	releaseSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed fence.lua
	fenceSrc string
	//go:embed counter.lua
	counterSrc string
	//go:embed token.lua
	tokenSrc string
	//go:embed holds.lua
	holdsSrc string
	//go:embed family.lua
	familySrc string
	//go:embed familyrefresh.lua
	familyRefreshSrc string
	//go:embed familyrelease.lua
	familyReleaseSrc string
	//go:embed seal.lua
	sealSrc string
	//go:embed permit.lua
	permitSrc string
	//go:embed permitrefresh.lua
	permitRefreshSrc string
	//go:embed permitrelease.lua
	permitReleaseSrc string

	// The scripts that can vote carry the epoch guard's functions; those
	// that read or raise a fencing counter, the counter's and token.lua's
	// (issue, current, raise: a missing counter is seeded from the node's
	// time, epoch.lua's node_now).
	acquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + acquireSrc)
	refresh = newScript(epochSrc + "\n" + refreshSrc)
	release = newScript(releaseSrc)
	fence   = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + fenceSrc)

	// The lock family's (read-write and reentrant locks): they read the
	// node's time (epoch.lua's node_now) to expire each hold on its own.
	familyAcquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + holdsSrc + "\n" + familySrc)
	familyRefresh = newScript(epochSrc + "\n" + holdsSrc + "\n" + familyRefreshSrc)
	familyRelease = newScript(epochSrc + "\n" + holdsSrc + "\n" + familyReleaseSrc)
	seal          = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + sealSrc)

	// The semaphore's (ObtainPermit): a hash like the family's, one
	// expiring field per permit.
	permitAcquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + holdsSrc + "\n" + permitSrc)
	permitRefresh = newScript(epochSrc + "\n" + holdsSrc + "\n" + permitRefreshSrc)
	permitRelease = newScript(epochSrc + "\n" + holdsSrc + "\n" + permitReleaseSrc)
)

// The scripts' EVALSHA arguments, boxed once: a script call builds one
// argument slice, and go-redis sends it as it is (Do), with no copy and no
// boxing of its own.
var (
	acquireSha       = any(acquire.Hash())
	releaseSha       = any(release.Hash())
	fenceSha         = any(fence.Hash())
	familyAcquireSha = any(familyAcquire.Hash())
	familyReleaseSha = any(familyRelease.Hash())
	permitAcquireSha = any(permitAcquire.Hash())
	permitReleaseSha = any(permitRelease.Hash())
)

// run sends EVALSHA with args ("evalsha", sha, numkeys, keys..., argv...),
// and EVAL with the source when the node does not have the script (after
// SCRIPT FLUSH or a restart). args is not kept.
func run(ctx context.Context, c redis.UniversalClient, src string, args []any) *redis.Cmd {
	cmd := c.Do(ctx, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = c.Do(ctx, evalArgs(args, src)...)
	}
	return cmd
}

// evalArgs turns EVALSHA arguments into EVAL's, in a copy: the original
// may be in use by calls to other nodes.
func evalArgs(args []any, src string) []any {
	eval := make([]any, len(args))
	copy(eval, args)
	eval[0], eval[1] = "eval", src
	return eval
}

// luaScript is a script and its source, for EVAL when EVALSHA finds no
// script on the node.
type luaScript struct {
	*redis.Script
	src string
}

func newScript(src string) luaScript { return luaScript{redis.NewScript(src), src} }

// Keys are the Redis keys of one lock on one node.
type Keys struct {
	Lock  string // the lock: its owner's value, with the TTL
	Fence string // the fencing counter
	Epoch string // the node's epoch record
}

// Guard holds the parameters of the epoch guard and of the fencing counter.
type Guard struct {
	MaxTTL time.Duration // the recovery window
	Delta  time.Duration // how long an identity check is trusted
	// Mode is '1' (on), 'p' (on, trusting persistence) or '0' (off).
	Mode      byte
	RecordTTL time.Duration // expiry of the epoch record; 0: none
	FenceTTL  time.Duration // expiry of a fencing counter, renewed on use

	argv []any // the encoded arguments, once Prepared
}

// Prepared returns g with its script arguments encoded once, so that the
// calls that use it do not encode them again.
func (g Guard) Prepared() Guard {
	g.argv = nil
	g.argv = g.args()
	return g
}

// args are ARGV[3..7] of the acquire and refresh scripts.
func (g Guard) args() []any {
	if g.argv != nil {
		return g.argv
	}
	return []any{ms(g.MaxTTL), ms(g.Delta), string(g.Mode), ms(g.FenceTTL), ms(g.RecordTTL)}
}

// Status is what an acquire found on one node.
type Status int

const (
	Held       Status = 0 // another owner holds the lock
	Taken      Status = 1 // the lock is ours now
	Recovering Status = 2 // the node may not vote yet (epoch guard)
)

// Acquired is the decoded reply of the acquire script.
type Acquired struct {
	Status Status
	// Token is the fencing token this node issued when Taken.
	Token int64
	// HolderTTL is the remaining time to live of the current holder when
	// Held; negative when the key has no expiry.
	HolderTTL time.Duration
	// Recovering is how long the node still recovers when Recovering.
	Recovering time.Duration
	// Unreplicated is true when the lock was taken but WAIT did not
	// confirm the replicas asked for.
	Unreplicated bool
	// Existed is true when a re-entry found the owner's lock on the node
	// (the lock family): Token is then the token the node recorded for the
	// owner, and Counter the node's fencing counter, which the re-entry did
	// not raise. Otherwise Counter is Token, which this acquire issued.
	Existed bool
	Counter int64
}

// OK reports whether the node votes for us: taken, and replicated when
// replicas were asked for.
func (a Acquired) OK() bool { return a.Status == Taken && !a.Unreplicated }

// Ack asks a node to confirm its vote with WAIT: Replicas replicas within
// Timeout. Zero Replicas asks nothing.
type Ack struct {
	Replicas int
	Timeout  time.Duration
}

// Call is a script call with its arguments built and boxed once, so that
// the same call sent to several nodes (those whose keys are the same) costs
// one argument slice, not one per node.
type Call struct {
	args []any  // "evalsha", sha, numkeys, keys..., argv...
	src  string // the script, for EVAL when the node lacks it
}

// LockArgs are a plain lock's key and owner value, boxed once as script
// arguments, for the lock's acquire and release calls to share.
type LockArgs struct{ key, value any }

// NewLockArgs boxes a lock's key (Keys.Lock) and owner value.
func NewLockArgs(key, value string) LockArgs { return LockArgs{key, value} }

// AcquireCall prepares the acquire script for a lock's keys; a holds
// k.Lock and the owner value.
func AcquireCall(k Keys, a LockArgs, ttl time.Duration, g Guard) Call {
	ga := g.args()
	args := make([]any, 0, 8+len(ga))
	args = append(args, "evalsha", acquireSha, "3", a.key, k.Fence, k.Epoch, a.value, ttl.Milliseconds())
	return Call{append(args, ga...), acquire.src}
}

// Hold is one hold of a lock of the family (family.lua): a read-write or
// reentrant lock; or one permit of a semaphore (permit.lua).
type Hold struct {
	Mode  byte   // 'w' exclusive, 'r' shared, 's' a semaphore's permit
	Owner string // the exclusive owner; empty for a reader and a permit
	ID    string // this hold's own random value
	// Permits is the semaphore's number of permits (mode 's').
	Permits int
}

func (h Hold) mode() string {
	if h.Mode == 'r' {
		return "r"
	}
	return "w"
}

// PermitAcquireCall prepares the semaphore's acquire script (permit.lua)
// for a permit h (mode 's').
func PermitAcquireCall(k Keys, h Hold, ttl time.Duration, g Guard) Call {
	ga := g.args()
	args := make([]any, 0, 9+len(ga))
	args = append(args, "evalsha", permitAcquireSha, "3", k.Lock, k.Fence, k.Epoch, strconv.Itoa(h.Permits), h.ID, ttl.Milliseconds())
	return Call{append(args, ga...), permitAcquire.src}
}

// PermitReleaseCall prepares the semaphore's release script
// (permitrelease.lua) for a permit (see Release).
func PermitReleaseCall(key string, h Hold, channel string, sharded bool) Call {
	flag := "0"
	if sharded {
		flag = "1"
	}
	return Call{[]any{"evalsha", permitReleaseSha, "1", key, h.ID, channel, flag}, permitRelease.src}
}

// FamilyAcquireCall prepares the family's acquire script for a hold.
func FamilyAcquireCall(k Keys, h Hold, ttl time.Duration, g Guard) Call {
	ga := g.args()
	args := make([]any, 0, 10+len(ga))
	args = append(args, "evalsha", familyAcquireSha, "3", k.Lock, k.Fence, k.Epoch, h.mode(), h.Owner, h.ID, ttl.Milliseconds())
	return Call{append(args, ga...), familyAcquire.src}
}

// Acquire runs the acquire script on one node, followed in the same
// pipeline by WAIT when ack asks for replicas.
func Acquire(ctx context.Context, c redis.UniversalClient, k Keys, value string, ttl time.Duration, g Guard, ack Ack) (Acquired, error) {
	return AcquireCall(k, NewLockArgs(k.Lock, value), ttl, g).Acquire(ctx, c, ack)
}

// Acquire runs a prepared acquire on one node, followed in the same
// pipeline by WAIT when ack asks for replicas.
func (call Call) Acquire(ctx context.Context, c redis.UniversalClient, ack Ack) (Acquired, error) {
	if ack.Replicas == 0 {
		v, err := run(ctx, c, call.src, call.args).Result()
		if err != nil {
			return Acquired{}, err
		}
		return decodeAcquire(v)
	}
	send := func(args []any) (*redis.Cmd, *redis.Cmd, error) {
		pipe := c.Pipeline()
		cmd := pipe.Do(ctx, args...)
		// WAIT on the same connection, right after the script: it counts
		// the replicas that acknowledged the script's writes.
		wait := pipe.Do(ctx, "WAIT", ack.Replicas, ack.Timeout.Milliseconds())
		_, err := pipe.Exec(ctx)
		if err != nil && !isReply(err) {
			return nil, nil, err
		}
		return cmd, wait, nil
	}
	cmd, wait, err := send(call.args)
	if err == nil && redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
		cmd, wait, err = send(evalArgs(call.args, call.src))
	}
	if err != nil {
		return Acquired{}, err
	}
	v, err := cmd.Result()
	if err != nil {
		return Acquired{}, err
	}
	a, err := decodeAcquire(v)
	if err != nil || a.Status != Taken {
		return a, err
	}
	n, err := wait.Int64()
	if err != nil {
		return a, err
	}
	a.Unreplicated = n < int64(ack.Replicas)
	return a, nil
}

func decodeAcquire(v any) (Acquired, error) {
	a, ok := v.([]any)
	if !ok || (len(a) != 2 && len(a) != 4) {
		return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
	}
	status, ok1 := a[0].(int64)
	n, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
	}
	switch Status(status) {
	case Taken:
		if len(a) == 4 {
			existed, ok1 := a[2].(int64)
			counter, ok2 := a[3].(int64)
			if !ok1 || !ok2 {
				return Acquired{}, fmt.Errorf("redlock: unexpected acquire reply %v", v)
			}
			return Acquired{Status: Taken, Token: n, Existed: existed == 1, Counter: counter}, nil
		}
		return Acquired{Status: Taken, Token: n, Counter: n}, nil
	case Held:
		return Acquired{Status: Held, HolderTTL: time.Duration(n) * time.Millisecond}, nil
	case Recovering:
		return Acquired{Status: Recovering, Recovering: time.Duration(n) * time.Millisecond}, nil
	}
	return Acquired{}, fmt.Errorf("redlock: unexpected acquire status %d", status)
}

// Fence raises a lock's fencing counter on one node to at least token.
func Fence(ctx context.Context, c redis.UniversalClient, fenceKey string, token int64, g Guard) error {
	return run(ctx, c, fence.src, []any{"evalsha", fenceSha, "1", fenceKey, token, g.FenceTTL.Milliseconds()}).Err()
}

// Seal raises a lock's fencing counter on one node to at least token, as
// Fence, and records token as the owner's where owner holds the lock of the
// family exclusively.
func Seal(ctx context.Context, c redis.UniversalClient, k Keys, token int64, owner string, g Guard) error {
	return seal.Run(ctx, c, []string{k.Fence, k.Lock}, token, g.FenceTTL.Milliseconds(), owner).Err()
}

// Released is the decoded reply of the release script.
type Released struct {
	// Deleted is true when the key held our value and was deleted.
	Deleted bool
	// Receivers is how many subscribed connections heard the
	// notification that the lock is free.
	Receivers int64
}

// Release runs the compare-and-delete script on one node, publishing on
// the lock's release channel (keys.Channel; with SPUBLISH when sharded)
// when publish is set and the key is free afterwards. The clean-up of a
// failed attempt must not publish: it must not wake waiters, since the lock
// may well be held on the other nodes (and their failed attempts' clean-ups
// would wake others in turn).
func Release(ctx context.Context, c redis.UniversalClient, key, value string, publish, sharded bool) (Released, error) {
	return ReleaseCall(NewLockArgs(key, value), publish, sharded).Release(ctx, c)
}

// ReleaseCall prepares the release script (see Release).
func ReleaseCall(a LockArgs, publish, sharded bool) Call {
	flag := ""
	switch {
	case publish && sharded:
		flag = "1"
	case publish:
		flag = "0"
	}
	return Call{[]any{"evalsha", releaseSha, "1", a.key, a.value, flag}, release.src}
}

// FamilyReleaseCall prepares the family's release script for a hold (see
// Release).
func FamilyReleaseCall(key string, h Hold, channel string, sharded bool) Call {
	flag := "0"
	if sharded {
		flag = "1"
	}
	return Call{[]any{"evalsha", familyReleaseSha, "1", key, h.mode(), h.Owner, h.ID, channel, flag}, familyRelease.src}
}

// Release runs a prepared release on one node.
func (call Call) Release(ctx context.Context, c redis.UniversalClient) (Released, error) {
	n, err := run(ctx, c, call.src, call.args).Int64()
	if err != nil {
		return Released{}, err
	}
	if n < 0 {
		return Released{}, fmt.Errorf("redlock: unexpected release reply %d", n)
	}
	return Released{Deleted: n&1 == 1, Receivers: n >> 1}, nil
}

// RefreshResult is what the refresh script did on one node.
type RefreshResult int

const (
	// NotOwner: another owner holds the key; nothing was changed.
	NotOwner RefreshResult = 0
	// Extended: the key held our value; its expiry is at least the TTL.
	Extended RefreshResult = 1
	// Reseeded: the key was missing and was set again with our value.
	Reseeded RefreshResult = 2
	// NotReseeded: the key was missing, and the node is recovering.
	NotReseeded RefreshResult = 3
)

// Agrees reports whether the node votes for the refresh.
func (r RefreshResult) Agrees() bool { return r == Extended || r == Reseeded }

// Refresh runs the refresh script on one node.
func Refresh(ctx context.Context, c redis.UniversalClient, k Keys, value string, ttl time.Duration, g Guard) (RefreshResult, error) {
	return RefreshItem{Keys: k, Value: value, TTL: ttl}.Run(ctx, c, g)
}

// Run refreshes the item on one node.
func (it RefreshItem) Run(ctx context.Context, c redis.UniversalClient, g Guard) (RefreshResult, error) {
	s, keys, args := it.script(g.args())
	n, err := s.Run(ctx, c, keys, args...).Int64()
	if err != nil {
		return NotOwner, err
	}
	if n < 0 || n > 3 {
		return NotOwner, fmt.Errorf("redlock: unexpected refresh reply %d", n)
	}
	return RefreshResult(n), nil
}

// ms encodes a duration as whole milliseconds for PX and PEXPIRE.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// RefreshItem is one lock in a batched refresh.
type RefreshItem struct {
	Keys  Keys
	Value string
	TTL   time.Duration
	// Hold is set for a lock of the family; Value is then unused.
	Hold *Hold
}

// script is the item's refresh script, keys and arguments; ga are the
// guard's.
func (it RefreshItem) script(ga []any) (luaScript, []string, []any) {
	keys := []string{it.Keys.Lock, it.Keys.Epoch}
	if h := it.Hold; h != nil && h.Mode == 's' {
		args := append([]any{strconv.Itoa(h.Permits), h.ID, ms(it.TTL)}, ga...)
		return permitRefresh, keys, args
	}
	if h := it.Hold; h != nil {
		args := append([]any{h.mode(), h.Owner, h.ID, ms(it.TTL)}, ga...)
		return familyRefresh, keys, args
	}
	return refresh, keys, append([]any{it.Value, ms(it.TTL)}, ga...)
}

// RefreshBatch runs the refresh script for every item on one node in one
// pipeline, re-running with EVAL those the node answered NOSCRIPT. It
// returns each item's result and error; err is set when the node itself
// failed (a network error or timeout), and then no item's result counts.
func RefreshBatch(ctx context.Context, c redis.UniversalClient, items []RefreshItem, g Guard) (results []RefreshResult, errs []error, err error) {
	cmds := make([]*redis.Cmd, len(items))
	ga := g.args()
	pipe := c.Pipeline()
	for i, it := range items {
		s, keys, args := it.script(ga)
		cmds[i] = s.EvalSha(ctx, pipe, keys, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !isReply(err) {
		return nil, nil, err
	}
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = c.Pipeline()
		for _, i := range again {
			s, keys, args := items[i].script(ga)
			cmds[i] = s.Eval(ctx, pipe, keys, args...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !isReply(err) {
			return nil, nil, err
		}
	}
	results = make([]RefreshResult, len(items))
	errs = make([]error, len(items))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n < 0 || n > 3:
			errs[i] = fmt.Errorf("redlock: unexpected refresh reply %d", n)
		default:
			results[i] = RefreshResult(n)
		}
	}
	return results, errs, nil
}

// isReply reports whether err is an error reply from Redis (about one
// command), as opposed to a failure of the connection.
func isReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
