package model

// The lock family's scripts (family.lua, holds.lua, familyrefresh.lua,
// familyrelease.lua, seal.lua) on a node's data: one hash per lock with
// the mode, the exclusive owner, its recorded token and one expiring field
// per hold (docs/lock-family.md).

// MaxHolds is the most hold fields a modelled hash keeps.
const MaxHolds = 8

// HoldExp is one field h:ID of the hash: the hold's expiry, node time. A
// hold is live while now < Exp (holds.lua: tonumber(v) > now).
type HoldExp struct {
	ID  int
	Exp int64
}

// Family is the lock's hash (family.lua). Owners and holds are numbers
// (0 is the empty owner of a reader); T is the field t, 0 when absent
// (tokens are positive). Holds are kept sorted by ID, unused slots zero,
// so that equal hashes compare and hash equal.
type Family struct {
	OK    bool
	Mode  byte // 'w' or 'r'; 's' for a semaphore (permit.go)
	K     int  // the semaphore's number of permits (mode 's')
	Owner int
	T     int64
	Holds [MaxHolds]HoldExp
	Exp   int64 // the key's own expiry (PEXPIRE), node time
}

// Hold returns the expiry of hold id.
func (f *Family) Hold(id int) (int64, bool) {
	for _, h := range f.Holds {
		if h.ID == id {
			return h.Exp, true
		}
	}
	return 0, false
}

// setHold is HSET h:id exp.
func (f *Family) setHold(id int, exp int64) {
	for i := range f.Holds {
		if f.Holds[i].ID == id {
			f.Holds[i].Exp = exp
			return
		}
	}
	hs := f.Holds[:0:0]
	for _, h := range f.Holds {
		if h.ID != 0 {
			hs = append(hs, h)
		}
	}
	if len(hs) == MaxHolds {
		panic("model: more than MaxHolds holds on one hash")
	}
	i := 0
	for i < len(hs) && hs[i].ID < id {
		i++
	}
	hs = append(hs[:i], append([]HoldExp{{id, exp}}, hs[i:]...)...)
	f.Holds = [MaxHolds]HoldExp{}
	copy(f.Holds[:], hs)
}

// delHold is HDEL h:id; it reports whether the field was there.
func (f *Family) delHold(id int) bool {
	for i, h := range f.Holds {
		if h.ID == id {
			copy(f.Holds[i:], f.Holds[i+1:])
			f.Holds[MaxHolds-1] = HoldExp{}
			return true
		}
	}
	return false
}

// NHolds counts the hold fields, live or not.
func (f *Family) NHolds() int {
	n := 0
	for _, h := range f.Holds {
		if h.ID != 0 {
			n++
		}
	}
	return n
}

// Family acquire statuses besides Held, Taken and Recovering.
const (
	// KindError: a plain lock and a lock of the family met on one name
	// (REDLOCK_KIND), or a family script found a string: no vote.
	KindError = 3
)

// Refresh and release results of a script that failed on the key's type
// (WRONGTYPE or REDLOCK_KIND): no vote.
const ScriptError = -1

// live is holds.lua's live(): it prunes the holds whose expiry is at or
// before now and deletes the key when none is left. It reports whether a
// hash with live holds remains. The caller has checked that the key is
// not a string.
func (d *Data) live(now int64) bool {
	f := &d.Fam
	if !f.OK {
		return false
	}
	n := 0
	for _, h := range f.Holds {
		if h.ID != 0 && h.Exp > now {
			f.Holds[n] = h
			n++
		}
	}
	for i := n; i < MaxHolds; i++ {
		f.Holds[i] = HoldExp{}
	}
	if n == 0 {
		d.Fam = Family{}
		return false
	}
	return true
}

// pexpire is "if PTTL < ttl then PEXPIRE ttl".
func (f *Family) pexpire(now, ttl int64) {
	if f.Exp-now < ttl {
		f.Exp = now + ttl
	}
}

