package fence

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// RedisClient is what Redis needs of a Redis client: EVAL and EVALSHA.
// Every go-redis v9 client has both (*redis.Client, *redis.ClusterClient,
// *redis.Ring, a failover client, redis.UniversalClient, redis.Scripter).
type RedisClient interface {
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
}

// Redis keeps fenced resources in Redis. Each resource is one hash at the
// key the caller names: its field value holds the data, fence the highest
// token of an exclusive holder, shared the highest token of a shared
// reader, lock the lock the resource follows, refused the count of refusals, writes the count of accepted
// writes, bounded the count of Add calls refused by their floor, added0
// to added7 the ids and results of the last 8 Add calls and added the
// next of them (so that a client's retry is not applied twice). Deleting
// the key deletes the data and its fence together.
//
// Every call is one script, atomic on the node that holds the key: the
// check, the record of the token and the operation. Redis is safe for
// concurrent use.
type Redis struct {
	rdb  RedisClient
	opts options
}

// NewRedis returns the fenced resources of rdb. The caller owns rdb and
// closes it after its last use. NewRedis does no I/O: a nil rdb (a typed
// nil too) makes every call fail with an error matching ErrInvalid.
func NewRedis(rdb RedisClient, opts ...Option) *Redis {
	if isNil(rdb) {
		rdb = nil
	}
	return &Redis{rdb: rdb, opts: newOptions(opts)}
}

// NoFloor is the floor of an Add that has none.
const NoFloor int64 = math.MinInt64

// Set stores value at key if s's token is at least the key's fence (and
// the highest shared reader's token), and raises the fence to it. It
// returns a *StaleError (ErrStale) otherwise, an error matching
// ErrOtherLock when the key follows another lock than s's, and changes
// nothing but the count of refusals then. The key follows s's lock from
// its first sequencer on (the hash's field lock).
func (r *Redis) Set(ctx context.Context, key string, s Sequencer, value string) error {
	_, err := r.run(ctx, setScript, key, s, value)
	return err
}

// Get returns the value at key for the holder of s, who means to write
// after it (a read-modify-write), and records s's token as the fence: from
// now on, a holder with a lower token can neither read nor write. Without
// that record, a holder that stalls between its read and its write past
// its lock's validity could still write, before the next holder, which
// read the same value, writes and overwrites it: an update lost with no
// stale write accepted. ok is false when no value is stored. It returns a
// *StaleError (ErrStale) when the token is below the fence, and an error
// matching ErrOtherLock for another lock's sequencer.
func (r *Redis) Get(ctx context.Context, key string, s Sequencer) (value string, ok bool, err error) {
	return r.get(ctx, getScript, key, s)
}

// GetShared returns the value at key for the holder of a shared (read)
// lock with sequencer s, the reader of redlock's Client.RWMutex. Readers overlap
// and their tokens are not ordered among themselves: a shared read is
// refused only when an exclusive holder with a higher token has read or
// written. It records the highest reader token, so that an exclusive
// holder older than a reader can no longer write or Get. It returns a
// *StaleError (ErrStale) when refused.
func (r *Redis) GetShared(ctx context.Context, key string, s Sequencer) (value string, ok bool, err error) {
	return r.get(ctx, sharedScript, key, s)
}

func (r *Redis) get(ctx context.Context, sc script, key string, s Sequencer) (string, bool, error) {
	v, err := r.run(ctx, sc, key, s)
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return "", false, err
	}
	str, ok := v.(string)
	if !ok && v != nil {
		return "", false, fmt.Errorf("fence: %s: unexpected reply %T", key, v)
	}
	return str, ok, err
}

