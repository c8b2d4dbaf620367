// Package model is a model checker of the lock protocol: the Lua scripts of
// internal/script as pure Go functions on simulated Redis nodes (node.go),
// clients that follow client.go's rounds (system.go), and an explorer that
// searches the orders of messages, pauses, expiries, restarts and
// failovers for a violation of the safety properties (explore.go).
//
// Mutations switch the model back to earlier, broken versions of the
// protocol; the tests show that the explorer finds each of them and nothing
// in the current one. TestModelMatchesScripts checks the node model against
// the real scripts on a real redis-server. See docs/fencing.md, "Checked by
// the model checker".
package model

// Mutations switch parts of the protocol back to earlier, broken versions.
// The zero value is the protocol as implemented. Each switch is a field of
// one of the embedded groups below, promoted: m.NoSecondRound reads
// m.GuardMutations.NoSecondRound.
type Mutations struct {
	GuardMutations
	FamilyMutations
	JointMutations
	PermitMutations
	HandoffMutations
	RetireMutations
}

// GuardMutations are the mutants of the guard and the tokens (docs/fencing.md).
type GuardMutations struct {
	// FenceCountsAnyNode counts a second-round confirmation from any node,
	// not only from a first-round yes-voter (review finding 1).
	FenceCountsAnyNode bool
	// TrustWithoutLowerBound trusts the identity cache while now <
	// check+delta, without check <= now (review finding 2).
	TrustWithoutLowerBound bool
	// PersistenceWaivesPromotion lets a 'p' client skip the recovery after
	// any change of run id, promotions included (review finding 3).
	PersistenceWaivesPromotion bool
	// PerRequestMaxTTL is the old record: the recovery ends at the epoch
	// start plus the max TTL of the request that started it, and a 'p'
	// client's check rewrites the record without a recovery, which a '1'
	// client then trusts (review finding 4).
	PerRequestMaxTTL bool
	// NoSecondRound hands out the highest vote without raising counters.
	NoSecondRound bool
	// NoClockSeed continues a missing or below-floor counter from its old
	// value (or 0) instead of starting it at the node's time x 1024 or
	// raising it to the epoch's floor.
	NoClockSeed bool
	// NoRecoveryWindow lets a node vote right after a change of epoch.
	NoRecoveryWindow bool
	// PromotionFromProcessStart starts a promoted replica's epoch at its
	// process start, as a restart's (issue 48, K1), not at the promotion:
	// its process started long before it was promoted.
	PromotionFromProcessStart bool
	// OkKeyReplicated replicates the guard's fast-path key like any other
	// key (no redis.set_repl(REPL_NONE)): a promoted replica whose clock is
	// behind its old master's then trusts the copy without any check.
	OkKeyReplicated bool
	// RaiseUnseeded: fence.lua and seal.lua set a missing counter to the
	// token, without seeding it from the node's time first: a raise
	// delayed past the counter's expiry writes an old token into it.
	RaiseUnseeded bool
}

