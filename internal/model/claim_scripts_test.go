package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// The claim's differential test: resume.lua against its twin, Data.Claim,
// on a real redis-server.

// The guard of the claim test's requests: the epoch record's max TTL, and
// a delta long enough that no identity check goes stale during the test,
// so that the record changes only where the test writes a new epoch into
// it (claimDiff.epoch; the record's own renewals are
// TestModelMatchesScripts'). The counters' and tombstones' expiry is an
// hour: the test ages neither.
const (
	claimMaxTTL   = 10_000
	claimDelta    = 600_000
	claimFenceTTL = 3_600_000
	claimTTL      = 60_000 // the locks' TTL
)

// claimGuard is a request's guard in mode ('0', '1' or 'p'), for the
// script and for the model.
func claimGuard(mode byte) (script.Guard, Guard) {
	g := Guard{MaxTTL: claimMaxTTL, Delta: claimDelta, Mode: mode, FenceTTL: claimFenceTTL}
	ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
	return script.Guard{MaxTTL: ms(g.MaxTTL), Delta: ms(g.Delta), Mode: mode, FenceTTL: ms(g.FenceTTL)}.Prepared(), g
}

// claimDiff drives resume.lua and the lock scripts it meets on a real
// node, and Data.Claim and the scripts' twins on the model's node, side by
// side. Secrets are "s<n>" on the node and n in the model, for a plain
// lock's value and a hold's ID alike, so that a form of the wrong kind
// names a secret the node holds. The node's run_id is run 1 of the model.
type claimDiff struct {
	t     *testing.T
	ctx   context.Context
	c     *redis.Client
	node  *goredis.Node
	run   string // the node's run_id
	m     Data
	tombs Tombs
	// twin are the mutations of the model's claim: none in
	// TestClaimModelMatchesScripts, a broken twin's in
	// TestClaimModelTellsBrokenTwins.
	twin  HandoffMutations
	cover map[string]int
	log   []string
	err   error // the first disagreement; every later step is skipped
}

