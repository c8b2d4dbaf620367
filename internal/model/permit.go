package model

import "fmt"

// The semaphore's scripts (permit.lua, permitrefresh.lua,
// permitrelease.lua) on a node's data: the family's hash in mode 's', with
// the number of permits K and one expiring field per permit.

// PermitQuorum is the client's quorum for a permit of a semaphore of k
// permits on n nodes (redlock.PermitQuorum): floor(n*k/(k+1)) + 1.
func PermitQuorum(n, k int) int { return n*k/(k+1) + 1 }

// PermitsError: permit.lua found a semaphore of another k
// (REDLOCK_PERMITS): no vote.
const PermitsError = 4

// livePermits is holds.lua's live() as the permit scripts call it (one
// tick late with the PermitPruneEarly mutant).
func (d *Data) livePermits(now int64, m Mutations) bool {
	if m.PermitPruneEarly {
		return d.live(now + 1)
	}
	return d.live(now)
}

// PermAcquire is permit.lua: Taken with the token, Held with the time
// until the soonest permit expires, Recovering with the time left,
// KindError (a plain lock, or the family in another mode) or PermitsError.
func (d *Data) PermAcquire(env Env, k, hold int, ttl int64, g Guard, m Mutations) (status int, n int64) {
	d.expire(env)
	rec, floor := d.Epoch(env, g, m)
	if rec > 0 {
		return Recovering, rec
	}
	now := env.Now
	if d.Lock.Owner != 0 {
		return KindError, 0
	}
	cur := d.livePermits(now, m)
	f := &d.Fam
	if cur {
		switch {
		case f.Mode != 's':
			return KindError, 0
		case f.K != k:
			return PermitsError, 0
		}
		if _, ok := f.Hold(hold); ok {
			return Taken, d.current(env, floor, g, m) // a retried request (StepDup): the counter as it is
		}
		capacity := k
		if m.PermitCapacityOffByOne {
			capacity = k + 1
		}
		if f.NHolds() >= capacity {
			d.Waiters = Mark{OK: true, Exp: now + g.FenceTTL}
			soonest := int64(-1)
			for _, h := range f.Holds {
				if h.ID != 0 && (soonest < 0 || h.Exp < soonest) {
					soonest = h.Exp
				}
			}
			return Held, soonest - now
		}
	}
	v := d.issue(env, floor, g, m)
	if !cur {
		*f = Family{OK: true, Mode: 's', K: k}
		f.setHold(hold, now+ttl)
		f.Exp = now + ttl
	} else {
		f.setHold(hold, now+ttl)
		f.pexpire(now, ttl)
	}
	return Taken, v
}

// PermRefresh is permitrefresh.lua for a permit of fencing token token:
// Extended, Reseeded, NotOwner (the family in another mode), NotReseeded
// (the permit is gone and the node is recovering, full, or of another k),
// Retired (the permit is gone and its token retired), or ScriptError on a
// plain lock.
func (d *Data) PermRefresh(env Env, k, hold int, ttl, token int64, g Guard, m Mutations) int {
	d.expire(env)
	now := env.Now
	if d.Lock.Owner != 0 {
		return ScriptError
	}
	f := &d.Fam
	cur := d.livePermits(now, m)
	if cur && f.Mode != 's' {
		return NotOwner
	}
	if cur {
		if exp, ok := f.Hold(hold); ok {
			if exp < now+ttl {
				f.setHold(hold, now+ttl)
			}
			f.pexpire(now, ttl)
			return Extended
		}
		if f.K != k || (f.NHolds() >= k && !m.PermitReseedIgnoresCapacity) {
			return NotReseeded
		}
	}
	if d.retired(token, m) {
		return Retired
	}
	if rec, _ := d.Epoch(env, g, m); rec > 0 {
		return NotReseeded
	}
	if !cur {
		*f = Family{OK: true, Mode: 's', K: k}
		f.setHold(hold, now+ttl)
		f.Exp = now + ttl
	} else {
		f.setHold(hold, now+ttl)
		f.pexpire(now, ttl)
	}
	return Reseeded
}

// PermRelease is permitrelease.lua for a permit of fencing token token:
// whether the permit was ours and is gone now, and whether the release
// publishes. Unless the name is the family's, it retires the token. ok is
// false when the script fails on a plain lock.
func (d *Data) PermRelease(env Env, hold int, token int64, channel bool, g Guard, m Mutations) (deleted, published, ok bool) {
	d.expire(env)
	if d.Lock.Owner != 0 {
		return false, false, false
	}
	f := &d.Fam
	full := false
	if d.livePermits(env.Now, Mutations{}) {
		if f.Mode != 's' {
			return false, false, true
		}
		n := f.NHolds()
		deleted = f.delHold(hold)
		if deleted && n == 1 {
			d.Fam = Family{}
		}
		full = !deleted && n >= f.K
	}
	d.retire(env, token, g, m)
	if full {
		return false, false, true
	}
	if !channel || !d.Waiters.OK {
		return deleted, false, true
	}
	d.Waiters = Mark{}
	return deleted, true, true
}

// describePermit says what a semaphore script does on d (a copy).
func (m *Model) describePermit(q Msg, d Data, env Env, head string) string {
	c := &m.Cfg
	g := m.guard(q.Actor)
	switch q.Kind {
	case ReqAcquire:
		old := d.Fence.V
		status, x := d.PermAcquire(env, c.Permits, q.Value, q.Arg, g, c.Mut)
		switch status {
		case Taken:
			return fmt.Sprintf("%s: yes, token %d (counter was %d); %s", head, x, old, famState(d, env))
		case Held:
			return fmt.Sprintf("%s: no, full for %d; %s", head, x, famState(d, env))
		case Recovering:
			return fmt.Sprintf("%s: recovering for %d", head, x)
		}
		return fmt.Sprintf("%s: error %d", head, status)
	case ReqFence:
		d.expire(env)
		old := counterName(d.Fence)
		d.Raise(env, q.Arg, g, c.Mut)
		return fmt.Sprintf("%s %d: counter %s -> %d", head, q.Arg, old, d.Fence.V)
	case ReqRefresh:
		r := d.PermRefresh(env, c.Permits, q.Value, q.Arg, q.Tok, g, c.Mut)
		if r == ScriptError {
			return head + ": script error"
		}
		return fmt.Sprintf("%s: %s; %s", head, refreshSays(r), famState(d, env))
	case ReqRelease:
		deleted, _, _ := d.PermRelease(env, q.Value, q.Tok, true, g, c.Mut)
		return fmt.Sprintf("%s: deleted %v; %s", head, deleted, famState(d, env))
	}
	return head
}