// Add adds delta to the integer counter at key (a missing one is 0) if
// s's token is current, and returns the new value. When the new value would
// be below floor, it changes nothing (but the count of such refusals, and
// it records no token) and returns a *BoundError (ErrBound):
// a stock decremented with Add(ctx, key, token, -1, 0) never goes below
// zero. Pass NoFloor for no floor. It returns a *StaleError (ErrStale)
// when the token is below the fence (ErrOtherLock for another lock's
// sequencer), and an error matching ErrInvalid when
// the value is not an integer as Redis reads one (abc, 007, -0) or the
// change would overflow int64. Every failed Add changes nothing but the
// counts of refusals. The counter is compared with the floor exactly while
// it stays within ±2⁵³; the value returned is exact.
//
// A client's retry is applied once: go-redis sends a command again when
// its reply times out, though Redis may have applied it. Each Add carries
// a random id, and the key keeps the ids and results of its last 8 Adds:
// the retry gets the first result and changes nothing, even once a newer
// holder has written. A retry that comes after 8 other Adds of the key
// under its token would be applied again (a newer token refuses it): a
// holder that runs that many Adds of one key at once should turn the
// client's retries off (MaxRetries: -1). An Add that returns another error
// (a timeout after the last retry) may or may not have been applied:
// Inspect tells, not a new Add.
func (r *Redis) Add(ctx context.Context, key string, s Sequencer, delta, floor int64) (int64, error) {
	f := ""
	if floor != NoFloor {
		f = strconv.FormatInt(floor, 10)
	}
	v, err := r.run(ctx, addScript, key, s, delta, f)
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return 0, err
	}
	str, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("fence: %s: unexpected reply %T", key, v)
	}
	n, perr := strconv.ParseInt(str, 10, 64)
	if perr != nil {
		return 0, fmt.Errorf("fence: %s: unexpected reply %q", key, str)
	}
	return n, err
}

// Eval runs the caller's Lua script only if s is current for the resource
// at key: in one script, it checks s against key's fence (refused: a
// *StaleError, ErrStale, or ErrOtherLock, and the script does not run),
// raises the fence to s's token, and runs src, which sees keys as KEYS and
// args as ARGV. It returns the script's reply and error, as go-redis's Cmd.Result
// would.
//
// key is a hash whose fields fence, shared, lock, refused and writes
// belong to this package: a resource of Set and Get, a key of its own, or the
// caller's own hash. With Redis Cluster, key and keys must share a hash
// slot (a hash tag). src must not begin with a shebang (#!lua); it is sent
// with EVAL, as its digest is not computed here (SHA-1 is refused in FIPS
// 140-only mode), and Redis compiles it once and keeps it in its script
// cache. The fence is raised before src runs, and stays raised if src
// fails: the holder was current. An error of src comes back as it is,
// whatever it says: the package's refusals carry a random id of the call,
// which src is not given.
func (r *Redis) Eval(ctx context.Context, key string, s Sequencer, src string, keys []string, args ...any) (any, error) {
	if err := r.admit(ctx, key, s); err != nil {
		return nil, err
	}
	id := callID()
	allKeys := append([]string{key}, keys...)
	allArgs := append([]any{strconv.FormatInt(s.Token, 10), id, s.Lock}, args...)
	full := script{src: checkSrc + evalSrc + src + "\nend)(userKeys, userArgs)\n"}
	return r.exec(ctx, full, id, s, allKeys, allArgs)
}

// State is what a resource in Redis holds, without a token: for
// monitoring, tests, and the reports of the demo and the fault suite.
type State struct {
	Value   string
	Exists  bool   // a value is stored
	Fence   int64  // the highest token of an exclusive holder, 0 if none
	Shared  int64  // the highest token of a shared reader, 0 if none
	Writes  int64  // accepted Set, Add and Eval calls
	Refused int64  // tokens refused below the fence
	Bounded int64  // Add calls refused by their floor
	Lock    string // the lock the resource follows, "" if none yet
}