func newClaimDiff(t *testing.T, c *redis.Client, twin HandoffMutations) *claimDiff {
	p := &claimDiff{t: t, ctx: context.Background(), c: c, node: goredis.New(c), twin: twin, cover: map[string]int{}}
	if err := c.FlushAll(p.ctx).Err(); err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(p.ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, p.run, _ = strings.Cut(info, "run_id:")
	p.run, _, _ = strings.Cut(p.run, "\r\n")
	return p
}

// env is the model's environment at node time now: the node's run, whose
// record the test keeps (the record is never missing, so uptime is not
// read).
func (p *claimDiff) env(now int64) Env { return Env{Now: now, Run: 1, Second: 1000} }

func (p *claimDiff) now() int64 {
	tm, err := p.c.Time(p.ctx).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	return tm.UnixMilli()
}

// claimStateOf shows the lock key (a plain lock's value, or the hash's
// mode, owner, k and live holds), the fencing counter ("" when missing),
// the tombstones, and the end and kind of the epoch and the fast path's
// key.
func claimStateOf(plain string, mode, owner, k string, holds []string, fence string, tombs []string, epoch string) string {
	slices.Sort(holds)
	slices.Sort(tombs)
	return fmt.Sprintf("plain=%q mode=%q o=%q k=%q holds=%v fence=%q tombs=%v epoch=%s", plain, mode, owner, k, holds, fence, tombs, epoch)
}

func (p *claimDiff) real(now int64) string {
	tombs, err := p.c.Keys(p.ctx, famKeys.Lock+":claimed:*").Result()
	if err != nil {
		p.t.Fatal(err)
	}
	for i, k := range tombs {
		tombs[i] = strings.TrimPrefix(k, famKeys.Lock+":claimed:")
	}
	fence := p.c.Get(p.ctx, famKeys.Fence).Val()
	rec := p.c.HMGet(p.ctx, famKeys.Epoch, "until", "kind").Val()
	epoch := fmt.Sprintf("%v/%v/ok=%q", rec[0], rec[1], p.c.Get(p.ctx, keys.Trusted(famKeys.Epoch)).Val())
	typ := p.c.Type(p.ctx, famKeys.Lock).Val()
	if typ == "string" {
		return claimStateOf(p.c.Get(p.ctx, famKeys.Lock).Val(), "", "", "", nil, fence, tombs, epoch)
	}
	all := p.c.HGetAll(p.ctx, famKeys.Lock).Val()
	var holds []string
	for f, v := range all {
		if id, ok := strings.CutPrefix(f, "h:"); ok {
			if exp, _ := strconv.ParseInt(v, 10, 64); exp > now {
				holds = append(holds, id)
			}
		}
	}
	return claimStateOf("", all["mode"], all["o"], all["k"], holds, fence, tombs, epoch)
}

func (p *claimDiff) model(d Data, tombs Tombs, now int64) string {
	var ts []string
	for _, x := range tombs {
		if x.Secret != 0 && now <= x.Exp {
			ts = append(ts, "s"+strconv.Itoa(x.Secret))
		}
	}
	fence := ""
	if d.Fence.OK && now <= d.Fence.Exp {
		fence = strconv.FormatInt(d.Fence.V, 10)
	}
	ok := ""
	if d.Ok.OK && now <= d.Ok.Exp {
		ok = fmt.Sprintf("%d:%d", d.Ok.MaxTTL, d.Ok.Floor)
	}
	kind := map[byte]string{KindNew: "new", KindRestart: "restart", KindFailover: "failover"}[d.Rec.Kind]
	epoch := fmt.Sprintf("%d/%s/ok=%q", d.Rec.Until, kind, ok)
	if d.Lock.Owner != 0 && now <= d.Lock.Exp {
		return claimStateOf("s"+strconv.Itoa(d.Lock.Owner), "", "", "", nil, fence, ts, epoch)
	}
	var holds []string
	mode, owner, k := "", "", ""
	if f := d.Fam; f.OK && now <= f.Exp {
		mode, owner = string(f.Mode), famOwner(f.Owner)
		if f.Mode == 's' {
			k = strconv.Itoa(f.K)
		}
		for _, h := range f.Holds {
			if h.ID != 0 && h.Exp > now {
				holds = append(holds, "s"+strconv.Itoa(h.ID))
			}
		}
	}
	return claimStateOf("", mode, owner, k, holds, fence, ts, epoch)
}

// step runs op on the node, then the model at every node time the script
// may have read, and keeps the first whose reply and state match. A
// disagreement is kept in p.err, and later steps do nothing.
func (p *claimDiff) step(name string, real func() string, model func(d *Data, t *Tombs, now int64) string) {
	if p.err != nil {
		return
	}
	t0 := p.now()
	got := real()
	t1 := p.now()
	after := p.real(t1)
	p.log = append(p.log, fmt.Sprintf("t=[%d,%d] %s: %s -> %s", t0, t1, name, got, after))
	if len(p.log) > 12 {
		p.log = p.log[1:]
	}
	for now := t0; now <= t1; now++ {
		d, tombs := p.m, p.tombs
		if model(&d, &tombs, now) != got || p.model(d, tombs, t1) != after {
			continue
		}
		p.m, p.tombs = d, tombs
		return
	}
	d, tombs := p.m, p.tombs
	want := model(&d, &tombs, t0)
	p.err = fmt.Errorf("model and scripts disagree on %s\nnode:  %s, %s\nmodel: %s, %s\nlast operations:\n  %s",
		name, got, after, want, p.model(d, tombs, t1), strings.Join(p.log, "\n  "))
}

// epoch writes a new epoch into the node's record and the model's, as a
// restart or a failover (kind) that the guard saw would have: the node
// recovers for left ms more (ended -left ms ago when negative), and the
// fast path's key is gone. The counters' floor is the end x 1024: a
// counter written before is below it.
func (p *claimDiff) epoch(kind byte, left int64) {
	now := p.now()
	until := now + left
	base := until - claimMaxTTL
	name := map[byte]string{KindRestart: "restart", KindFailover: "failover"}[kind]
	if err := p.c.HSet(p.ctx, famKeys.Epoch, "run", p.run, "base", base, "maxttl", claimMaxTTL,
		"until", until, "kind", name, "check", now).Err(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.c.Del(p.ctx, keys.Trusted(famKeys.Epoch)).Err(); err != nil {
		p.t.Fatal(err)
	}
	p.m.Rec = Record{OK: true, Run: 1, Base: base, MaxTTL: claimMaxTTL, Kind: kind, Check: now, Until: until}
	p.m.Ok = OkKey{}
	p.cover["a new epoch"]++
	p.log = append(p.log, fmt.Sprintf("t=%d a new epoch (%s) until %d", now, name, until))
}

// claimKinds are the forms of the test: a plain lock, exclusive holds of
// two owners, a reader's, permits of semaphores of one and of two.
var claimKinds = []Form{{Kind: 'p'}, {Kind: 'w', Owner: 1}, {Kind: 'w', Owner: 2}, {Kind: 'r'}, {Kind: 's', K: 1}, {Kind: 's', K: 2}}

func claimHold(f Form) *script.Hold {
	if f.Kind == 'p' {
		return nil
	}
	return &script.Hold{Mode: f.Kind, Owner: famOwner(f.Owner), ID: "s" + strconv.Itoa(f.Secret), Permits: f.K}
}

// form draws the form of an operation: half the time of the lock the node
// holds (a claim's likely case), or of one of its holds.
func (p *claimDiff) form(rng *rand.Rand) Form {
	f := claimKinds[rng.IntN(len(claimKinds))]
	f.Secret = 1 + rng.IntN(6)
	if rng.IntN(2) == 0 {
		switch fam := p.m.Fam; {
		case p.m.Lock.Owner != 0:
			f = Form{Kind: 'p', Secret: p.m.Lock.Owner}
		case fam.OK && fam.NHolds() > 0:
			f = Form{Kind: fam.Mode, Owner: fam.Owner, K: fam.K, Secret: fam.Holds[rng.IntN(fam.NHolds())].ID}
		}
	}
	return f
}

// restored plays what a claim meets on a node restored from a snapshot,
// once its recovery ended: a lock of f's kind taken before the node's
// epoch began (by an acquire with the guard off, which leaves the counter
// where it was), a new epoch that ended just now, whose floor is above
// that counter, and a claim of the lock with the guard on.
func (p *claimDiff) restored(rng *rand.Rand, f Form) {
	p.deleteLock()
	p.acquire(f, fmt.Sprintf("%c o=%d k=%d s%d", f.Kind, f.Owner, f.K, f.Secret), '0')
	p.epoch([]byte{KindRestart, KindFailover}[rng.IntN(2)], -1)
	p.cover["restored"]++
	p.claim(rng, f, fmt.Sprintf("%c o=%d k=%d s%d", f.Kind, f.Owner, f.K, f.Secret), '1')
}

// play runs n random operations, after a first epoch whose recovery ended
// a minute ago, until the first disagreement.
func (p *claimDiff) play(rng *rand.Rand, n int) {
	p.epoch(KindRestart, -60_000)
	for i := 0; i < n && p.err == nil; i++ {
		f := p.form(rng)
		label := fmt.Sprintf("%c o=%d k=%d s%d", f.Kind, f.Owner, f.K, f.Secret)
		mode := "011p"[rng.IntN(4)]
		switch op := rng.IntN(27); {
		case op < 6 && (f.Kind == 'w' || f.Kind == 'r') && p.m.Fam.OK && p.m.Fam.Mode == 's':
			// FamAcquire (family.go) does not model family.lua's
			// REDLOCK_KIND on a semaphore's hash, which no model search
			// meets: not sent.
		case op < 6:
			// Some acquires with the guard off: they leave a counter
			// below a floor below it.
			p.acquire(f, label, "01p"[rng.IntN(3)])
		case op < 8:
			p.deleteLock()
		case op < 9 && p.m.Fam.OK && p.m.Fam.NHolds() > 0:
			p.age()
		case op < 10 && rng.IntN(3) == 0:
			p.deleteCounter()
		case op < 10:
			p.forgetTombs()
		case op < 12:
			// A new epoch: recovered just now (the counters written
			// before are below its floor), a while ago, or recovering.
			kind := []byte{KindRestart, KindFailover}[rng.IntN(2)]
			p.epoch(kind, []int64{-1, -2000, 400, 1500}[rng.IntN(4)])
		case op < 14:
			p.restored(rng, f)
		default:
			p.claim(rng, f, label, mode)
		}
	}
}

func (p *claimDiff) acquire(f Form, label string, mode byte) {
	sg, g := claimGuard(mode)
	sec := "s" + strconv.Itoa(f.Secret)
	p.step(fmt.Sprintf("acquire %s guard %c", label, mode), func() string {
		var a script.Acquired
		var err error
		switch h := claimHold(f); {
		case h == nil:
			a, err = script.Acquire(p.ctx, p.node, famKeys, sec, claimTTL*time.Millisecond, sg, script.Ack{})
		case h.Mode == 's':
			a, err = script.PermitAcquireCall(famKeys, *h, claimTTL*time.Millisecond, sg).Acquire(p.ctx, p.node, script.Ack{})
		default:
			a, err = script.FamilyAcquireCall(famKeys, *h, claimTTL*time.Millisecond, sg).Acquire(p.ctx, p.node, script.Ack{})
		}
		switch {
		case err != nil && (redis.HasErrorPrefix(err, "REDLOCK_") || redis.HasErrorPrefix(err, "WRONGTYPE")):
			return "kind"
		case err != nil:
			p.t.Fatal(err)
		}
		return strconv.Itoa(int(a.Status))
	}, func(d *Data, _ *Tombs, now int64) string {
		env := p.env(now)
		var status int
		switch f.Kind {
		case 'p':
			status, _ = d.Acquire(env, f.Secret, claimTTL, g, Mutations{})
		case 's':
			status, _ = d.PermAcquire(env, f.K, f.Secret, claimTTL, g, Mutations{})
		default:
			status, _, _, _ = d.FamAcquire(env, f.Kind, f.Owner, f.Secret, claimTTL, g, Mutations{})
		}
		if status == KindError || status == PermitsError {
			return "kind"
		}
		return strconv.Itoa(status)
	})
}

// deleteLock releases whatever holds the name: the lock starts over.
func (p *claimDiff) deleteLock() {
	p.step("delete the lock", func() string {
		p.c.Del(p.ctx, famKeys.Lock)
		return "ok"
	}, func(d *Data, _ *Tombs, now int64) string {
		d.Lock, d.Fam = Key{}, Family{}
		return "ok"
	})
}

// age ages one hold past its expiry, on both sides.
func (p *claimDiff) age() {
	id := 0
	for _, h := range p.m.Fam.Holds {
		if h.ID != 0 {
			id = h.ID
		}
	}
	p.step(fmt.Sprintf("age s%d", id), func() string {
		p.c.HSet(p.ctx, famKeys.Lock, "h:s"+strconv.Itoa(id), strconv.FormatInt(p.now()-1, 10))
		return "ok"
	}, func(d *Data, _ *Tombs, now int64) string {
		d.Fam.setHold(id, now-1)
		return "ok"
	})
}

// deleteCounter: the counter gone, expired or lost with the node's data.
func (p *claimDiff) deleteCounter() {
	p.step("delete the counter", func() string {
		p.c.Del(p.ctx, famKeys.Fence)
		return "ok"
	}, func(d *Data, _ *Tombs, _ int64) string {
		d.Fence = Counter{}
		return "ok"
	})
}

func (p *claimDiff) forgetTombs() {
	p.step("forget the tombstones", func() string {
		for _, k := range p.c.Keys(p.ctx, famKeys.Lock+":claimed:*").Val() {
			p.c.Del(p.ctx, k)
		}
		return "ok"
	}, func(_ *Data, t *Tombs, _ int64) string {
		*t = Tombs{}
		return "ok"
	})
}

// token draws a claim's token: the node's counter, or the floor of the
// epoch that a request with guard g sees, one below, at or one above it
// (any token when the counter is missing), and returns the floor too. The
// floor is the model's, read at the node's time now.
func (p *claimDiff) token(rng *rand.Rand, g Guard) (token, floor int64) {
	mm := p.m
	_, floor = mm.Epoch(p.env(p.now()), g, Mutations{})
	base := []int64{floor, floor, 1 + rng.Int64N(1<<50)}[rng.IntN(3)]
	if p.m.Fence.OK && rng.IntN(2) == 0 {
		base = p.m.Fence.V
	}
	return base + int64(rng.IntN(3)) - 1, floor
}

// floorPath names, for the coverage report, a claim whose answer the
// epoch's floor decides: the counter at most the token, and the floor
// above it (refused) or not (claimed); "" for any other.
func floorPath(m Data, f Form, floor int64, status script.ClaimStatus) string {
	if !m.Fence.OK || m.Fence.V > f.Token || m.Fence.V >= floor || (f.Kind == 's' && f.K != 1) {
		return ""
	}
	switch {
	case status == script.Superseded && floor > f.Token:
		return fmt.Sprintf("refused by the floor %c", f.Kind)
	case status == script.Claimed && floor <= f.Token:
		return "claimed at or above the floor, the counter below it"
	}
	return ""
}

func (p *claimDiff) claim(rng *rand.Rand, f Form, label string, mode byte) {
	if p.tombs[len(p.tombs)-1].Secret != 0 {
		p.forgetTombs() // Tombs is full: forget them first
	}
	sg, g := claimGuard(mode)
	newID := 7 + rng.IntN(3)
	var floor int64
	f.Token, floor = p.token(rng, g)
	above := !p.m.Fence.OK || p.m.Fence.V > f.Token
	before := p.m
	var left time.Duration
	p.step(fmt.Sprintf("claim %s token %d guard %c -> s%d", label, f.Token, mode, newID), func() string {
		c, err := script.ClaimCall(famKeys, claimHold(f), "s"+strconv.Itoa(f.Secret), "s"+strconv.Itoa(newID), f.Token, sg).Claim(p.ctx, p.node)
		switch {
		case redis.HasErrorPrefix(err, "REDLOCK_KIND"):
			p.cover["kind"]++
			return "kind"
		case err != nil:
			p.t.Fatal(err)
		}
		p.cover[fmt.Sprintf("status %d %c", c.Status, f.Kind)]++
		if path := floorPath(before, f, floor, c.Status); path != "" {
			p.cover[path]++
		}
		if c.Status == script.Claimed && above {
			// A permit of a semaphore of more than one: not checked
			// against the counter.
			p.cover[fmt.Sprintf("claimed above the counter %c k=%d", f.Kind, f.K)]++
		}
		left = c.Left
		if c.Status == script.ClaimRecovering {
			return fmt.Sprintf("%d %d", c.Status, c.Left.Milliseconds())
		}
		return strconv.Itoa(int(c.Status))
	}, func(d *Data, tombs *Tombs, now int64) string {
		status, left := d.Claim(tombs, p.env(now), f, newID, g, p.twin)
		switch status {
		case ClaimKindError:
			return "kind"
		case ClaimRecovering:
			return fmt.Sprintf("%d %d", status, left)
		}
		return strconv.Itoa(status)
	})
	if left < 0 || left > claimMaxTTL*time.Millisecond+claimTTL*time.Millisecond {
		p.t.Fatalf("a claim reports %v left, of a lock of TTL %d ms or a recovery of %d ms", left, claimTTL, claimMaxTTL)
	}
}

// TestClaimModelMatchesScripts holds resume.lua to its twin, Data.Claim:
// random claims, by forms of every kind (some of another kind than the
// node's lock, some of a secret the node does not hold, some claimed
// already), of plain locks, exclusive and shared holds of the family and
// permits, among acquires, releases, holds aged past their expiry,
// fencing counters deleted and new epochs of the node (a restart or a
// failover, recovering or recovered), each claim with a token around the
// node's counter or around the epoch's floor (some counters below it, as
// a restored node's), and the restart guard on,
// trusting persistence, or off. The replies (claimed, not held,
// recovering and for how long, claimed already, a later holder's token,
// REDLOCK_KIND), the time left of a claimed lock, the lock key, the
// counter, the tombstones and the epoch must agree.
func TestClaimModelMatchesScripts(t *testing.T) {
	srv := redistest.Start(t, 1)[0].Client()
	defer srv.Close()
	p := newClaimDiff(t, srv, HandoffMutations{})
	p.play(rand.New(rand.NewPCG(diffSeedOf(t), 0xc1a)), 3000)
	if p.err != nil {
		t.Fatal(p.err)
	}
	t.Logf("coverage: %v", p.cover)
	for _, k := range []string{"kind", "a new epoch", "status 0 p", "status 1 p", "status 3 p", "status 4 p", "status 0 w", "status 1 w", "status 4 w",
		"status 1 r", "status 4 r", "status 1 s", "status 3 s", "status 4 s", "claimed above the counter s k=2",
		"status 2 p", "status 2 w", "status 2 r", "status 2 s",
		"refused by the floor p", "refused by the floor w", "refused by the floor r", "refused by the floor s",
		"claimed at or above the floor, the counter below it"} {
		if p.cover[k] == 0 {
			t.Errorf("no claim took the path %q: %v", k, p.cover)
		}
	}
}

// TestClaimModelTellsBrokenTwins: the differential test fails for a twin
// that leaves a check of resume.lua out, so that a twin that drifts from
// the script cannot pass it.
func TestClaimModelTellsBrokenTwins(t *testing.T) {
	srv := redistest.Start(t, 1)[0].Client()
	defer srv.Close()
	seed := diffSeedOf(t)
	for _, m := range []struct {
		name string
		mut  HandoffMutations
	}{
		{"ClaimTrustsKind", HandoffMutations{ClaimTrustsKind: true}},
		{"NoTombstone", HandoffMutations{NoTombstone: true}},
		{"NoCounterCheck", HandoffMutations{NoCounterCheck: true}},
		{"ClaimUnguarded", HandoffMutations{ClaimUnguarded: true}},
		{"ClaimRawCounter", HandoffMutations{ClaimRawCounter: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			p := newClaimDiff(t, srv, m.mut)
			p.play(rand.New(rand.NewPCG(seed, 0xc1a)), 3000)
			if p.err == nil {
				t.Fatalf("the twin with %s agreed with resume.lua on 3000 operations: %v", m.name, p.cover)
			}
			if !strings.HasPrefix(p.err.Error(), "model and scripts disagree on claim ") {
				t.Fatalf("the twin with %s disagrees first on another operation than a claim: %v", m.name, p.err)
			}
			t.Logf("found: %v", p.err)
		})
	}
}