// FamilyMutations are the mutants of the lock family (docs/lock-family.md).
type FamilyMutations struct {
	// Rule1AnyExisted: the client's rule 1 takes the recorded token of any
	// yes-vote that found the owner's lock (the largest), without a quorum
	// of them agreeing on it.
	Rule1AnyExisted bool
	// Rule2ExistedCounter: rule 2 counts a vote that found the owner's
	// lock as its counter, not one more than it.
	Rule2ExistedCounter bool
	// Rule2RecordedToken: rule 2 counts a vote that found the owner's
	// lock as one more than its recorded token, not one more than its
	// counter (a reviewer's variant).
	Rule2RecordedToken bool
	// ReentryRawCounter: family.lua's re-entry reports the counter as it
	// is, 0 when missing, without the seed or the floor (issue 24's
	// finding 1).
	ReentryRawCounter bool
	// DecideAtQuorum: the first round of a write hold of the family
	// decides at the first quorum of yes-votes, without family.enough's wait
	// for a quorum that agrees on the recorded token. Not a bug: a
	// re-entry then opens new tenures more often. The explorer runs with
	// it to compare (TestEnoughWait).
	DecideAtQuorum bool
	// SealOverwrites: seal.lua records the token as the owner's t even
	// when t is higher.
	SealOverwrites bool
	// SealRecordsUnrecorded: seal.lua records the token as the owner's t
	// where t is absent too (a hash re-seeded by a refresh), the rule
	// before the stale-seal counterexample (family_bug_test.go).
	SealRecordsUnrecorded bool
	// SealCountsAnyNode counts a seal's confirmation from any node, not
	// only from a first-round yes-voter (finding 1 for the family).
	SealCountsAnyNode bool
	// ReaderJoinsWriter: family.lua lets a reader join a hash in mode 'w'
	// (and ignore a waiting writer).
	ReaderJoinsWriter bool
	// ReseedRecordsToken: familyrefresh.lua records the hold's token as
	// the owner's t when it re-seeds.
	ReseedRecordsToken bool
}

// JointMutations are the mutants of the joint configuration (docs/reconfiguration.md).
type JointMutations struct {
	// JointDropA and JointDropB: a joint client's rule leaves out the
	// quorum of the current set (A) or of the next (B).
	JointDropA, JointDropB bool
	// NoMoveFloor: a client on B alone takes its token from the votes
	// alone, without the move floor.
	NoMoveFloor bool
	// SkipStep2: a client on B alone starts without step 2 of the
	// runbook (every client on A alone done, and redlock doctor's "step
	// 3 is safe", joint.StepOf): the operator's mistake, not the
	// library's.
	SkipStep2 bool
	// FirstWriterFloor: the move floor before issue 33 (joint.Mut): a
	// joint client writes it once, first writer wins, at a round that
	// sees no client on A alone; a client on B alone writes one the same
	// way when none is there; doctor's step 3 asks for no floor.
	FirstWriterFloor bool
	// JointNoFloor and JointNoConflict: issue 44's findings C and D
	// (joint.Mut): a joint client takes no move floor, or never
	// refuses.
	JointNoFloor, JointNoConflict bool
	// BySpelling: issue 44's finding E, sets named by the spelling of
	// their addresses (identity.go), and the records read by the names the
	// reader knows only (joint.Mut.KnownNamesOnly).
	BySpelling bool
	// VoteByAddress: issue 44's identity check off (before 9619747): a
	// node votes whatever identity the client learned for the address it
	// used, so an address re-pointed after the first contact casts another
	// node's vote (identity.go).
	VoteByAddress bool
	// FoldNoConflict and FoldNoFloor: a folded first record
	// (Config.FoldRecords) whose conflict does not give the round back,
	// or whose move floor is not taken.
	FoldNoConflict, FoldNoFloor bool
}

// PermitMutations are the mutants of the semaphore (docs/safety.md, "Semaphores").
type PermitMutations struct {
	// PermitMajority: a permit needs a majority of the nodes, not
	// PermitQuorum.
	PermitMajority bool
	// PermitCapacityOffByOne: permit.lua admits a permit while k are live
	// (holds <= k instead of holds < k).
	PermitCapacityOffByOne bool
	// PermitPruneEarly: the permit scripts take a permit for expired one
	// tick before its expiry (a comparison >= instead of >, or a clock
	// read that runs ahead of the one the expiry was written with).
	PermitPruneEarly bool
	// PermitReseedIgnoresCapacity: permitrefresh.lua re-seeds a permit the
	// node lost even when all k of its permits are taken.
	PermitReseedIgnoresCapacity bool
}