// Inspect returns the state of the resource at key. It checks no token
// and records nothing.
func (r *Redis) Inspect(ctx context.Context, key string) (State, error) {
	if err := r.ready(ctx, key); err != nil {
		return State{}, err
	}
	keys := []string{key}
	v, err := r.rdb.EvalSha(ctx, inspectScript.sha, keys).Result()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		v, err = r.rdb.Eval(ctx, inspectScript.src, keys).Result()
	}
	if err != nil {
		return State{}, err
	}
	vals, ok := v.([]any)
	if !ok || len(vals) != 7 {
		return State{}, fmt.Errorf("fence: %s: unexpected reply %v", key, v)
	}
	var st State
	st.Value, st.Exists = vals[0].(string)
	st.Lock, _ = vals[6].(string)
	for i, p := range []*int64{&st.Fence, &st.Shared, &st.Writes, &st.Refused, &st.Bounded} {
		if s, ok := vals[i+1].(string); ok {
			if *p, err = strconv.ParseInt(s, 10, 64); err != nil {
				return State{}, fmt.Errorf("fence: %s: field %d: %w", key, i+1, err)
			}
		}
	}
	return st, nil
}

// Reset sets the fence of the resource at key to to: its token becomes
// the highest the resource has seen, and its lock the one it follows, both
// removed for the zero Sequencer (the next sequencer is then admitted
// whatever it is, as on a new record). The highest shared reader's token
// is forgotten; the value and the counts stay. It checks nothing: it is
// the way out of a poisoned fence, one raised by a token no holder has
// (a forged or mistaken token), which refuses every real holder. Reset it
// to a token at or above every token the lock has issued, so that a stale
// holder stays refused: the lock's latest counter (redlock fence reset
// --latest reads it from the lock's nodes, docs/fencing.md, "Poisoned
// fences"). With Durable, it waits for the replicas as a write does.
func (r *Redis) Reset(ctx context.Context, key string, to Sequencer) error {
	if err := r.ready(ctx, key); err != nil {
		return err
	}
	tok := ""
	if to != (Sequencer{}) {
		tok = strconv.FormatInt(to.Token, 10)
	}
	_, err := r.exec(ctx, resetScript, callID(), to, []string{key}, []any{tok, to.Lock})
	return err
}

// Admit implements GuardStore: a Guard's store in Redis, which outlives
// the guard's process and which an operator can reset (Reset, redlock
// fence reset). The resource's record is at the key resource, and s is
// recorded there as Get records it.
func (r *Redis) Admit(ctx context.Context, resource string, s Sequencer) (Sequencer, bool, error) {
	_, _, err := r.Get(ctx, resource, s)
	var se *StaleError
	var oe *otherLockError
	switch {
	case err == nil:
		return s, true, nil
	case errors.As(err, &se) && !se.Negative:
		return Sequencer{Lock: s.Lock, Kind: s.Kind, Token: se.Fence}, false, nil
	case errors.As(err, &oe):
		return Sequencer{Lock: oe.follows}, false, nil
	}
	return Sequencer{}, false, err
}

// ready refuses a call that cannot be sent: no Redis, no client, no
// context or no key.
func (r *Redis) ready(ctx context.Context, key string) error {
	switch {
	case r == nil:
		return invalid("nil *Redis: make it with NewRedis")
	case r.rdb == nil:
		return invalid("no Redis client: NewRedis was given a nil client")
	case ctx == nil:
		return invalid("nil context")
	case key == "":
		return invalid("empty key")
	}
	return r.opts.ack.valid()
}

func (r *Redis) admit(ctx context.Context, key string, s Sequencer) error {
	if err := r.ready(ctx, key); err != nil {
		return err
	}
	return r.opts.admit(key, s)
}

// run runs sc on key with s and args, as a new call (callID).
func (r *Redis) run(ctx context.Context, sc script, key string, s Sequencer, args ...any) (any, error) {
	return r.call(ctx, sc, key, callID(), s, args...)
}

// call runs sc on key as the call id with s and args: EVALSHA, and EVAL
// when the node does not have the script yet.
func (r *Redis) call(ctx context.Context, sc script, key, id string, s Sequencer, args ...any) (any, error) {
	if err := r.admit(ctx, key, s); err != nil {
		return nil, err
	}
	argv := append([]any{strconv.FormatInt(s.Token, 10), id, s.Lock}, args...)
	return r.exec(ctx, sc, id, s, []string{key}, argv)
}

