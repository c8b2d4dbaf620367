package model

// Handing a held lock to another process (docs/handoff.md): Lock.Handoff
// ends a lock in the handing Client without releasing it and returns its
// form (name, kind, token, TTL and secret); Client.Resume claims it on the
// nodes (resume.lua, Data.Claim below) and returns it to the worker.
//
// In the model, a client with ClientSpec.Handoff hands its held lock off
// where it would release it (after its refreshes, whose requests may still
// run on the nodes at any later time: a late refresh of the handing
// Client), and the form goes to every client that resumes this one's
// (ClientSpec.Resume; two of them are a form delivered twice). A worker
// resumes each form once, as Client.Resume does: the admission (its
// configuration records first, the conflict; Mut.ResumeUnrecorded skips
// it, issue 44's finding F), a claim round to its nodes with a new secret
// of its own that waits for every node up to the node timeout
// (quorum.WaitAll), and the kind's quorum rule on the claims with time
// left (a joint client's too); the lock is valid until the largest time
// for which the nodes still holding it meet the rule, counted from before
// the claim was sent, less the drift allowance, and is given back where
// claimed when it fails. The resumed lock is then a held lock like any
// other: it refreshes, releases or hands off with its new secret and the
// form's token, through every fault of the model.
//
// Properties, beside those of every grant: a form resumes at most once
// ("once"); a resumed lock is of the kind the nodes hold ("kind"); and its
// token, the form's, follows no conflicting grant of a higher token but
// the handed lock's own, which it continues (token order, (b)).

// Claim statuses, as resume.lua replies.
const (
	NotClaimed      = 0
	Claimed         = 1
	ClaimRecovering = 2 // the restart guard: the node may not vote yet
	AlreadyClaimed  = 3
	Superseded      = 4  // the counter is missing or above the form's token
	ClaimKindError  = -1 // REDLOCK_KIND (an error reply): the node holds the secret in another kind
)

// Tomb is resume.lua's tombstone <lock>:claimed:<secret>: a claim of
// Secret ran on the node; the key exists while now <= Exp.
type Tomb struct {
	Secret int
	Exp    int64
}

// Tombs are a node's tombstones (a fixed array, so that states compare
// and hash by value).
type Tombs [4]Tomb

// has reports whether a tombstone of secret exists at now.
func (t *Tombs) has(secret int, now int64) bool {
	for _, x := range t {
		if x.Secret == secret && now <= x.Exp {
			return true
		}
	}
	return false
}

// set is SET <lock>:claimed:<secret> 1 PX ttl, at node time now (an
// expired tombstone's slot is free).
func (t *Tombs) set(secret int, exp, now int64) {
	for i, x := range t {
		if x.Secret == secret {
			t[i].Exp = exp
			return
		}
	}
	for i, x := range t {
		if x.Secret == 0 || now > x.Exp {
			t[i] = Tomb{secret, exp}
			return
		}
	}
	panic("model: more tombstones than Tombs holds")
}

// Form is what a handoff form says of its lock: its kind ('p' a plain
// lock, 'w' an exclusive hold of the family, 'r' a reader's hold, 's' a
// permit), the exclusive owner (for 'w'), the semaphore's number of
// permits (for 's'), the secret (the plain lock's value, or the hold's
// ID) and the fencing token.
type Form struct {
	Kind   byte
	Owner  int
	K      int
	Secret int
	Token  int64
}