// RetireMutations are the scripts before issue 44 (finding G): the
// re-seed of a lock whose token was retired, and of a hold without the
// guard. They cost liveness only (a released lock re-created for its TTL),
// which the explorer does not check: the differential tests against the
// real scripts tell them apart (TestTwinMutantsDisagree).
type RetireMutations struct {
	// ReseedIgnoresToken: the refreshes re-seed whatever the counter.
	ReseedIgnoresToken bool
	// ReleaseKeepsCounter: the releases leave the counter as it is.
	ReleaseKeepsCounter bool
	// HoldReseedUnguarded: familyrefresh.lua re-seeds a hold missing from
	// a hash that exists without the guard (the token's check kept).
	HoldReseedUnguarded bool
}

// Epoch kinds, as in epoch.lua's record field kind.
const (
	KindNew      = 'n'
	KindRestart  = 'r'
	KindFailover = 'f'
)

// Record is a node's epoch record (epoch.lua): the fields run, base,
// maxttl, kind, check and until.
type Record struct {
	OK     bool // the record exists
	Run    int
	Base   int64
	MaxTTL int64
	Kind   byte
	Check  int64
	Until  int64
	// Changed is model-only: the epoch began from another process's
	// record (used by the PersistenceWaivesPromotion mutant).
	Changed bool
}

// Key is the lock key: its owner's value (0: missing) and its expiry.
type Key struct {
	Owner int
	Exp   int64 // node time; the key exists while now <= Exp
}

// Counter is a lock's fencing counter (a string, counter.lua).
type Counter struct {
	OK  bool
	V   int64
	Exp int64
}

// OkKey is the guard's fast-path key <record>:ok, "maxttl:floor", written
// without replication and AOF.
type OkKey struct {
	OK     bool
	MaxTTL int64
	Floor  int64
	Exp    int64
}

// Mark is the key <lock>:waiters that a refused acquire leaves (release
// publishes only when it is there). It never affects a vote or a token.
type Mark struct {
	OK  bool
	Exp int64
}

// Data is what a node stores: one lock's key (a plain lock's string, or
// the family's hash: never both), counter and waiters mark, the family's
// waiting-writer mark, the epoch record and its fast-path key; and the
// keys beside them that a restart, a snapshot and a replica carry with the
// rest of the data set: the node's identity, its configuration records and
// the handoff claims' tombstones.
type Data struct {
	Lock    Key
	Fam     Family
	Fence   Counter
	Waiters Mark
	WWait   Mark // <lock>:wwait (family.lua)
	Rec     Record
	Ok      OkKey
	ID      int         // {PREFIX}:id (id.lua, Identify); 0: none yet
	Conf    *ConfFields // {PREFIX}:configs (record.lua, recordTwin); nil: none
	Tombs   Tombs       // <lock>:claimed:<secret> (resume.lua, Claim)
}

// Env is what a script reads from the server besides the keys: TIME and
// INFO.
type Env struct {
	Now     int64 // node time (TIME)
	Run     int   // run_id
	Uptime  int64 // uptime_in_seconds
	Second  int64 // node time units per second (for uptime)
	Replica bool  // master_replid2 set: was a replica since it started
	// KeyTime, when set, is the time at which keys expire during the
	// script: Redis fixes it when the script starts, while TIME, PTTL and
	// the expiries that SET PX and PEXPIRE write read the clock when they
	// run, possibly a later millisecond. 0: Now.
	KeyTime int64
}

func (e Env) keyTime() int64 {
	if e.KeyTime != 0 {
		return e.KeyTime
	}
	return e.Now
}

// Guard is the guard part of a request (ARGV[3..7]).
type Guard struct {
	MaxTTL   int64
	Delta    int64
	Mode     byte // '1', 'p' or '0'
	FenceTTL int64
}

// Acquire statuses, as in acquire.lua.
const (
	Held       = 0
	Taken      = 1
	Recovering = 2
)

// Refresh results, as in refresh.lua.
const (
	NotOwner    = 0
	Extended    = 1
	Reseeded    = 2
	NotReseeded = 3
	// Retired: the key (hold) was missing, and the node's counter is
	// above the lock's token: not re-seeded.
	Retired = 4
)

