// Package model is a model checker of the lock protocol: the Lua scripts of
// internal/script as pure Go functions on simulated Redis nodes (node.go),
// clients that follow client.go's rounds (system.go), and an explorer that
// searches the orders of messages, pauses, expiries, restarts and
// failovers for a violation of the safety properties (explore.go).
//
// Mutations switch the model back to earlier, broken versions of the
// protocol; the tests show that the explorer finds each of them and nothing
// in the current one. See docs/fencing.md, "Checked by the model checker".
package model

import "fmt"

// Mutations switch parts of the protocol back to earlier, broken versions.
// The zero value is the protocol as implemented.
type Mutations struct {
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
	// NoClockSeed continues a missing or older-epoch counter from its old
	// value (or 0) instead of raising it to the node's time x 1024.
	NoClockSeed bool
	// NoRecoveryWindow lets a node vote right after a change of epoch.
	NoRecoveryWindow bool
}

// Epoch kinds, as in epoch.lua's record field kind.
const (
	KindNew      = 'n'
	KindRestart  = 'r'
	KindFailover = 'f'
)

// EpochID is an epoch's id: the run id and node time that started it
// ("run_id:now" in epoch.lua). Run -1 is the id 'off' of guard '0'.
type EpochID struct {
	Run int
	At  int64
}

// Off is the epoch id of a request with the guard off.
var Off = EpochID{Run: -1}

func (e EpochID) String() string {
	if e == Off {
		return "off"
	}
	return fmt.Sprintf("r%d:%d", e.Run, e.At)
}

