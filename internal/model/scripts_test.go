package model

import (
	"context"
	"flag"
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

var diffSeed = flag.Uint64("diffseed", 0, "seed of TestModelMatchesScripts and TestPermitModelMatchesScripts (0: the run's, $REDLOCK_MODEL_SEED or drawn at random)")

// diffSeedOf returns the differential tests' seed: -diffseed, else the
// run's (runSeed), logged so that a failure can be replayed.
func diffSeedOf(t *testing.T) uint64 {
	t.Helper()
	seed := *diffSeed
	if seed == 0 {
		seed = seedOf(t)
	}
	t.Logf("seed %d (replay: -args -diffseed %d, or %s=%d)", seed, seed, seedEnv, seed)
	return seed
}

// diffKeys are the keys of the one lock the differential test uses.
var diffKeys = script.Keys{Lock: "{d}", Fence: "{d}:fence", Epoch: "{d}:epoch"}

// otherRun is the run_id that the test writes into the record to make it
// look written by another process (as script_test.go's otherProcess).
const otherRun = "0123456789abcdef"

// diffNode is the real server the test currently talks to, and the model
// of its data.
type diffNode struct {
	srv  *redistest.Server
	c    *redis.Client
	data Data
}

// diff drives one real node and its model side by side.
type diff struct {
	t     *testing.T
	ctx   context.Context
	rng   *rand.Rand
	nodes [2]*diffNode // nodes[0] is the master in use; nodes[1] its replica
	runs  map[string]int
	cover map[string]int
	log   []string // the last operations, for a failure's report
	t1    int64    // the node time read right after the current operation
	// mut is the twin's mutation (TestTwinMutantsDisagree); failed, when
	// set, is where a disagreement is reported instead of failing t.
	mut    Mutations
	failed *string
}

// run maps a run_id to the model's run number.
func (d *diff) run(id string) int {
	if n, ok := d.runs[id]; ok {
		return n
	}
	d.runs[id] = len(d.runs) + 1
	return d.runs[id]
}

// serverMs is the node's clock (TIME), in milliseconds.
func (d *diff) serverMs(c *redis.Client) int64 {
	tm, err := c.Time(d.ctx).Result()
	if err != nil {
		d.t.Fatal(err)
	}
	return tm.UnixMilli()
}

// env reads what the scripts read from INFO: the run id, the uptime and
// whether the node was a replica since its process started.
func (d *diff) env(c *redis.Client) Env {
	info, err := c.Info(d.ctx, "server", "replication").Result()
	if err != nil {
		d.t.Fatal(err)
	}
	field := func(name string) string {
		_, v, _ := strings.Cut(info, "\r\n"+name+":")
		v, _, _ = strings.Cut(v, "\r\n")
		return v
	}
	up, _ := strconv.ParseInt(field("uptime_in_seconds"), 10, 64)
	return Env{Run: d.run(field("run_id")), Uptime: up, Second: 1000,
		Replica: strings.Trim(field("master_replid2"), "0") != ""}
}

// scriptRun bounds, in ms, how long a script runs: how far the clock its
// commands read (Now) may be ahead of the time its keys expire at (KeyTime).
// The window [t0, t1] itself is not bounded: on a loaded machine the round
// trips around a script take 100 ms and more, and an operation that slow
// is still compared (it failed the comparison when the window was cut to
// 30 ms).
const scriptRun = 30

// candidates are the environments in which the model may have run a
// script that started at node time t0 or later and ended by t1: keys
// expire at the script's start, TIME may read a later millisecond, and the
// uptime may tick.
func candidates(base Env, t0, t1 int64) []Env {
	var out []Env
	for up := base.Uptime; up <= base.Uptime+1; up++ {
		for k := t0; k <= t1; k++ {
			for n := k; n <= min(t1, k+scriptRun); n++ {
				e := base
				e.Uptime, e.Now, e.KeyTime = up, n, k
				out = append(out, e)
			}
		}
	}
	return out
}

// realState is one node's keys as read back after an operation.
type realState struct {
	t0, t1 int64 // node time before and after reading
	vals   [4]string
	exists [4]bool
	exp    [4]int64 // PEXPIRETIME
	rec    map[string]string
}

var stateKeys = [4]string{diffKeys.Lock, diffKeys.Fence, keys.Waiters(diffKeys.Lock), keys.Trusted(diffKeys.Epoch)}

func (d *diff) read(c *redis.Client) realState {
	var st realState
	st.t0 = d.serverMs(c)
	pipe := c.Pipeline()
	var gets [4]*redis.StringCmd
	var ttls [4]*redis.Cmd
	for i, k := range stateKeys {
		gets[i] = pipe.Get(d.ctx, k)
		ttls[i] = pipe.Do(d.ctx, "PEXPIRETIME", k)
	}
	rec := pipe.HGetAll(d.ctx, diffKeys.Epoch)
	if _, err := pipe.Exec(d.ctx); err != nil && err != redis.Nil {
		d.t.Fatal(err)
	}
	st.t1 = d.serverMs(c)
	for i := range stateKeys {
		v, err := gets[i].Result()
		st.vals[i], st.exists[i] = v, err == nil
		st.exp[i], _ = ttls[i].Int64()
	}
	st.rec = rec.Val()
	return st
}

// matches compares the model's data with the node's keys: values exactly,
// expiries within slack ms of the node's (a script computes them from the
// clock when it runs the write, which may be another millisecond than its
// TIME: acquire.lua sets the lock before it reads TIME to seed a counter).
// The model's expiries are then set to the node's.
func (d *diff) matches(m *Data, st realState, slack int64) string {
	type key struct {
		ok  bool
		val string
		exp int64
	}
	owner := ""
	if m.Lock.Owner != 0 {
		owner = "v" + strconv.Itoa(m.Lock.Owner)
	}
	exps := [4]*int64{&m.Lock.Exp, &m.Fence.Exp, &m.Waiters.Exp, &m.Ok.Exp}
	model := [4]key{
		{m.Lock.Owner != 0, owner, m.Lock.Exp},
		{m.Fence.OK, strconv.FormatInt(m.Fence.V, 10), m.Fence.Exp},
		{m.Waiters.OK, "1", m.Waiters.Exp},
		{m.Ok.OK, fmt.Sprintf("%d:%d", m.Ok.MaxTTL, m.Ok.Floor), m.Ok.Exp},
	}
	for i, k := range model {
		// Redis keeps a key while now <= its expiry.
		present := k.ok && k.exp >= st.t0
		switch {
		case st.exists[i] && !present:
			return fmt.Sprintf("%s: node has %q (until %d), model none (%+v)", stateKeys[i], st.vals[i], st.exp[i], k)
		case st.exists[i] && st.vals[i] != k.val:
			return fmt.Sprintf("%s: node has %q, model %q", stateKeys[i], st.vals[i], k.val)
		case st.exists[i] && (k.exp < st.exp[i]-slack || k.exp > st.exp[i]+slack):
			return fmt.Sprintf("%s: node expires it at %d, model at %d", stateKeys[i], st.exp[i], k.exp)
		case !st.exists[i] && present && k.exp > st.t1:
			return fmt.Sprintf("%s: node has none, model %q until %d (read at %d)", stateKeys[i], k.val, k.exp, st.t1)
		}
		if st.exists[i] {
			*exps[i] = st.exp[i]
		}
	}
	want := map[string]string{}
	if r := m.Rec; r.OK {
		for id, n := range d.runs {
			if n == r.Run {
				want["run"] = id
			}
		}
		want["check"] = strconv.FormatInt(r.Check, 10)
		if r.Kind != 0 {
			want["base"] = strconv.FormatInt(r.Base, 10)
			want["maxttl"] = strconv.FormatInt(r.MaxTTL, 10)
			want["until"] = strconv.FormatInt(r.Until, 10)
			want["kind"] = map[byte]string{KindNew: "new", KindRestart: "restart", KindFailover: "failover"}[r.Kind]
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(st.rec) {
		return fmt.Sprintf("record: node %v, model %v", st.rec, want)
	}
	return ""
}

// step runs one operation on the node and on every candidate model, and
// keeps the first model whose reply and data match the node's.
//
// d.t1 is the node time read after the operation; model may use it.
func (d *diff) step(name string, real func(c *redis.Client) string, model func(d *Data, env Env) (reply, branch string)) {
	n := d.nodes[0]
	base := d.env(n.c)
	t0 := d.serverMs(n.c)
	got := real(n.c)
	t1 := d.serverMs(n.c)
	d.t1 = t1
	st := d.read(n.c)
	d.log = append(d.log, fmt.Sprintf("t=[%d,%d] %s: %s", t0, t1, name, got))
	if len(d.log) > 12 {
		d.log = d.log[1:]
	}
	var first, firstState string
	for _, env := range candidates(base, t0, t1) {
		m := n.data
		want, branch := model(&m, env)
		if want != got {
			if first == "" {
				first = fmt.Sprintf("model at now=%d: %s", env.Now, want)
			}
			continue
		}
		if msg := d.matches(&m, st, t1-t0); msg != "" {
			if firstState == "" {
				firstState = msg
			}
			continue
		}
		n.data = m
		d.cover[branch]++
		return
	}
	msg := fmt.Sprintf("the model and the scripts disagree on %s\nnode: %s\n%s\n%s\nmodel before: %+v\nlast operations:\n  %s",
		name, got, first, firstState, n.data, strings.Join(d.log, "\n  "))
	if d.failed != nil {
		*d.failed = msg
		return
	}
	d.t.Fatal(msg)
}

// token picks a lock's token for a refresh or a release around the
// node's counter (the model's, as it is), or 0 (a clean-up's release).
func (d *diff) token() int64 {
	v := d.nodes[0].data.Fence.V
	return []int64{v - 1, v, v, v + 1, 0}[d.rng.IntN(5)]
}

func (d *diff) guard() (script.Guard, Guard) {
	g := Guard{
		MaxTTL:   []int64{100, 250}[d.rng.IntN(2)],
		Delta:    []int64{20, 60}[d.rng.IntN(2)],
		Mode:     "11p0"[d.rng.IntN(4)],
		FenceTTL: []int64{150, 1000}[d.rng.IntN(2)],
	}
	ms := func(x int64) time.Duration { return time.Duration(x) * time.Millisecond }
	return script.Guard{MaxTTL: ms(g.MaxTTL), Delta: ms(g.Delta), Mode: g.Mode, FenceTTL: ms(g.FenceTTL)}, g
}

func (d *diff) acquire() {
	sg, g := d.guard()
	v := 1 + d.rng.IntN(3)
	ttl := []int64{30, 80, 250}[d.rng.IntN(3)]
	name := fmt.Sprintf("acquire v%d ttl %d guard %c maxttl %d delta %d fencettl %d", v, ttl, g.Mode, g.MaxTTL, g.Delta, g.FenceTTL)
	var held int64 = -1 // the node's holder TTL, when held
	d.step(name, func(c *redis.Client) string {
		a, err := script.Acquire(d.ctx, goredis.New(c), diffKeys, "v"+strconv.Itoa(v), time.Duration(ttl)*time.Millisecond, sg, script.Ack{})
		if err != nil {
			d.t.Fatal(err)
		}
		switch a.Status {
		case script.Taken:
			return fmt.Sprintf("taken %d", a.Token)
		case script.Held:
			held = a.HolderTTL.Milliseconds()
			return fmt.Sprintf("held %d", held)
		}
		return fmt.Sprintf("recovering %d", a.Recovering.Milliseconds())
	}, func(m *Data, env Env) (string, string) {
		m.expire(env)
		path := acquirePath(*m, env, g)
		status, x := m.Acquire(env, v, ttl, g, Mutations{})
		// PTTL reads the clock when it runs, up to t1.
		if status == Held && held <= x && held >= x-(d.t1-env.Now) {
			x = held
		}
		return fmt.Sprintf("%s %d", []string{"held", "taken", "recovering"}[status], x), "acquire: " + path
	})
}

// acquirePath names the branch of acquire.lua and epoch.lua a request
// takes on m (for the coverage report).
func acquirePath(m Data, env Env, g Guard) string {
	fast := g.Mode != '0' && m.Ok.OK && m.Ok.MaxTTL >= g.MaxTTL
	mm := m
	rec, floor := mm.Epoch(env, g, Mutations{})
	var p string
	switch {
	case g.Mode == '0':
		p = "guard off, "
	case fast:
		p = "fast path, "
	case m.Rec.OK && m.Rec.Run != env.Run:
		p = "record of another process, "
	case !m.Rec.OK:
		p = "no record, "
	default:
		p = "record, "
	}
	switch {
	case rec > 0:
		return p + "recovering"
	case m.Lock.Owner == 0 && !m.Fence.OK:
		return p + "taken, counter seeded from the clock"
	case m.Lock.Owner == 0 && m.Fence.V < floor:
		return p + "taken, counter raised to the floor"
	case m.Lock.Owner == 0:
		return p + "taken, counter incremented"
	case m.Lock.Owner != 0 && g.Mode == 'p' && mm.Rec.Kind == KindRestart:
		return p + "held or retry ('p' after a restart)"
	}
	return p + "held or retry"
}

func (d *diff) fence() {
	sg, g := d.guard()
	n := &d.nodes[0].data
	token := []int64{n.Fence.V - 1, n.Fence.V, n.Fence.V + 1, n.Fence.V + 5000, 7}[d.rng.IntN(5)]
	d.step(fmt.Sprintf("fence %d fencettl %d", token, g.FenceTTL), func(c *redis.Client) string {
		if err := script.Fence(d.ctx, goredis.New(c), diffKeys, token, sg); err != nil {
			d.t.Fatal(err)
		}
		return "ok"
	}, func(m *Data, env Env) (string, string) {
		m.expire(env)
		branch := "fence: counter kept"
		switch {
		case !m.Fence.OK:
			branch = "fence: missing counter seeded"
		case m.Fence.V < token:
			branch = "fence: counter raised"
		}
		m.Raise(env, token, g, Mutations{})
		return "ok", branch
	})
}

func (d *diff) refresh() {
	sg, g := d.guard()
	v := 1 + d.rng.IntN(3)
	ttl := []int64{30, 80, 250}[d.rng.IntN(3)]
	token := d.token()
	d.step(fmt.Sprintf("refresh v%d token %d ttl %d guard %c maxttl %d delta %d", v, token, ttl, g.Mode, g.MaxTTL, g.Delta), func(c *redis.Client) string {
		r, err := script.Refresh(d.ctx, goredis.New(c), diffKeys, "v"+strconv.Itoa(v), token, time.Duration(ttl)*time.Millisecond, sg)
		if err != nil {
			d.t.Fatal(err)
		}
		return strconv.Itoa(int(r))
	}, func(m *Data, env Env) (string, string) {
		r := m.Refresh(env, v, ttl, token, g, d.mut)
		return strconv.Itoa(r), "refresh: " + refreshName[r]
	})
}

func (d *diff) release() {
	sg, g := d.guard()
	v := 1 + d.rng.IntN(3)
	publish := d.rng.IntN(2) == 1
	token := d.token()
	d.step(fmt.Sprintf("release v%d token %d publish %v fencettl %d", v, token, publish, g.FenceTTL), func(c *redis.Client) string {
		r, err := script.Release(d.ctx, goredis.New(c), diffKeys.Lock, "v"+strconv.Itoa(v), script.Retire{Fence: diffKeys.Fence, Token: token, Guard: sg}, publish, false)
		if err != nil {
			d.t.Fatal(err)
		}
		return fmt.Sprint(r.Deleted, r.Receivers)
	}, func(m *Data, env Env) (string, string) {
		m.expire(env)
		retire := retireBranch(*m, v, token)
		deleted, published := m.Release(env, v, token, publish, g, d.mut)
		// Nobody subscribes: the mark's removal is compared on the keys.
		return fmt.Sprint(deleted, 0), fmt.Sprintf("release: deleted %v, mark taken %v, %s", deleted, published, retire)
	})
}

// retireBranch names what a release of value v with token does to the
// counter on m (for the coverage report).
func retireBranch(m Data, v int, token int64) string {
	switch {
	case m.Lock.Owner != 0 && m.Lock.Owner != v:
		return "another owner's"
	case token == 0:
		return "no token"
	case !m.Fence.OK:
		return "missing counter seeded above the token"
	case m.Fence.V == token:
		return "counter at the token incremented"
	case m.Fence.V < token:
		return "counter raised above the token"
	}
	return "counter above the token incremented"
}

// otherProcess makes the record look written by another process, with a
// check time in the past, now, or in the node's future (a clock ahead).
func (d *diff) otherProcess() {
	n := d.nodes[0]
	if !n.data.Rec.OK {
		return
	}
	check := d.serverMs(n.c) + []int64{-100000, 0, 10000}[d.rng.IntN(3)]
	if err := n.c.HSet(d.ctx, diffKeys.Epoch, "run", otherRun, "check", check).Err(); err != nil {
		d.t.Fatal(err)
	}
	if err := n.c.Del(d.ctx, keys.Trusted(diffKeys.Epoch)).Err(); err != nil {
		d.t.Fatal(err)
	}
	n.data.Rec.Run, n.data.Rec.Check, n.data.Ok = d.run(otherRun), check, OkKey{}
	d.cover["another process's record"]++
	d.log = append(d.log, fmt.Sprintf("another process's record, check %d", check))
}

// restart restarts the node without its data.
func (d *diff) restart() {
	n := d.nodes[0]
	if err := n.srv.Restart(); err != nil {
		d.t.Fatal(err)
	}
	n.data = Data{}
	d.cover["restart without data"]++
	d.log = append(d.log, "restart")
}

// promote fails over to the replica: it catches up, the old master
// stops taking writes, the replica is promoted with REPLICAOF NO ONE after
// more than any delta (the documented assumption), and the old master
// becomes its replica.
func (d *diff) promote() {
	m, r := d.nodes[0], d.nodes[1]
	// The replica reconnects on its own after a restart of the master
	// (and then syncs the master's data set in full): wait until it has a
	// marker written now.
	d.follow()
	mark := strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := m.c.Set(d.ctx, "{d}:sync", mark, 0).Err(); err != nil {
		d.t.Fatal(err)
	}
	for i := 0; r.c.Get(d.ctx, "{d}:sync").Val() != mark; i++ {
		if i == 1200 {
			d.t.Fatal("the replica never caught up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(80 * time.Millisecond)
	if err := r.c.Do(d.ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		d.t.Fatal(err)
	}
	// The replica has the master's data but not the fast-path key; its
	// keys expire at the same absolute times (one machine, one clock).
	r.data = m.data
	r.data.Ok = OkKey{}
	d.nodes[0], d.nodes[1] = r, m
	d.follow()
	d.cover["promotion"]++
	d.log = append(d.log, "promotion")
}

// follow makes nodes[1] a replica of nodes[0] and waits for its link.
func (d *diff) follow() {
	r := d.nodes[1]
	if err := r.c.Do(d.ctx, "REPLICAOF", "127.0.0.1", d.nodes[0].srv.Port()).Err(); err != nil {
		d.t.Fatal(err)
	}
	for i := 0; ; i++ {
		info, err := r.c.Info(d.ctx, "replication").Result()
		if err != nil {
			d.t.Fatal(err)
		}
		if strings.Contains(info, "master_link_status:up") {
			return
		}
		if i == 1200 { // 30 s: a full sync on a loaded machine
			d.t.Fatalf("replica link never came up: %s", info)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestModelMatchesScripts runs random operations on a real redis-server
// through internal/script and on the model's node side by side: acquires,
// fences, refreshes and releases with various guards, max TTLs, deltas,
// TTLs and values; pauses that let keys expire, checks go stale and
// recoveries end; another process's record; restarts without data; and
// promotions of a replica. After each operation the replies must be equal
// (tokens, holder TTLs, recovery times, refresh and release results) and
// so must every key: the lock, the counter, the waiters mark, the fast-path
// key and every field of the epoch record. The model is fed the node's
// clock: it runs with every millisecond between the TIME read before the
// operation and the one after, and the first run that agrees is kept.
func TestModelMatchesScripts(t *testing.T) {
	// No delay before a diskless full sync (5 s by default), which a
	// replica needs after its master restarted; and a replica loads it
	// without writing dump.rdb, which a later restart would load.
	servers := redistest.Start(t, 2, redistest.Options{Args: []string{
		"--repl-diskless-sync-delay", "0", "--repl-diskless-load", "swapdb"}})
	seed := diffSeedOf(t)
	d := &diff{t: t, ctx: context.Background(), rng: rand.New(rand.NewPCG(seed, 0xd1ff)),
		runs: map[string]int{}, cover: map[string]int{}}
	for i, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		d.nodes[i] = &diffNode{srv: s, c: c}
	}
	d.follow()
	deadline := time.Now().Add(15 * time.Second)
	ops := 0
	for ; ops < 600 && time.Now().Before(deadline); ops++ {
		switch x := d.rng.IntN(100); {
		case x < 40:
			d.acquire()
		case x < 50:
			d.fence()
		case x < 63:
			d.refresh()
		case x < 76:
			d.release()
		case x < 94:
			time.Sleep(time.Duration([]int{1, 5, 25, 70}[d.rng.IntN(4)]) * time.Millisecond)
		case x < 97:
			d.otherProcess()
		case x < 98:
			if err := d.nodes[0].c.Del(d.ctx, diffKeys.Epoch, keys.Trusted(diffKeys.Epoch)).Err(); err != nil {
				t.Fatal(err)
			}
			d.nodes[0].data.Rec, d.nodes[0].data.Ok = Record{}, OkKey{}
			d.cover["record deleted"]++
			d.log = append(d.log, "record deleted")
		case x < 99 || ops%2 == 0:
			d.promote()
		default:
			d.restart()
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range d.cover {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "\n  %5d  %s", d.cover[k], k)
	}
	t.Logf("%d operations, seed %d; branches covered:%s", ops, seed, b.String())
	if ops < 200 {
		t.Errorf("only %d operations before the deadline", ops)
	}
	// The retired token's branches, which a twin without them would get
	// wrong (TestTwinMutantsDisagree).
	for _, branch := range []string{"refresh: " + refreshName[Retired], "counter at the token incremented", "counter raised above the token"} {
		if !covered(d.cover, branch) {
			t.Errorf("branch %q never taken", branch)
		}
	}
}

// covered reports whether some branch of cover names what.
func covered(cover map[string]int, what string) bool {
	for k, n := range cover {
		if n > 0 && strings.Contains(k, what) {
			return true
		}
	}
	return false
}
