// Package script holds the Lua scripts that run on each Redis node, their
// argument encoding and the decoding of their replies.
//
// The plain lock's acquire runs as a Redis Function (FCALL) where the node
// has functions, from a library loaded on first use (library.go); every
// other script, and the acquire on a node without functions, runs with
// EVALSHA, and falls back to EVAL when the node answers NOSCRIPT (after
// SCRIPT FLUSH or a restart). Every call goes through the node transport
// (internal/transport).
//
// The package computes no SHA-1 at run time, so that it works in a FIPS
// 140-only process (GODEBUG=fips140=only), where crypto/sha1 panics: each
// script's digest, the name EVALSHA gives it, is looked up in a table
// generated ahead of time (digests.go), which TestDigests checks against
// the sources and against the digests redis-server itself computes.
package script

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redlock-go/redlock/driver"
	layout "github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/reply"
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
	//go:embed retire.lua
	retireSrc string
	//go:embed notify.lua
	notifySrc string
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
	//go:embed withdraw.lua
	withdrawSrc string
	//go:embed permitrelease.lua
	permitReleaseSrc string
	//go:embed resume.lua
	resumeSrc string

	// The scripts that can vote carry the epoch guard's functions; those
	// that read or raise a fencing counter, the counter's and token.lua's
	// (issue, current, raise: a missing counter is seeded from the node's
	// time, epoch.lua's node_now). The releases retire the lock's token
	// (retire.lua) and tell the waiters (notify.lua), without token.lua's
	// helpers: a release would pay for the making of their functions.
	acquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + acquireSrc)
	refresh = newScript(epochSrc + "\n" + counterSrc + "\n" + refreshSrc)
	release = newScript(retireSrc + "\n" + notifySrc + "\n" + releaseSrc)
	fence   = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + fenceSrc)

	// The lock family's (read-write and reentrant locks): they read the
	// node's time (epoch.lua's node_now) to expire each hold on its own.
	familyAcquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + holdsSrc + "\n" + familySrc)
	familyRefresh = newScript(epochSrc + "\n" + counterSrc + "\n" + holdsSrc + "\n" + familyRefreshSrc)
	familyRelease = newScript(epochSrc + "\n" + retireSrc + "\n" + notifySrc + "\n" + holdsSrc + "\n" + familyReleaseSrc)
	seal          = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + sealSrc)
	withdraw      = newScript(withdrawSrc)

	// The semaphore's (Client.Semaphore): a hash like the family's, one
	// expiring field per permit.
	permitAcquire = newScript(epochSrc + "\n" + counterSrc + "\n" + tokenSrc + "\n" + holdsSrc + "\n" + permitSrc)
	permitRefresh = newScript(epochSrc + "\n" + counterSrc + "\n" + holdsSrc + "\n" + permitRefreshSrc)
	permitRelease = newScript(epochSrc + "\n" + retireSrc + "\n" + notifySrc + "\n" + holdsSrc + "\n" + permitReleaseSrc)

	// Client.Resume's claim of a handed-off lock (Call.Claim).
	resume = newScript(epochSrc + "\n" + counterSrc + "\n" + holdsSrc + "\n" + resumeSrc)
)

// The scripts' EVALSHA arguments, boxed once: a script call builds one
// argument slice, and go-redis sends it as it is (Do), with no copy and no
// boxing of its own.
var (
	releaseSha       = release.boxed()
	fenceSha         = fence.boxed()
	familyAcquireSha = familyAcquire.boxed()
	familyReleaseSha = familyRelease.boxed()
	permitAcquireSha = permitAcquire.boxed()
	permitReleaseSha = permitRelease.boxed()
)