// Claim is resume.lua on a node's data and tombstones at env, for a
// request with the guard g: where the node holds f's secret in f's kind,
// the secret becomes new, with the same expiry, and a tombstone of the old
// secret is left for g.FenceTTL. It returns the status and, when Claimed,
// how long the claimed lock has left. A node that recovers (the restart
// guard, Epoch) answers ClaimRecovering with the time left to recover, and
// changes nothing but its epoch record.
// Where the node's fencing counter is missing or, raised to the epoch's
// floor, above f's token (a holder granted after f's lock can have drawn
// a token here), it answers Superseded and changes nothing; not for a
// permit of a semaphore of more than one. The mutations ClaimTrustsKind,
// NoTombstone, NoCounterCheck, ClaimUnguarded and ClaimRawCounter switch
// its checks off.
func (d *Data) Claim(t *Tombs, env Env, f Form, new int, g Guard, mut HandoffMutations) (status int, left int64) {
	d.expire(env)
	now := env.Now
	rec, floor := d.Epoch(env, g, Mutations{})
	if rec > 0 && !mut.ClaimUnguarded {
		return ClaimRecovering, rec
	}
	checkKind, tomb := !mut.ClaimTrustsKind, !mut.NoTombstone
	if tomb && t.has(f.Secret, now) {
		return AlreadyClaimed, 0
	}
	// resume.lua's later(): the counter missing (expire cleared an
	// expired one), or above the token once raised to the epoch's floor.
	later := func() bool {
		if mut.NoCounterCheck || (f.Kind == 's' && f.K != 1) {
			return false
		}
		if !d.Fence.OK {
			return true
		}
		v := d.Fence.V
		if !mut.ClaimRawCounter {
			v = max(v, floor)
		}
		return v > f.Token
	}
	if d.Lock.Owner != 0 { // a string
		if d.Lock.Owner != f.Secret {
			return NotClaimed, 0
		}
		if f.Kind != 'p' && checkKind {
			return ClaimKindError, 0
		}
		pttl := d.Lock.Exp - now
		if pttl <= 0 {
			return NotClaimed, 0
		}
		if later() {
			return Superseded, 0
		}
		d.Lock.Owner = new
		if tomb {
			t.set(f.Secret, now+g.FenceTTL, now)
		}
		return Claimed, pttl
	}
	if !d.live(now) {
		return NotClaimed, 0
	}
	fam := &d.Fam
	exp, ok := fam.Hold(f.Secret)
	if !ok {
		return NotClaimed, 0
	}
	if checkKind && (f.Kind == 'p' || fam.Mode != f.Kind || (f.Kind == 'w' && fam.Owner != f.Owner) || (f.Kind == 's' && fam.K != f.K)) {
		return ClaimKindError, 0
	}
	if later() {
		return Superseded, 0
	}
	fam.delHold(f.Secret)
	fam.setHold(new, exp)
	if tomb {
		t.set(f.Secret, now+g.FenceTTL, now)
	}
	return Claimed, exp - now
}

// OldResumeCheck is the read of the resume before issue 33 (the
// OldResume mutant): GET and PTTL for a plain lock's form, HGET h:ID and
// TIME for a hold's, whatever the node's mode, owner or number of
// permits; nothing is written.
func (d *Data) OldResumeCheck(env Env, f Form) (ok bool, left int64) {
	d.expire(env)
	now := env.Now
	if f.Kind == 'p' {
		if d.Lock.Owner == f.Secret && d.Lock.Exp-now > 0 {
			return true, d.Lock.Exp - now
		}
		return false, 0
	}
	if d.Lock.Owner != 0 || !d.Fam.OK {
		return false, 0
	}
	if exp, ok := d.Fam.Hold(f.Secret); ok && exp > now {
		return true, exp - now
	}
	return false, 0
}

// HandoffMutations switch Resume back to broken versions.
type HandoffMutations struct {
	// OldResume is Resume before issue 33: it reads whether a quorum holds
	// the form's secret (OldResumeCheck), writes nothing, and returns the
	// lock with the form's secret and kind (findings 2 and 3).
	OldResume bool
	// ClaimTrustsKind: the claim rotates the secret without checking the
	// hold's mode, owner or number of permits (finding 3).
	ClaimTrustsKind bool
	// NoTombstone: the claim leaves no tombstone, and a late refresh of
	// the handing Client can write the old secret back for a second
	// Resume to claim.
	NoTombstone bool
	// ValidityFromDecision: the resumed lock's validity is counted from
	// the claim round's decision, not from before its requests were sent.
	ValidityFromDecision bool
	// NoCounterCheck: the claim does not read the fencing counter, so a
	// form whose lock H's late refreshes re-created after the rival's
	// tenure resumes with a token below the rival's.
	NoCounterCheck bool
	// ClaimUnguarded: the claim ignores the restart guard (resume.lua
	// before issue 44's finding A): a node that restarted from a
	// snapshot, or a promoted replica, gives a claim its vote while it
	// recovers.
	ClaimUnguarded bool
	// ClaimRawCounter: the claim compares the form's token with the
	// counter as it is, not raised to the epoch's floor (resume.lua before
	// issue 44's finding B): a counter restored from a snapshot, or
	// replicated to a promoted replica, that lacks a later holder's token
	// passes.
	ClaimRawCounter bool
	// ResumeUnrecorded: Client.Resume skips the admission (the library
	// before issue 44's finding F): a client that only resumes never
	// records its configuration, nor refuses on a conflict.
	ResumeUnrecorded bool
}