// refreshName says what a refresh result is, for the explanations.
var refreshName = []string{"not owner", "extended", "re-seeded", "recovering, not re-seeded", "token retired, not re-seeded"}

// refreshSays is refreshName's entry for r, and ScriptError's (a refresh
// of a lock of another kind: WRONGTYPE), which has none.
func refreshSays(r int) string {
	if r == ScriptError {
		return "an error, the name holds another kind"
	}
	return refreshName[r]
}

// TokenSeed is the factor of the node time in a seeded counter and in the
// epoch's floor.
const TokenSeed = 1024

// expire drops the keys whose expiry has passed (Redis: now > when).
func (d *Data) expire(env Env) {
	now := env.keyTime()
	if d.Lock.Owner != 0 && now > d.Lock.Exp {
		d.Lock = Key{}
	}
	if d.Fence.OK && now > d.Fence.Exp {
		d.Fence = Counter{}
	}
	if d.Waiters.OK && now > d.Waiters.Exp {
		d.Waiters = Mark{}
	}
	if d.Fam.OK && now > d.Fam.Exp {
		d.Fam = Family{}
	}
	if d.WWait.OK && now > d.WWait.Exp {
		d.WWait = Mark{}
	}
	if d.Ok.OK && now > d.Ok.Exp {
		d.Ok = OkKey{}
	}
}

// Epoch is epoch.lua: it returns the time left to recover (0 when the
// node may vote for this request) and the floor of the lock's fencing
// counter.
func (d *Data) Epoch(env Env, g Guard, m Mutations) (recovering, floor int64) {
	if g.Mode == '0' {
		return 0, 0
	}
	if m.PerRequestMaxTTL {
		return d.oldEpoch(env, g, m)
	}
	// The fast path: GET <record>:ok.
	if d.Ok.OK && d.Ok.MaxTTL >= g.MaxTTL {
		return 0, d.Ok.Floor
	}
	now := env.Now
	r := d.Rec
	trusted := r.OK && now < r.Check+g.Delta && (m.TrustWithoutLowerBound || r.Check <= now) && g.MaxTTL <= r.MaxTTL
	if !trusted {
		// renew
		if !(r.OK && r.Run == env.Run) {
			// The latest possible process start, from the whole-second
			// uptime.
			start := now - max(env.Uptime-1, 0)*env.Second
			switch {
			case env.Replica && m.PromotionFromProcessStart:
				r.Kind, r.Base = KindFailover, start
			case env.Replica:
				r.Kind, r.Base = KindFailover, now
			case !r.OK:
				r.Kind, r.Base = KindNew, start
			default: // another process wrote the record: a restart
				r.Kind, r.Base = KindRestart, max(start, r.Until-g.MaxTTL)
			}
			r.Changed = r.OK
			r.MaxTTL = 0
		}
		r.MaxTTL = max(r.MaxTTL, g.MaxTTL)
		r.OK, r.Run, r.Check, r.Until = true, env.Run, now, r.Base+r.MaxTTL
		d.Rec = r
	}
	// trust: the fast path's key for the rest of the check's trust, or
	// none while the node recovers.
	if now >= r.Until {
		d.Ok = OkKey{OK: true, MaxTTL: r.MaxTTL, Floor: r.Until * TokenSeed, Exp: r.Check + g.Delta}
	} else {
		d.Ok = OkKey{}
	}
	if g.Mode == 'p' && (r.Kind == KindRestart || (m.PersistenceWaivesPromotion && r.Changed)) {
		return 0, (r.Until - r.MaxTTL) * TokenSeed
	}
	if m.NoRecoveryWindow {
		return 0, r.Until * TokenSeed
	}
	return max(r.Until-now, 0), r.Until * TokenSeed
}