// run sends a call of s: args are ("fcall", function, numkeys, keys...,
// argv...) for a function of the library (library.go), else ("evalsha",
// sha, ...) or ("eval", source, ...). FCALL loads the library where the
// node lacks it, and gives way to EVALSHA where the node cannot run
// functions; EVALSHA gives way to EVAL when the node does not have the
// script (after SCRIPT FLUSH or a restart). args is not kept.
func run(ctx context.Context, n driver.Node, s *luaScript, args []any) (any, error) {
	if args[0] == "fcall" {
		v, err, ok := fcall(ctx, n, args)
		if ok {
			return v, err
		}
		args = withHead(args, s.boxed())
	}
	v, err := n.Do(ctx, args...)
	if err != nil && reply.HasPrefix(err, "NOSCRIPT") {
		v, err = n.Do(ctx, withHead(args, [2]any{"eval", s.src})...)
	}
	return v, err
}

// withHead is args with their first two replaced (EVALSHA's or EVAL's for
// FCALL's, EVAL's for EVALSHA's), in a copy: the original may be in use by
// calls to other nodes.
func withHead(args []any, head [2]any) []any {
	c := make([]any, len(args))
	copy(c, args)
	c[0], c[1] = head[0], head[1]
	return c
}

// luaScript is a script's source and its SHA-1 digest, for EVALSHA.
type luaScript struct {
	src string
	// sha is the digest from the generated table (digests.go); empty when
	// the table lacks the source (it was edited and the table not
	// regenerated, which TestDigests reports): the script then always
	// runs with EVAL.
	sha string
	// hd is head's result, boxed once by newScript: a call's arguments
	// then box neither again.
	hd [2]any
}

// registered are the sources of every script made by newScript, in the
// order of their making, for TestDigests.
var registered []string

// newScript registers a script's source and looks its digest up in the
// generated table by the source's SHA-256, which FIPS 140 mode allows.
func newScript(src string) luaScript {
	registered = append(registered, src)
	h := sha256.Sum256([]byte(src))
	s := luaScript{src: src, sha: digests[hex.EncodeToString(h[:])]}
	s.hd[0], s.hd[1] = s.head()
	return s
}

// head is the first two arguments of a call of s: "evalsha" and the
// digest, or "eval" and the source when the digest is unknown.
func (s *luaScript) head() (cmd, arg any) {
	if s.hd[0] != nil {
		return s.hd[0], s.hd[1]
	}
	if s.sha == "" {
		return "eval", s.src
	}
	return "evalsha", s.sha
}

// boxed is s's head, boxed once for the calls that build their
// arguments by hand.
func (s *luaScript) boxed() [2]any {
	cmd, arg := s.head()
	return [2]any{cmd, arg}
}

// call is the EVALSHA arguments of s with keys and argv.
func (s *luaScript) call(keys []string, argv ...any) Call {
	args := make([]any, 0, 3+len(keys)+len(argv))
	cmd, arg := s.head()
	args = append(args, cmd, arg, strconv.Itoa(len(keys)))
	for _, k := range keys {
		args = append(args, k)
	}
	return Call{args: append(args, argv...), s: s}
}

// Run runs a prepared call on one node and returns its raw reply.
func (call Call) Run(ctx context.Context, n driver.Node) (any, error) {
	return run(ctx, n, call.s, call.args)
}

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
	// Node is the node's identity as the Client learned it (Identify),
	// "" for none: every script that can give a vote refuses to give it on
	// a server of another identity (epoch.lua's node_is; IsOtherNode). Only where the identity key shares the epoch
	// record's slot: not on a Redis Cluster.
	Node string

	argv  []any // the encoded arguments, once Prepared
	epoch any   // the node's epoch record's key (Keys.Epoch), boxed once by WithEpoch
}

// NewGuard is the guard of a Client with max TTL maxTTL, in mode ('1',
// 'p' or '0'), on a node of a Redis Cluster or not: the one setting the
// library and the command line (redlock probe) share. A fencing counter
// expires after an hour, or ten max TTLs; on a Cluster, whose epoch
// records are one per lock, a record expires after a day, or ten max
// TTLs, so that the records of idle locks go (a missing record is safe:
// epoch.lua). It is Prepared.
func NewGuard(mode byte, maxTTL time.Duration, cluster bool) Guard {
	g := Guard{MaxTTL: maxTTL, Delta: limits.EpochTrust, Mode: mode, FenceTTL: max(time.Hour, 10*maxTTL)}
	if cluster {
		g.RecordTTL = max(24*time.Hour, 10*maxTTL)
	}
	return g.Prepared()
}

