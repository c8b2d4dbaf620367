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
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/internal/script"
)

// permitDiff drives the permit scripts on a real node and the model
// (permit.go) side by side.
type permitDiff struct {
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

var (
	permitKeys  = script.Keys{Lock: "{s}", Fence: "{s}:fence", Epoch: "{s}:epoch"}
	permitGuard = script.Guard{MaxTTL: time.Minute, Delta: 50 * time.Millisecond, Mode: '0', FenceTTL: time.Hour}.Prepared()
	modelGuard  = Guard{MaxTTL: 60_000, Delta: 50, Mode: '0', FenceTTL: 3_600_000}
)

// permitTTL keeps permits live for the whole test: expiry is exercised by
// aging fields explicitly (age), on both sides at once.
const permitTTL = 60_000

func (p *permitDiff) now() int64 {
	tm, err := p.c.Time(p.ctx).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	return tm.UnixMilli()
}

// state is the semaphore's hash and counter as a string, with expiries
// shown only as live or not at node time now (the scripts write them from
// the clock they read, a millisecond the model can only bracket).
func stateOf(mode string, k string, fields map[string]int64, counter string, plain bool, now int64) string {
	var hs []string
	for id, exp := range fields {
		hs = append(hs, fmt.Sprintf("%s:%v", id, exp > now))
	}
	slices.Sort(hs)
	return fmt.Sprintf("plain=%v mode=%q k=%q holds=%v counter=%s", plain, mode, k, hs, counter)
}

func (p *permitDiff) real(now int64) string {
	t, err := p.c.Type(p.ctx, permitKeys.Lock).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	counter, _ := p.c.Get(p.ctx, permitKeys.Fence).Result()
	if t == "string" {
		return stateOf("", "", nil, counter, true, now)
	}
	all, err := p.c.HGetAll(p.ctx, permitKeys.Lock).Result()
	if err != nil {
		p.t.Fatal(err)
	}
	fields := map[string]int64{}
	for f, v := range all {
		if id, ok := strings.CutPrefix(f, "h:"); ok {
			fields[id], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return stateOf(all["mode"], all["k"], fields, counter, false, now)
}

func modelState(d Data, now int64) string {
	counter := ""
	if d.Fence.OK {
		counter = strconv.FormatInt(d.Fence.V, 10)
	}
	if d.Lock.Owner != 0 {
		return stateOf("", "", nil, counter, true, now)
	}
	fields := map[string]int64{}
	mode, k := "", ""
	if f := d.Fam; f.OK {
		mode, k = string(f.Mode), strconv.Itoa(f.K)
		for _, h := range f.Holds {
			if h.ID != 0 {
				fields["p"+strconv.Itoa(h.ID)] = h.Exp
			}
		}
	}
	return stateOf(mode, k, fields, counter, false, now)
}

// step runs op on the node, then the model at every node time the script
// may have read, and keeps the first whose reply and state match.
func (p *permitDiff) step(name string, real func() string, model func(d *Data, now int64) string) {
	t0 := p.now()
	got := real()
	t1 := p.now()
	after := p.real(t1)
	p.log = append(p.log, fmt.Sprintf("t=[%d,%d] %s: %s -> %s", t0, t1, name, got, after))
	if len(p.log) > 10 {
		p.log = p.log[1:]
	}
	for now := t0; now <= t1; now++ { // however slow the operation, on a loaded machine
		d := p.m
		if want := model(&d, now); want != got {
			continue
		}
		if modelState(d, t1) != after {
			continue
		}
		p.m = d
		return
	}
	d := p.m
	want := model(&d, t0)
	msg := fmt.Sprintf("model and scripts disagree on %s\nnode:  %s, %s\nmodel: %s, %s\nlast operations:\n  %s",
		name, got, after, want, modelState(d, t1), strings.Join(p.log, "\n  "))
	if p.failed != nil {
		*p.failed = msg
		return
	}
	p.t.Fatal(msg)
}

// TestPermitModelMatchesScripts runs random permit acquires, refreshes
// (with tokens around the counter, and on a node that recovers for some),
// releases (retiring tokens around the counter), expiries (a field aged
// on both sides), changes of k and plain locks on the name against the
// real scripts and the model: replies, tokens, and the hash's mode, k and
// live permits, and the counter must agree.
func TestPermitModelMatchesScripts(t *testing.T) {
	srv := redistest.Start(t, 1)[0].Client()
	defer srv.Close()
	p := &permitDiff{t: t, ctx: context.Background(), c: srv}
	rng := rand.New(rand.NewPCG(diffSeedOf(t), 15))
	cover := map[string]int{}
	p.run(rng, 600, cover)
	t.Logf("coverage: %v", cover)
	for _, branch := range []string{"taken", "full", "aged", "plain", "kind", "permits", "refresh 1", "refresh 2", "refresh 3", "refresh 4", "release retired the token"} {
		if cover[branch] == 0 {
			t.Errorf("branch %q never taken", branch)
		}
	}
}

// run plays n random operations (fewer once a disagreement is reported).
func (p *permitDiff) run(rng *rand.Rand, n int, cover map[string]int) {
	for i := 0; i < n && (p.failed == nil || *p.failed == ""); i++ {
		id := 1 + rng.IntN(6)
		hold := script.Hold{Mode: 's', ID: "p" + strconv.Itoa(id)}
		k := 3
		if rng.IntN(10) == 0 {
			k = 2
		}
		hold.Permits = k
		switch op := rng.IntN(20); {
		case op < 8:
			p.acquire(hold, k, id, cover)
		case op < 12:
			p.refresh(rng, hold, k, id, cover)
		case op < 16:
			p.release(rng, hold, id, cover)
		default:
			p.fault(hold, id, op, cover)
		}
	}
}

func (p *permitDiff) acquire(hold script.Hold, k, id int, cover map[string]int) {
	p.step(fmt.Sprintf("acquire %s of %d", hold.ID, k), func() string {
		a, err := script.PermitAcquireCall(permitKeys, hold, permitTTL*time.Millisecond, permitGuard).Acquire(p.ctx, goredis.New(p.c), script.Ack{})
		switch {
		case redis.HasErrorPrefix(err, "REDLOCK_KIND"):
			cover["kind"]++
			return "kind"
		case redis.HasErrorPrefix(err, "REDLOCK_PERMITS"):
			cover["permits"]++
			return "permits"
		case err != nil:
			p.t.Fatal(err)
		case a.Status == script.Taken:
			cover["taken"]++
			return fmt.Sprintf("taken %d", a.Token)
		}
		cover["full"]++
		return "full"
	}, func(d *Data, now int64) string {
		status, n := d.PermAcquire(Env{Now: now, Second: 1000}, k, id, permitTTL, modelGuard, Mutations{})
		switch status {
		case KindError:
			return "kind"
		case PermitsError:
			return "permits"
		case Taken:
			return fmt.Sprintf("taken %d", n)
		}
		return "full"
	})
}

func (p *permitDiff) refresh(rng *rand.Rand, hold script.Hold, k, id int, cover map[string]int) {
	token := diffToken(rng, p.m)
	g, mg := permitGuard, modelGuard
	if rng.IntN(3) == 0 {
		g, mg = recoveringGuard, recoveringModelGuard
	}
	p.step(fmt.Sprintf("refresh %s of %d token %d guard %c", hold.ID, k, token, g.Mode), func() string {
		r, err := script.PermitRefresh(permitKeys, &hold, token, permitTTL*time.Millisecond).Run(p.ctx, goredis.New(p.c), g)
		if err != nil {
			if redis.HasErrorPrefix(err, "REDLOCK_KIND") {
				return "kind"
			}
			p.t.Fatal(err)
		}
		cover[fmt.Sprintf("refresh %d", r)]++
		return strconv.Itoa(int(r))
	}, func(d *Data, now int64) string {
		r := d.PermRefresh(Env{Now: now, Second: 1000}, k, id, permitTTL, token, mg, p.mut)
		if r == ScriptError {
			return "kind"
		}
		return strconv.Itoa(r)
	})
}

func (p *permitDiff) release(rng *rand.Rand, hold script.Hold, id int, cover map[string]int) {
	token := diffToken(rng, p.m)
	before := p.m.Fence
	p.step(fmt.Sprintf("release %s token %d", hold.ID, token), func() string {
		rt := script.Retire{Fence: permitKeys.Fence, Token: token, Guard: permitGuard}
		r, err := script.PermitReleaseCall(permitKeys.Lock, hold, rt, "", false).Release(p.ctx, goredis.New(p.c))
		if err != nil {
			if redis.HasErrorPrefix(err, "REDLOCK_KIND") {
				return "kind"
			}
			p.t.Fatal(err)
		}
		return fmt.Sprint(r.Deleted)
	}, func(d *Data, now int64) string {
		deleted, _, ok := d.PermRelease(Env{Now: now, Second: 1000}, id, token, false, modelGuard, p.mut)
		if !ok {
			return "kind"
		}
		return fmt.Sprint(deleted)
	})
	if p.m.Fence != before && token > 0 {
		cover["release retired the token"]++
	}
}

// fault ages a permit, or puts a plain lock on the name (or ends it).
func (p *permitDiff) fault(hold script.Hold, id, op int, cover map[string]int) {
	if op < 19 {
		// The permit expires: its field is aged on both sides.
		now := p.now()
		if _, ok := p.m.Fam.Hold(id); !ok || p.m.Lock.Owner != 0 {
			return
		}
		if err := p.c.HSet(p.ctx, permitKeys.Lock, "h:"+hold.ID, now-1000).Err(); err != nil {
			p.t.Fatal(err)
		}
		p.m.Fam.setHold(id, now-1000)
		cover["aged"]++
		return
	}
	// A plain lock on the name, in place of any permits (every permit
	// gone at once), or its end. Taking the name whether or not permits
	// are held makes every other such step a plain lock: when it waited
	// for a moment with no permit held, some seeds never took it in 600
	// steps.
	if p.m.Lock.Owner != 0 {
		p.c.Del(p.ctx, permitKeys.Lock)
		p.m.Lock, p.m.Fam = Key{}, Family{}
		return
	}
	now := p.now()
	p.c.Set(p.ctx, permitKeys.Lock, "v", time.Minute)
	p.m.Lock, p.m.Fam = Key{Owner: 1, Exp: now + 60_000}, Family{}
	cover["plain"]++
}