// oldEpoch is the record before review finding 4 (and before the fast
// path): the recovery ends at the epoch start plus the max TTL of the
// request that saw the change, and a 'p' request that sees a change keeps
// the old end (no recovery).
func (d *Data) oldEpoch(env Env, g Guard, m Mutations) (int64, int64) {
	now := env.Now
	r := d.Rec
	trusted := r.OK && now < r.Check+g.Delta && (m.TrustWithoutLowerBound || r.Check <= now)
	if !trusted {
		switch {
		case !r.OK:
			if env.Replica {
				r.Kind, r.Base = KindFailover, now
			} else {
				r.Kind, r.Base = KindNew, now-max(env.Uptime-1, 0)*env.Second
			}
			r.Until = r.Base + g.MaxTTL
		case r.Run != env.Run:
			r.Kind = KindRestart
			if env.Replica {
				r.Kind = KindFailover
			}
			if g.Mode != 'p' {
				r.Until = now + g.MaxTTL
			}
			r.Base, r.Changed = now, true
		}
		r.OK, r.Run, r.Check = true, env.Run, now
		r.MaxTTL = r.Until - r.Base
		d.Rec = r
	}
	if m.NoRecoveryWindow {
		return 0, r.Until * TokenSeed
	}
	return max(r.Until-now, 0), r.Until * TokenSeed
}

// Acquire is acquire.lua: it returns the status and the token (Taken),
// the holder's remaining TTL (Held, -1 without expiry) or the time left to
// recover (Recovering).
func (d *Data) Acquire(env Env, value int, ttl int64, g Guard, m Mutations) (status int, n int64) {
	d.expire(env)
	rec, floor := d.Epoch(env, g, m)
	if rec > 0 {
		return Recovering, rec
	}
	kt := env.Now
	if d.Fam.OK {
		return KindError, 0 // REDLOCK_KIND: the family holds the name
	}
	if d.Lock.Owner == 0 {
		d.Lock = Key{Owner: value, Exp: kt + ttl}
		return Taken, d.issue(env, floor, g, m)
	}
	if d.Lock.Owner == value {
		return Taken, d.current(env, floor, g, m)
	}
	d.Waiters = Mark{OK: true, Exp: kt + g.FenceTTL}
	return Held, d.Lock.Exp - kt
}

// CounterRead is the lock's fencing counter as the scripts read it at node
// time now, without the epoch's floor: its value while the key is there,
// its seed when it is missing or expired (token.lua's seen with floor 0).
// Property (f) says it never decreases, but by data loss. second is the
// node time of a second (Env.Second).
func (d *Data) CounterRead(now, second int64) int64 {
	if d.Fence.OK && now <= d.Fence.Exp {
		return d.Fence.V
	}
	return counterSeed(now, second)
}

// counterSeed is token.lua's seed(): a missing counter's first value at node
// time now, the time rounded down to the second (second: Env.Second) x
// TokenSeed. Nodes whose clocks agree within a second seed alike, so that
// a new lock's first votes agree.
func counterSeed(now, second int64) int64 {
	return floorDiv(now, max(second, 1)) * max(second, 1) * TokenSeed
}

// seen is token.lua's seen(): the counter as a token's issue sees it
// (missing: its seed, never below floor; below floor: floor), and whether
// that differs from the key. With the NoClockSeed mutant, the old value
// (0 when missing) as it is.
func (d *Data) seen(env Env, floor int64, m Mutations) (int64, bool) {
	switch {
	case m.NoClockSeed:
		return d.Fence.V, false
	case !d.Fence.OK:
		return max(counterSeed(env.Now, env.Second), floor), true
	case d.Fence.V < floor:
		return floor, true
	}
	return d.Fence.V, false
}

// issue is token.lua's issue(): one more than seen(), written with the
// counter's expiry.
func (d *Data) issue(env Env, floor int64, g Guard, m Mutations) int64 {
	v, _ := d.seen(env, floor, m)
	v++
	d.Fence = Counter{OK: true, V: v, Exp: env.Now + g.FenceTTL}
	return v
}