// Prepared returns g with its script arguments encoded once, so that the
// calls that use it do not encode them again.
func (g Guard) Prepared() Guard {
	g.argv = nil
	g.argv = g.args()
	return g
}

// WithEpoch is g with the key of its node's epoch record (Keys.Epoch, the
// same for every lock on a node that is not a Redis Cluster) boxed once,
// for the acquire calls to share.
func (g Guard) WithEpoch(key string) Guard {
	g.epoch = key
	return g
}

// epochArg is the epoch record's key as a script argument: g's box when it
// holds key, else a new one.
func (g Guard) epochArg(key string) any {
	if e, ok := g.epoch.(string); ok && e == key {
		return g.epoch
	}
	return key
}

// args are ARGV[3..7] of the acquire and refresh scripts.
func (g Guard) args() []any {
	if g.argv != nil {
		return g.argv
	}
	return []any{ms(g.MaxTTL), ms(g.Delta), string(g.Mode) + g.Node, ms(g.FenceTTL), ms(g.RecordTTL)}
}

// ForNode is g for the node of identity id: its votes are given only
// there (Node). It is Prepared.
func (g Guard) ForNode(id string) Guard {
	g.Node = id
	return g.Prepared()
}

// fenceTTL is the fencing counter's expiry as a script argument (boxed
// once when g is Prepared).
func (g Guard) fenceTTL() any { return g.args()[3] }

// Retire is what a release needs to retire the lock's fencing token on a
// node: where the lock is ours or gone, its counter goes above Token, so
// that a refresh of the lock that arrives after the release, delayed in
// the network, finds the lock superseded there and does not re-seed it
// (release.lua, refresh.lua). A zero Token retires nothing: the clean-up
// of an attempt that was never granted, which nothing refreshes.
type Retire struct {
	Fence string // the lock's fencing counter (Keys.Fence)
	Token int64
	Guard Guard // its FenceTTL is the counter's expiry when written
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
	// args are "fcall" and a function of the library (library.go), or
	// "evalsha" and a digest, or "eval" and a source; then numkeys,
	// keys..., argv...
	args []any
	s    *luaScript // the script, for EVALSHA and EVAL
	// mode is the index in args of the guard's mode and node identity
	// (Guard.args' third), 0 for a call without a guard.
	mode int
}

// ForNode is c with guard g's node identity (Guard.Node) in place of the
// one c was prepared with: a call shared by the nodes whose keys are the
// same differs between them by the identity alone. It copies c's
// arguments only when the two differ.
func (c Call) ForNode(g Guard) Call {
	want := g.args()[2]
	if c.mode == 0 || c.args[c.mode] == want {
		return c
	}
	c.args = slices.Clone(c.args)
	c.args[c.mode] = want
	return c
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
	args = append(args, acquireFn[0], acquireFn[1], "3", a.key, k.Fence, g.epochArg(k.Epoch), a.value, ttl.Milliseconds())
	return Call{args: append(args, ga...), s: &acquire, mode: len(args) + 2}
}

// Hold is one hold of a lock of the family (family.lua): a read-write or
// reentrant lock; or one permit of a semaphore (permit.lua).
type Hold struct {
	Mode  byte   // 'w' exclusive, 'r' shared, 's' a semaphore's permit
	Owner string // the exclusive owner; empty for a reader and a permit
	ID    string // this hold's own random value
	// Permits is the semaphore's number of permits (mode 's').
	Permits int
	// Wait is the value of the mark that an exclusive hold leaves when it
	// is refused (family.lua), so that readers wait behind it: one per
	// obtain, shared by its attempts, so that a writer that gives up
	// withdraws its own mark (Withdraw) and no other's.
	Wait string
}

func (h Hold) mode() string {
	if h.Mode == layout.ModeRead {
		return string(layout.ModeRead)
	}
	return string(layout.ModeWrite)
}