// callID is a call's id: 65 random bits, the first 13 characters of
// rand.Text (base32). The package's scripts put it in their error replies,
// after the code, so that reply never takes an error of the caller's own
// script (Eval) for one of theirs, however it is spelled; Add records it
// to know a client's retry. 13 characters keep an Add's record of a call
// within 64 bytes, the longest value of Redis's compact encoding of a
// small hash.
func callID() string { return rand.Text()[:13] }

// reply turns the scripts' refusals into the package's errors: those that
// carry the call's id, and only those.
func (r *Redis) reply(key, id string, s Sequencer, err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		return err
	}
	msg := err.Error()
	f := strings.Fields(msg)
	if len(f) < 2 || f[1] != id {
		return err
	}
	code, f := f[0], f[2:]
	switch {
	case code == "FENCE_STALE" && len(f) == 2:
		seen, perr := strconv.ParseInt(f[1], 10, 64)
		if perr == nil {
			return &StaleError{Resource: key, Token: s.Token, Fence: seen}
		}
	case code == "FENCE_LOCK" && len(f) == 1:
		if name, herr := hex.DecodeString(f[0]); herr == nil {
			return &otherLockError{resource: key, s: s, follows: string(name)}
		}
	case code == "FENCE_BOUND" && len(f) == 3:
		v, e1 := strconv.ParseInt(f[0], 10, 64)
		d, e2 := strconv.ParseInt(f[1], 10, 64)
		fl, e3 := strconv.ParseInt(f[2], 10, 64)
		if e1 == nil && e2 == nil && e3 == nil {
			return &BoundError{Key: key, Value: v, Delta: d, Floor: fl}
		}
	case code == "FENCE_RANGE" && len(f) == 2:
		if d, perr := strconv.ParseInt(f[1], 10, 64); perr == nil {
			return invalid("%s: counter %s%+d would overflow int64", key, f[0], d)
		}
	case code == "FENCE_NOTINT":
		return invalid("%s: the value %q is not an integer counter", key, strings.TrimPrefix(msg, "FENCE_NOTINT "+id+" "))
	}
	return err
}

// BoundError is an Add refused because the counter would go below its
// floor. It matches ErrBound.
type BoundError struct {
	Key   string
	Value int64 // the counter, unchanged
	Delta int64
	Floor int64
}

func (e *BoundError) Error() string {
	return fmt.Sprintf("fence: %s: counter %d%+d would be below its floor %d", e.Key, e.Value, e.Delta, e.Floor)
}

// Is reports whether target is ErrBound.
func (e *BoundError) Is(target error) bool { return target == ErrBound }

// script is a script's source and its SHA-1 digest for EVALSHA. The
// digests are constants, checked by TestScriptDigests: computing SHA-1 at
// run time panics in FIPS 140-only mode (GODEBUG=fips140=only).
type script struct{ src, sha string }

var (
	//go:embed check.lua
	checkSrc string
	//go:embed set.lua
	setSrc string
	//go:embed get.lua
	getSrc string
	//go:embed shared.lua
	sharedSrc string
	//go:embed add.lua
	addSrc string
	//go:embed eval.lua
	evalSrc string
	//go:embed inspect.lua
	inspectSrc string
	//go:embed reset.lua
	resetSrc string

	setScript    = script{checkSrc + setSrc, "f570d02b90a377dc8b38e4539c9df482ffc63837"}
	getScript    = script{checkSrc + getSrc, "1c4cd97f360d04fbe1fcd4133a9bb7213f5805ab"}
	sharedScript = script{checkSrc + sharedSrc, "d37c9bf85c8b9ae693e3a5471750ebefb8bad0c6"}
	addScript    = script{checkSrc + addSrc, "c9bd7b63fdd4148ab1477144578eeee870cfb0cf"}

	resetScript   = script{resetSrc, "4fe7204876e11563645058ddd490c92cd18e4b12"}
	inspectScript = script{inspectSrc, "9ac2d0320e75ebdbad5e6de115ae0bcd0522caaf"}
)