// FamAcquire is family.lua: a hold of mode 'w' (owner) or 'r' (owner 0).
// It returns the status and, when Taken, the token, whether the owner's
// lock existed (a re-entry: token is the recorded t, counter the node's
// counter, not incremented) and the counter; when Held, how long it lasts
// at most; when Recovering, the time left.
func (d *Data) FamAcquire(env Env, mode byte, owner, hold int, ttl int64, g Guard, m Mutations) (status int, token int64, existed bool, counter int64) {
	d.expire(env)
	rec, floor := d.Epoch(env, g, m)
	if rec > 0 {
		return Recovering, rec, false, 0
	}
	now := env.Now
	if d.Lock.Owner != 0 {
		return KindError, 0, false, 0
	}
	cur := d.live(now)
	f := &d.Fam
	if cur && f.Mode != 'w' && f.Mode != 'r' {
		// family.lua takes only its own modes: a semaphore, or a kind it
		// does not know, is REDLOCK_KIND.
		return KindError, 0, false, 0
	}
	refuse := func(pttl int64) (int, int64, bool, int64) {
		d.Waiters = Mark{OK: true, Exp: now + g.FenceTTL}
		if mode == 'w' {
			d.WWait = Mark{OK: true, Exp: now + ttl}
		}
		return Held, pttl, false, 0
	}
	waiting := func() (int64, bool) {
		if d.WWait.OK && d.WWait.Exp-now > 0 {
			return d.WWait.Exp - now, true
		}
		return 0, false
	}
	if cur {
		switch {
		case f.Mode == 'w' && mode == 'w' && f.Owner == owner:
			// Re-entry: the counter as an issue would see it.
			f.setHold(hold, now+ttl)
			f.pexpire(now, ttl)
			if m.ReentryRawCounter {
				return Taken, f.T, true, d.Fence.V // 0 when missing
			}
			return Taken, f.T, true, d.current(env, floor, g, m)
		case f.Mode == 'w' && !(mode == 'r' && m.ReaderJoinsWriter):
			return refuse(f.Exp - now)
		case f.Mode == 'r' && mode == 'w':
			return refuse(f.Exp - now)
		}
		// A reader joins (unless a writer waits).
		if w, ok := waiting(); ok && !m.ReaderJoinsWriter {
			return refuse(w)
		}
	} else if mode == 'r' {
		if w, ok := waiting(); ok {
			return refuse(w)
		}
	}
	v := d.issue(env, floor, g, m)
	if !cur {
		*f = Family{OK: true, Mode: mode}
		if mode == 'w' {
			f.Owner, f.T = owner, v
			d.WWait = Mark{}
		}
		f.setHold(hold, now+ttl)
		f.Exp = now + ttl
	} else {
		f.setHold(hold, now+ttl)
		f.pexpire(now, ttl)
	}
	return Taken, v, false, v
}

// Seal is seal.lua: it raises the counter to at least token (as Raise) and
// records token as owner's t where owner holds the hash in mode 'w' and t
// is lower (owner 0: a reader, nothing recorded). It does not prune holds.
func (d *Data) Seal(env Env, token int64, owner int, g Guard, m Mutations) {
	d.Raise(env, token, g, m)
	f := &d.Fam
	if owner != 0 && f.OK && f.Mode == 'w' && f.Owner == owner && ((f.T > 0 && f.T < token) || (m.SealRecordsUnrecorded && f.T < token) || m.SealOverwrites) {
		f.T = token
	}
}

// FamRefresh is familyrefresh.lua for a hold of fencing token token:
// Extended, Reseeded (in a new hash, or beside the holds of its mode and
// owner), NotOwner, NotReseeded, Retired, or ScriptError on a plain lock.
// token is recorded by a re-seed only with the ReseedRecordsToken mutant.
func (d *Data) FamRefresh(env Env, mode byte, owner, hold int, ttl, token int64, g Guard, m Mutations) int {
	d.expire(env)
	now := env.Now
	if d.Lock.Owner != 0 {
		return ScriptError
	}
	f := &d.Fam
	cur := d.live(now)
	if cur && (f.Mode != mode || (mode == 'w' && f.Owner != owner)) {
		return NotOwner
	}
	if exp, ok := f.Hold(hold); cur && ok {
		if exp < now+ttl {
			f.setHold(hold, now+ttl)
		}
		f.pexpire(now, ttl)
		return Extended
	}
	// A re-seed: a vote.
	if d.retired(token, m) {
		return Retired
	}
	if rec, _ := d.Epoch(env, g, m); rec > 0 && !(cur && m.HoldReseedUnguarded) {
		return NotReseeded
	}
	if cur {
		f.setHold(hold, now+ttl)
		f.pexpire(now, ttl)
		return Reseeded
	}
	*f = Family{OK: true, Mode: mode}
	if mode == 'w' {
		f.Owner = owner
		if m.ReseedRecordsToken {
			f.T = token
		}
	}
	f.setHold(hold, now+ttl)
	f.Exp = now + ttl
	return Reseeded
}

// FamRelease is familyrelease.lua for a hold of fencing token token: it
// reports whether the hold was ours and is gone now, and whether the
// release publishes (a channel, the lock free now, the waiters mark there,
// which it takes). Unless the lock is another mode's or owner's, it
// retires the token. ok is false when the script fails on a plain lock.
func (d *Data) FamRelease(env Env, mode byte, owner, hold int, token int64, channel bool, g Guard, m Mutations) (deleted, published, ok bool) {
	d.expire(env)
	if d.Lock.Owner != 0 {
		return false, false, false
	}
	f := &d.Fam
	free := true
	if d.live(env.Now) {
		if f.Mode != mode || (mode == 'w' && f.Owner != owner) {
			return false, false, true
		}
		n := f.NHolds()
		deleted = f.delHold(hold)
		if deleted && n == 1 {
			d.Fam = Family{}
		} else {
			free = false
		}
	}
	d.retire(env, token, g, m)
	if !free || !channel || !d.Waiters.OK {
		return deleted, false, true
	}
	d.Waiters = Mark{}
	return deleted, true, true
}