// PermitAcquireCall prepares the semaphore's acquire script (permit.lua)
// for a permit h (mode 's').
func PermitAcquireCall(k Keys, h Hold, ttl time.Duration, g Guard) Call {
	ga := g.args()
	args := make([]any, 0, 9+len(ga))
	args = append(args, permitAcquireSha[0], permitAcquireSha[1], "3", k.Lock, k.Fence, g.epochArg(k.Epoch), strconv.Itoa(h.Permits), h.ID, ttl.Milliseconds())
	return Call{args: append(args, ga...), s: &permitAcquire, mode: len(args) + 2}
}

// PermitReleaseCall prepares the semaphore's release script
// (permitrelease.lua) for a permit (see Release).
func PermitReleaseCall(key string, h Hold, rt Retire, channel string, sharded bool) Call {
	var flag any = "0" // boxed from constants: no allocation
	if sharded {
		flag = "1"
	}
	return Call{args: []any{permitReleaseSha[0], permitReleaseSha[1], "2", key, rt.Fence, h.ID, channel, flag, rt.Token, rt.Guard.fenceTTL()}, s: &permitRelease}
}

// FamilyAcquireCall prepares the family's acquire script for a hold.
func FamilyAcquireCall(k Keys, h Hold, ttl time.Duration, g Guard) Call {
	ga := g.args()
	args := make([]any, 0, 11+len(ga))
	args = append(args, familyAcquireSha[0], familyAcquireSha[1], "3", k.Lock, k.Fence, g.epochArg(k.Epoch), h.mode(), h.Owner, h.ID, ttl.Milliseconds())
	mode := len(args) + 2
	args = append(args, ga...)
	return Call{args: append(args, h.Wait), s: &familyAcquire, mode: mode}
}

// Acquire runs the acquire script on one node, followed in the same
// pipeline by WAIT when ack asks for replicas.
func Acquire(ctx context.Context, n driver.Node, k Keys, value string, ttl time.Duration, g Guard, ack Ack) (Acquired, error) {
	return AcquireCall(k, NewLockArgs(k.Lock, value), ttl, g).Acquire(ctx, n, ack)
}

// Acquire runs a prepared acquire on one node, followed in the same
// pipeline by WAIT when ack asks for replicas.
func (call Call) Acquire(ctx context.Context, n driver.Node, ack Ack) (Acquired, error) {
	if ack.Replicas == 0 {
		v, err := run(ctx, n, call.s, call.args)
		if err != nil {
			return Acquired{}, err
		}
		return decodeAcquire(v)
	}
	replies, err := call.pipe(ctx, n, ack, nil, nil)
	if err != nil {
		return Acquired{}, err
	}
	return decodeAcked(replies, ack)
}

// AcquireIdentified runs a prepared acquire on one node as Acquire does,
// and after it, in the same pipeline, id.lua (Identify) with key. A
// pipeline on a node that is neither Sharded nor Spread runs on one
// connection, in order (driver.Node.Pipe), so id is the identity of the
// server that ran the acquire: the first acquire on a node reads its
// identity without a round of its own (docs/reconfiguration.md, "A
// node's identity"). err is the pipeline's, or the acquire's; idErr is
// the identity's own (an error reply: an ACL that refuses the script),
// when the pipeline answered.
func (call Call) AcquireIdentified(ctx context.Context, n driver.Node, ack Ack, key string) (a Acquired, id Identity, idErr, err error) {
	tail := identifyCall(key)
	replies, err := call.pipe(ctx, n, ack, nil, tail)
	if err != nil {
		return Acquired{}, Identity{}, nil, err
	}
	id, idErr = identified(ctx, n, replies[len(replies)-1], tail)
	a, err = decodeAcked(replies[:len(replies)-1], ack)
	return a, id, idErr, err
}