// current is token.lua's current(): seen(), written only when it differs
// from the key, for a vote that issues nothing (a re-entry, a retried
// request).
func (d *Data) current(env Env, floor int64, g Guard, m Mutations) int64 {
	v, changed := d.seen(env, floor, m)
	if changed {
		d.Fence = Counter{OK: true, V: v, Exp: env.Now + g.FenceTTL}
	}
	return v
}

// Raise is fence.lua (token.lua's raise): it raises the counter to at
// least token, seeding a missing counter from the node's time first, and
// sets its expiry only when it writes. With the RaiseUnseeded mutant, a
// missing counter is set to token.
func (d *Data) Raise(env Env, token int64, g Guard, m Mutations) {
	d.expire(env)
	v := d.Fence.V
	switch {
	case !d.Fence.OK && m.RaiseUnseeded:
		v = token
	case !d.Fence.OK:
		v = max(counterSeed(env.Now, env.Second), token)
	case v < token:
		v = token
	default:
		return
	}
	d.Fence = Counter{OK: true, V: v, Exp: env.Now + g.FenceTTL}
}

// retired is the re-seed's check (refresh.lua, familyrefresh.lua,
// permitrefresh.lua): the counter, as it is, is above the lock's token
// (docs/safety.md, "Why the re-seed is safe").
func (d *Data) retired(token int64, m Mutations) bool {
	return !m.ReseedIgnoresToken && d.Fence.OK && d.Fence.V > token
}

// retire is retire.lua, a release's (release.lua, familyrelease.lua,
// permitrelease.lua): the counter above the lock's token. INCR (its expiry
// kept) when that passes the token; else token+1, or, onto a missing
// counter (which INCR makes 1), the larger of that and its seed, with the
// counter's expiry. A token of 0 retires nothing.
func (d *Data) retire(env Env, token int64, g Guard, m Mutations) {
	if token <= 0 || m.ReleaseKeepsCounter {
		return
	}
	v := int64(1)
	if d.Fence.OK {
		v = d.Fence.V + 1
	}
	if v > token && v != 1 {
		d.Fence.V = v
		return
	}
	to := token + 1
	if v == 1 {
		to = max(counterSeed(env.Now, env.Second), to)
	}
	d.Fence = Counter{OK: true, V: to, Exp: env.Now + g.FenceTTL}
}

// Refresh is refresh.lua for the lock of value and fencing token token
// (ScriptError: WRONGTYPE on the family's hash).
func (d *Data) Refresh(env Env, value int, ttl, token int64, g Guard, m Mutations) int {
	d.expire(env)
	kt := env.Now
	if d.Fam.OK {
		return ScriptError
	}
	switch d.Lock.Owner {
	case value:
		if d.Lock.Exp-kt < ttl {
			d.Lock.Exp = kt + ttl
		}
		return Extended
	case 0:
		if d.retired(token, m) {
			return Retired
		}
		if rec, _ := d.Epoch(env, g, m); rec > 0 {
			return NotReseeded
		}
		d.Lock = Key{Owner: value, Exp: kt + ttl}
		return Reseeded
	}
	return NotOwner
}

// Release is release.lua for the lock of value and fencing token token:
// it reports whether the key held value and was deleted, and whether it
// publishes (a channel was given, the key is free now and the waiters mark
// was there, which it takes away). Where the key was ours or gone, it
// retires the token.
func (d *Data) Release(env Env, value int, token int64, channel bool, g Guard, m Mutations) (deleted, published bool) {
	d.expire(env)
	if d.Fam.OK {
		return false, false // WRONGTYPE: the family's hash
	}
	if d.Lock.Owner != 0 && d.Lock.Owner != value {
		return false, false
	}
	deleted = d.Lock.Owner != 0
	d.Lock = Key{}
	d.retire(env, token, g, m)
	if !channel {
		return deleted, false
	}
	published = d.Waiters.OK
	d.Waiters = Mark{}
	return deleted, published
}