// Record is a node's epoch record (epoch.lua).
type Record struct {
	OK     bool // the record exists
	ID     EpochID
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

// Counter is a lock's fencing counter hash {v, e}.
type Counter struct {
	OK  bool
	V   int64
	E   EpochID
	Exp int64
}

// Data is what a node stores: one lock's key and counter, and the record.
type Data struct {
	Lock  Key
	Fence Counter
	Rec   Record
}

// Env is what a script reads from the server besides the keys: TIME and
// INFO.
type Env struct {
	Now     int64 // node time (TIME)
	Run     int   // run_id
	Uptime  int64 // uptime_in_seconds
	Second  int64 // node time units per second (for uptime)
	Replica bool  // master_replid2 set: was a replica since it started
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
)

// TokenSeed is the factor of the node time in a seeded counter.
const TokenSeed = 1024

// expire drops the keys whose expiry has passed (Redis: now > when).
func (d *Data) expire(now int64) {
	if d.Lock.Owner != 0 && now > d.Lock.Exp {
		d.Lock = Key{}
	}
	if d.Fence.OK && now > d.Fence.Exp {
		d.Fence = Counter{}
	}
}

// Epoch is epoch.lua: it returns the time left to recover (0 when the
// node may vote for this request) and the current epoch's id.
func (d *Data) Epoch(env Env, g Guard, m Mutations) (recovering int64, id EpochID) {
	now := env.Now
	if g.Mode == '0' {
		return 0, Off
	}
	r := d.Rec
	write := false
	trusted := r.OK && now < r.Check+g.Delta && (m.TrustWithoutLowerBound || r.Check <= now)
	if m.PerRequestMaxTTL {
		return d.oldEpoch(env, g, m, trusted)
	}
	if !trusted {
		if !(r.OK && r.Run == env.Run) {
			switch {
			case !r.OK:
				if env.Replica {
					r.Kind, r.Base = KindFailover, now
				} else {
					r.Kind, r.Base = KindNew, now-max(env.Uptime-1, 0)*env.Second
				}
				r.ID, r.Changed = EpochID{env.Run, now}, false
			default: // another process wrote the record
				r.Kind = KindRestart
				if env.Replica {
					r.Kind = KindFailover
				}
				r.Base, r.ID, r.Changed = now, EpochID{env.Run, now}, true
			}
			r.MaxTTL = 0
		}
		r.OK, r.Run, r.Check, write = true, env.Run, now, true
	}
	if g.MaxTTL > r.MaxTTL {
		r.MaxTTL, write = g.MaxTTL, true
	}
	if write {
		r.Until = r.Base + r.MaxTTL
		d.Rec = r
	}
	if g.Mode == 'p' && (r.Kind == KindRestart || (m.PersistenceWaivesPromotion && r.Changed)) {
		return 0, r.ID
	}
	if m.NoRecoveryWindow {
		return 0, r.ID
	}
	return max(r.Base+r.MaxTTL-now, 0), r.ID
}

// oldEpoch is the record before review finding 4: the recovery ends at
// the epoch start plus the max TTL of the request that saw the change, and
// a 'p' request that sees a change keeps the old end (no recovery).
func (d *Data) oldEpoch(env Env, g Guard, m Mutations, trusted bool) (int64, EpochID) {
	now := env.Now
	r := d.Rec
	if !trusted {
		switch {
		case !r.OK:
			if env.Replica {
				r.Kind, r.Base = KindFailover, now
			} else {
				r.Kind, r.Base = KindNew, now-max(env.Uptime-1, 0)*env.Second
			}
			r.Until = r.Base + g.MaxTTL
			r.ID = EpochID{env.Run, now}
		case r.Run != env.Run:
			r.Kind = KindRestart
			if env.Replica {
				r.Kind = KindFailover
			}
			if g.Mode != 'p' {
				r.Until = now + g.MaxTTL
			}
			r.Base, r.ID, r.Changed = now, EpochID{env.Run, now}, true
		}
		r.OK, r.Run, r.Check = true, env.Run, now
		r.MaxTTL = r.Until - r.Base
		d.Rec = r
	}
	if m.NoRecoveryWindow {
		return 0, r.ID
	}
	return max(r.Until-now, 0), r.ID
}

// Acquire is acquire.lua: it returns the status and the token (Taken),
// the holder's remaining TTL (Held, -1 without expiry) or the time left to
// recover (Recovering).
func (d *Data) Acquire(env Env, value int, ttl int64, g Guard, m Mutations) (status int, n int64) {
	d.expire(env.Now)
	rec, id := d.Epoch(env, g, m)
	if rec > 0 {
		return Recovering, rec
	}
	if d.Lock.Owner == 0 {
		d.Lock = Key{Owner: value, Exp: env.Now + ttl}
		v, ok := d.Fence.V, d.Fence.OK
		if !ok || d.Fence.E != id {
			if !ok {
				v = 0
			}
			if !m.NoClockSeed {
				v = max(v, env.Now*TokenSeed)
			}
		}
		v++
		d.Fence = Counter{OK: true, V: v, E: id, Exp: env.Now + g.FenceTTL}
		return Taken, v
	}
	if d.Lock.Owner == value {
		if d.Fence.OK {
			return Taken, d.Fence.V
		}
		return Taken, 0
	}
	return Held, d.Lock.Exp - env.Now
}

// Raise is fence.lua: it raises the counter to at least token.
func (d *Data) Raise(env Env, token int64, g Guard) {
	d.expire(env.Now)
	if !d.Fence.OK || d.Fence.V < token {
		// HSET of v alone keeps e (or creates a hash without e).
		e := d.Fence.E
		if !d.Fence.OK {
			e = EpochID{Run: -2} // no e field
		}
		d.Fence = Counter{OK: true, V: token, E: e}
	}
	d.Fence.Exp = env.Now + g.FenceTTL
}

// Refresh is refresh.lua.
func (d *Data) Refresh(env Env, value int, ttl int64, g Guard, m Mutations) int {
	d.expire(env.Now)
	switch d.Lock.Owner {
	case value:
		if d.Lock.Exp-env.Now < ttl {
			d.Lock.Exp = env.Now + ttl
		}
		return Extended
	case 0:
		if rec, _ := d.Epoch(env, g, m); rec > 0 {
			return NotReseeded
		}
		d.Lock = Key{Owner: value, Exp: env.Now + ttl}
		return Reseeded
	}
	return NotOwner
}

// Release is release.lua's compare-and-delete: it reports whether the key
// held value and was deleted.
func (d *Data) Release(env Env, value int) bool {
	d.expire(env.Now)
	if d.Lock.Owner == value && value != 0 {
		d.Lock = Key{}
		return true
	}
	return false
}