// AcquireRecorded runs a prepared acquire on one node as
// AcquireIdentified does, with rec, a record call (RecordCall), before it
// in the same pipeline: the first record of a Client folded into its
// first acquire (docs/reconfiguration.md, "The first obtain"). The record
// runs before the acquire, on the same connection, so a vote the acquire
// gives comes after the record reached the node. recErr is the record's
// own failure (an error reply), when the pipeline answered; a recovering
// node's records say so (Records.Recovering).
func (call Call) AcquireRecorded(ctx context.Context, n driver.Node, ack Ack, rec RecordCall, key string) (a Acquired, recs Records, recErr error, id Identity, idErr, err error) {
	tail := identifyCall(key)
	replies, err := call.pipe(ctx, n, ack, &rec.c, tail)
	if err != nil {
		return Acquired{}, Records{}, nil, Identity{}, nil, err
	}
	if recErr = replies[0].Err; recErr == nil {
		recs, recErr = decodeRecords(replies[0].Val)
	}
	id, idErr = identified(ctx, n, replies[len(replies)-1], tail)
	a, err = decodeAcked(replies[1:len(replies)-1], ack)
	return a, recs, recErr, id, idErr, err
}

// identified decodes the reply of id.lua, sent as tail (alone, or at the
// end of a pipeline). Redis refuses a function that may write as a
// whole, before it runs, on a read-only replica (READONLY), under
// maxmemory (OOM), with fewer replicas than min-replicas-to-write
// (NOREPLICAS) and after a failed save that stops writes (MISCONF),
// where id.lua as a script reads an identity that exists without
// writing: the read is then made again alone, by EVAL of its source
// (refusedBeforeRun). In a pipeline, the acquire before it is a function
// that the same check refused (unless the node's memory crossed
// maxmemory between the two, where the vote has the identity read right
// after it), so no vote came with it; the read identifies the node, and
// a replica given beside its master is refused
// (TestAcquireIdentifiedOnAReplica).
func identified(ctx context.Context, n driver.Node, r driver.Reply, tail *fnCall) (Identity, error) {
	if refusedBeforeRun(r.Err) {
		v, err := n.Do(ctx, tail.eval...)
		r = driver.Reply{Val: v, Err: err}
	}
	if r.Err != nil {
		return Identity{}, r.Err
	}
	return decodeIdentity(r.Val)
}

// refusedBeforeRun reports whether err is Redis's refusal of a function
// that may write, made before it runs (identified).
func refusedBeforeRun(err error) bool {
	for _, p := range []string{"READONLY", "OOM", "NOREPLICAS", "MISCONF"} {
		if reply.HasPrefix(err, p) {
			return true
		}
	}
	return false
}

// pipe sends call in one pipeline with head, if any, before it and, after
// it, WAIT when ack asks for replicas and then tail, if any; the call's
// reply is replies[0], or replies[1] after a head. WAIT comes right after
// the script, on the same connection: it counts the replicas that
// acknowledged the script's writes. A missing library or a NOSCRIPT of
// the call sends the whole pipeline again, which head and tail must bear
// (id.lua reads what it wrote, record.lua keeps the same fields alive).
// Head and tail are functions of the library, as the call is, so that all
// run or none does; where the node cannot run functions they are sent by
// EVAL of their source.
func (call Call) pipe(ctx context.Context, n driver.Node, ack Ack, head, tail *fnCall) ([]driver.Reply, error) {
	cmds := make([][]any, 0, 4)
	at := 0
	if head != nil {
		cmds, at = append(cmds, head.fn), 1
	}
	cmds = append(cmds, call.args)
	if ack.Replicas > 0 {
		cmds = append(cmds, []any{"WAIT", ack.Replicas, ack.Timeout.Milliseconds()})
	}
	if tail != nil {
		cmds = append(cmds, tail.fn)
	}
	if call.args[0] == "fcall" {
		replies, err, ok := fpipe(ctx, n, cmds, at)
		if ok {
			return replies, err
		}
	}
	if cmds[at][0] == "fcall" {
		cmds[at] = withHead(call.args, call.s.boxed())
	}
	if head != nil {
		cmds[0] = head.eval
	}
	if tail != nil {
		cmds[len(cmds)-1] = tail.eval
	}
	replies, err := n.Pipe(ctx, cmds)
	if err == nil && reply.HasPrefix(replies[at].Err, "NOSCRIPT") {
		cmds[at] = withHead(cmds[at], [2]any{"eval", call.s.src})
		replies, err = n.Pipe(ctx, cmds)
	}
	return replies, err
}

