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

var famKeys = script.Keys{Lock: "{f}", Fence: "{f}:fence", Epoch: "{f}:epoch"}

// famDiff drives the lock family's scripts on a real node and the model
// (family.go) side by side.
type famDiff struct {
	t   *testing.T
	ctx context.Context
	c   *redis.Client
	m   Data
	log []string
	// mut is the twin's mutation (TestTwinMutantsDisagree); failed, when
	// set, is where a disagreement is reported instead of failing t.
	mut    Mutations
	failed *string
}

func (p *famDiff) now() int64 {
	tm, err := p.c.Time(p.ctx).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	return tm.UnixMilli()
}

// famStateOf shows the hash (mode, owner, recorded token, live holds at
// now), the waiting-writer mark and the counter.
func famStateOf(plain bool, mode, owner, t string, fields map[string]int64, wwait bool, counter string, now int64) string {
	var hs []string
	for id, exp := range fields {
		if exp > now {
			hs = append(hs, id)
		}
	}
	slices.Sort(hs)
	return fmt.Sprintf("plain=%v mode=%q o=%q t=%q holds=%v wwait=%v counter=%s", plain, mode, owner, t, hs, wwait, counter)
}

func (p *famDiff) real(now int64) string {
	typ, err := p.c.Type(p.ctx, famKeys.Lock).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	counter, _ := p.c.Get(p.ctx, famKeys.Fence).Result()
	wwait := p.c.Exists(p.ctx, famKeys.Lock+":wwait").Val() == 1
	if typ == "string" {
		return famStateOf(true, "", "", "", nil, wwait, counter, now)
	}
	all, err := p.c.HGetAll(p.ctx, famKeys.Lock).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	fields := map[string]int64{}
	for f, v := range all {
		if id, ok := strings.CutPrefix(f, "h:"); ok {
			fields[id], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return famStateOf(false, all["mode"], all["o"], all["t"], fields, wwait, counter, now)
}

// famOwner is the owner string of model owner o: P1, P2, or an exclusive
// writer's own (1<<20 + hold).
func famOwner(o int) string {
	switch {
	case o == 0:
		return ""
	case o < 1<<20:
		return "P" + strconv.Itoa(o)
	}
	return "x" + strconv.Itoa(o-1<<20)
}

func famModelState(d Data, now int64) string {
	counter := ""
	if d.Fence.OK && now <= d.Fence.Exp {
		counter = strconv.FormatInt(d.Fence.V, 10)
	}
	wwait := d.WWait.OK && now <= d.WWait.Exp
	if d.Lock.Owner != 0 {
		return famStateOf(true, "", "", "", nil, wwait, counter, now)
	}
	fields := map[string]int64{}
	mode, owner, t := "", "", ""
	if f := d.Fam; f.OK {
		mode, owner = string(f.Mode), famOwner(f.Owner)
		if f.T > 0 {
			t = strconv.FormatInt(f.T, 10)
		}
		for _, h := range f.Holds {
			if h.ID != 0 {
				fields["h"+strconv.Itoa(h.ID)] = h.Exp
			}
		}
	}
	return famStateOf(false, mode, owner, t, fields, wwait, counter, now)
}

// step runs op on the node, then the model at every node time the script
// may have read, and keeps the first whose reply and state match.
func (p *famDiff) step(name string, real func() string, model func(d *Data, now int64) string) {
	t0 := p.now()
	got := real()
	t1 := p.now()
	after := p.real(t1)
	p.log = append(p.log, fmt.Sprintf("t=[%d,%d] %s: %s -> %s", t0, t1, name, got, after))
	if len(p.log) > 12 {
		p.log = p.log[1:]
	}
	for now := t0; now <= t1; now++ { // however slow the operation, on a loaded machine
		d := p.m
		if want := model(&d, now); want != got {
			continue
		}
		if famModelState(d, t1) != after {
			continue
		}
		p.m = d
		return
	}
	d := p.m
	want := model(&d, t0)
	msg := fmt.Sprintf("model and scripts disagree on %s\nnode:  %s, %s\nmodel: %s, %s\nlast operations:\n  %s",
		name, got, after, want, famModelState(d, t1), strings.Join(p.log, "\n  "))
	if p.failed != nil {
		*p.failed = msg
		return
	}
	p.t.Fatal(msg)
}

// stopped reports whether a disagreement was reported (failed).
func (p *famDiff) stopped() bool { return p.failed != nil && *p.failed != "" }

// recoveringGuard makes a node started in the test recover throughout
// it: a re-seed there answers NotReseeded (every re-seed is a vote).
var (
	recoveringGuard      = script.Guard{MaxTTL: 10 * time.Minute, Delta: 50 * time.Millisecond, Mode: '1', FenceTTL: time.Hour}.Prepared()
	recoveringModelGuard = Guard{MaxTTL: 600_000, Delta: 50, Mode: '1', FenceTTL: 3_600_000}
)

// diffToken picks a hold's token for a refresh or a release around the
// counter as the model has it, or 0 (a clean-up's release).
func diffToken(rng *rand.Rand, d Data) int64 {
	v := d.Fence.V
	return []int64{v - 1, v, v, v + 1, 0}[rng.IntN(5)]
}

// TestFamilyModelMatchesScripts runs random operations of the lock family
// on a real redis-server through internal/script and on the model's node
// (family.go) side by side: write holds of two reentrant owners and of
// exclusive writers, read holds, seals with tokens around the counter and
// for either owner, refreshes (re-seeds included, with tokens around the
// counter, and on a node that recovers for some), releases (retiring
// tokens around the counter), holds aged past their expiry, counters gone
// (expired) and plain locks on the name. The replies (status, token,
// whether the owner's lock was there, the counter a re-entry reports) and
// the hash (mode, owner, recorded token, live holds), the writer's mark
// and the counter must agree. Acquires and seals run with the guard off
// (floor 0): TestModelMatchesScripts covers the guard.
func TestFamilyModelMatchesScripts(t *testing.T) {
	srv := redistest.Start(t, 1)[0].Client()
	defer srv.Close()
	p := &famDiff{t: t, ctx: context.Background(), c: srv}
	rng := rand.New(rand.NewPCG(diffSeedOf(t), 0xfa))
	cover := map[string]int{}
	p.run(rng, 3000, cover)
	t.Logf("coverage: %v", cover)
	for _, branch := range []string{"taken", "held", "re-entry", "aged", "plain", "kind", "counter expired", "re-entry, counter missing", "seal onto a missing counter",
		"refresh 0", "refresh 1", "refresh 2", "refresh 3", "refresh 4", "re-seed beside other holds", "release retired the token"} {
		if cover[branch] == 0 {
			t.Errorf("branch %q never taken", branch)
		}
	}
}

// run plays n random operations (fewer once a disagreement is reported).
func (p *famDiff) run(rng *rand.Rand, n int, cover map[string]int) {
	for i := 0; i < n && !p.stopped(); i++ {
		id := 1 + rng.IntN(5)
		mode, owner := byte('w'), 1+rng.IntN(2)
		switch rng.IntN(4) {
		case 0:
			mode, owner = 'r', 0
		case 1:
			owner = 1<<20 + id // an exclusive writer
		}
		hold := script.Hold{Mode: mode, Owner: famOwner(owner), ID: "h" + strconv.Itoa(id)}
		switch op := rng.IntN(25); {
		case op < 9:
			p.acquire(hold, mode, owner, id, cover)
		case op < 12:
			p.seal(rng, hold, owner, cover)
		case op < 16:
			p.refresh(rng, hold, mode, owner, id, cover)
		case op < 20:
			p.release(rng, hold, mode, owner, id, cover)
		default:
			p.fault(rng, hold, id, op, cover)
		}
	}
}

// famTTL keeps holds live for the whole test: they expire only when aged.
const famTTL = 60_000

func (p *famDiff) acquire(hold script.Hold, mode byte, owner, id int, cover map[string]int) {
	label := fmt.Sprintf("%c %s %s", mode, hold.Owner, hold.ID)
	p.step("acquire "+label, func() string {
		a, err := script.FamilyAcquireCall(famKeys, hold, famTTL*time.Millisecond, permitGuard).Acquire(p.ctx, goredis.New(p.c), script.Ack{})
		switch {
		case redis.HasErrorPrefix(err, "REDLOCK_KIND"):
			cover["kind"]++
			return "kind"
		case err != nil:
			p.t.Fatal(err)
		case a.Status == script.Taken && a.Existed:
			cover["re-entry"]++
			if !p.m.Fence.OK {
				cover["re-entry, counter missing"]++
			}
			return fmt.Sprintf("re-entry t=%d counter %d", a.Token, a.Counter)
		case a.Status == script.Taken:
			cover["taken"]++
			return fmt.Sprintf("taken %d", a.Token)
		}
		cover["held"]++
		return "held"
	}, func(d *Data, now int64) string {
		status, token, existed, counter := d.FamAcquire(Env{Now: now, Second: 1000}, mode, owner, id, famTTL, modelGuard, Mutations{})
		switch {
		case status == KindError:
			return "kind"
		case status == Taken && existed:
			return fmt.Sprintf("re-entry t=%d counter %d", token, counter)
		case status == Taken:
			return fmt.Sprintf("taken %d", token)
		}
		return "held"
	})
}

func (p *famDiff) seal(rng *rand.Rand, hold script.Hold, owner int, cover map[string]int) {
	v := p.m.Fence.V
	token := []int64{v - 1, v, v + 1, v + 5000, 7}[rng.IntN(5)]
	p.step(fmt.Sprintf("seal %d for %q", token, hold.Owner), func() string {
		if !p.m.Fence.OK {
			cover["seal onto a missing counter"]++
		}
		if err := script.Seal(p.ctx, goredis.New(p.c), famKeys, token, hold.Owner, permitGuard); err != nil {
			p.t.Fatal(err)
		}
		return "ok"
	}, func(d *Data, now int64) string {
		d.Seal(Env{Now: now, Second: 1000}, token, owner, modelGuard, Mutations{})
		return "ok"
	})
}

func (p *famDiff) refresh(rng *rand.Rand, hold script.Hold, mode byte, owner, id int, cover map[string]int) {
	token := diffToken(rng, p.m)
	g, mg := permitGuard, modelGuard
	if rng.IntN(3) == 0 {
		g, mg = recoveringGuard, recoveringModelGuard
	}
	_, had := p.m.Fam.Hold(id)
	beside := p.m.Fam.OK && !had
	p.step(fmt.Sprintf("refresh %c %s %s token %d guard %c", mode, hold.Owner, hold.ID, token, g.Mode), func() string {
		r, err := script.FamilyRefresh(famKeys, &hold, token, famTTL*time.Millisecond).Run(p.ctx, goredis.New(p.c), g)
		if err != nil {
			if redis.HasErrorPrefix(err, "REDLOCK_KIND") || redis.HasErrorPrefix(err, "WRONGTYPE") {
				return "kind"
			}
			p.t.Fatal(err)
		}
		cover[fmt.Sprintf("refresh %d", r)]++
		if r == script.Reseeded && beside {
			cover["re-seed beside other holds"]++
		}
		return strconv.Itoa(int(r))
	}, func(d *Data, now int64) string {
		r := d.FamRefresh(Env{Now: now, Second: 1000}, mode, owner, id, famTTL, token, mg, p.mut)
		if r == ScriptError {
			return "kind"
		}
		return strconv.Itoa(r)
	})
}

func (p *famDiff) release(rng *rand.Rand, hold script.Hold, mode byte, owner, id int, cover map[string]int) {
	token := diffToken(rng, p.m)
	before := p.m.Fence
	p.step(fmt.Sprintf("release %c %s %s token %d", mode, hold.Owner, hold.ID, token), func() string {
		rt := script.Retire{Fence: famKeys.Fence, Token: token, Guard: permitGuard}
		r, err := script.FamilyReleaseCall(famKeys.Lock, hold, rt, "", false).Release(p.ctx, goredis.New(p.c))
		if err != nil {
			if redis.HasErrorPrefix(err, "REDLOCK_KIND") || redis.HasErrorPrefix(err, "WRONGTYPE") {
				return "kind"
			}
			p.t.Fatal(err)
		}
		return fmt.Sprint(r.Deleted)
	}, func(d *Data, now int64) string {
		deleted, _, ok := d.FamRelease(Env{Now: now, Second: 1000}, mode, owner, id, token, false, modelGuard, p.mut)
		if !ok {
			return "kind"
		}
		return fmt.Sprint(deleted)
	})
	if p.m.Fence != before && token > 0 {
		cover["release retired the token"]++
	}
}

// fault ages a hold, lets the counter expire, or clears the name (and
// now and then puts a plain lock on it).
func (p *famDiff) fault(rng *rand.Rand, hold script.Hold, id, op int, cover map[string]int) {
	switch {
	case op < 22:
		// A hold expires: its field is aged on both sides.
		now := p.now()
		if _, ok := p.m.Fam.Hold(id); !ok || p.m.Lock.Owner != 0 {
			return
		}
		if err := p.c.HSet(p.ctx, famKeys.Lock, "h:"+hold.ID, now-1000).Err(); err != nil {
			p.t.Fatal(err)
		}
		p.m.Fam.setHold(id, now-1000)
		cover["aged"]++
	case op < 24:
		// The counter expires.
		if err := p.c.Del(p.ctx, famKeys.Fence).Err(); err != nil {
			p.t.Fatal(err)
		}
		p.m.Fence = Counter{}
		cover["counter expired"]++
	default:
		// Everything on the name goes (the holds, the marks), and now
		// and then a plain lock takes it.
		if err := p.c.Del(p.ctx, famKeys.Lock, keys.Waiters(famKeys.Lock), famKeys.Lock+":wwait").Err(); err != nil {
			p.t.Fatal(err)
		}
		plain := p.m.Lock.Owner != 0
		p.m.Lock, p.m.Fam, p.m.Waiters, p.m.WWait = Key{}, Family{}, Mark{}, Mark{}
		if !plain && rng.IntN(3) == 0 {
			now := p.now()
			if err := p.c.Set(p.ctx, famKeys.Lock, "v", time.Minute).Err(); err != nil {
				p.t.Fatal(err)
			}
			p.m.Lock = Key{Owner: 1, Exp: now + 60_000}
			cover["plain"]++
		}
	}
}