// decodeAcked decodes an acquire's replies: the script's, then WAIT's
// when ack asked for replicas.
func decodeAcked(replies []driver.Reply, ack Ack) (Acquired, error) {
	if replies[0].Err != nil {
		return Acquired{}, replies[0].Err
	}
	a, err := decodeAcquire(replies[0].Val)
	if err != nil || a.Status != Taken || ack.Replicas == 0 {
		return a, err
	}
	acked, err := reply.Int64(replies[1].Val, replies[1].Err)
	if err != nil {
		return a, err
	}
	a.Unreplicated = acked < int64(ack.Replicas)
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

// Fence raises a lock's fencing counter on one node to at least token,
// where the node is g's (Guard.Node).
func Fence(ctx context.Context, n driver.Node, k Keys, token int64, g Guard) error {
	_, err := run(ctx, n, &fence, []any{fenceSha[0], fenceSha[1], "2", k.Fence, k.Epoch, token, g.FenceTTL.Milliseconds(), g.args()[2]})
	return err
}

// Seal raises a lock's fencing counter on one node to at least token, as
// Fence (where the node is g's), and records token as the owner's where owner holds the lock of the
// family exclusively.
func Seal(ctx context.Context, n driver.Node, k Keys, token int64, owner string, g Guard) error {
	_, err := seal.call([]string{k.Fence, k.Lock, k.Epoch}, token, g.FenceTTL.Milliseconds(), owner, g.args()[2]).Run(ctx, n)
	return err
}

// Withdraw deletes an exclusive hold's writer mark (the key mark) on one
// node when it is still the mark of wait (Hold.Wait), and reports whether
// it did.
func Withdraw(ctx context.Context, n driver.Node, mark, wait string) (bool, error) {
	deleted, err := reply.Int64(withdraw.call([]string{mark}, wait).Run(ctx, n))
	return deleted == 1, err
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
// when publish is set and the key is free afterwards, and retiring the
// lock's token (rt). The clean-up of a failed attempt must not publish: it
// must not wake waiters, since the lock may well be held on the other
// nodes (and their failed attempts' clean-ups would wake others in turn).
func Release(ctx context.Context, n driver.Node, key, value string, rt Retire, publish, sharded bool) (Released, error) {
	return ReleaseCall(NewLockArgs(key, value), rt, publish, sharded).Release(ctx, n)
}

// ReleaseCall prepares the release script (see Release).
func ReleaseCall(a LockArgs, rt Retire, publish, sharded bool) Call {
	// The flag boxed from constants, which costs no allocation (a string
	// variable would be boxed on every call).
	var flag any = ""
	switch {
	case publish && sharded:
		flag = "1"
	case publish:
		flag = "0"
	}
	return Call{args: []any{releaseSha[0], releaseSha[1], "2", a.key, rt.Fence, a.value, flag, rt.Token, rt.Guard.fenceTTL()}, s: &release}
}

// FamilyReleaseCall prepares the family's release script for a hold (see
// Release).
func FamilyReleaseCall(key string, h Hold, rt Retire, channel string, sharded bool) Call {
	var flag any = "0" // boxed from constants: no allocation
	if sharded {
		flag = "1"
	}
	return Call{args: []any{familyReleaseSha[0], familyReleaseSha[1], "2", key, rt.Fence, h.mode(), h.Owner, h.ID, channel, flag, rt.Token, rt.Guard.fenceTTL()}, s: &familyRelease}
}

// Release runs a prepared release on one node.
func (call Call) Release(ctx context.Context, node driver.Node) (Released, error) {
	n, err := reply.Int64(run(ctx, node, call.s, call.args))
	if err != nil {
		return Released{}, err
	}
	if n < 0 {
		return Released{}, fmt.Errorf("redlock: unexpected release reply %d", n)
	}
	return Released{Deleted: n&1 == 1, Receivers: n >> 1}, nil
}

// ms encodes a duration as whole milliseconds for PX and PEXPIRE.
func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
