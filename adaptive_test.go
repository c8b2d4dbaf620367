package redlock

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/adaptive"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/redistest"
)

// eventuallyWithin polls cond every 20 ms for up to d.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inBounds fails the test when ttl is outside [a.Min, a.Max].
func inBounds(t *testing.T, what string, ttl time.Duration, a AdaptiveTTL) {
	t.Helper()
	if ttl < a.Min || ttl > a.Max {
		t.Errorf("%s: TTL %v outside [%v, %v]", what, ttl, a.Min, a.Max)
	}
}

func TestAdaptiveTTLBadInput(t *testing.T) {
	cl := startNodes(t, 1)
	ok := AdaptiveTTL{Min: time.Second, Max: 10 * time.Second}
	with := func(f func(*AdaptiveTTL)) AdaptiveTTL {
		a := ok
		f(&a)
		return a
	}
	cases := []struct {
		name string
		a    AdaptiveTTL
		opts []Option
		want string
	}{
		{"zero", AdaptiveTTL{}, nil, "Min and Max are required"},
		{"zero max", with(func(a *AdaptiveTTL) { a.Max = 0 }), nil, "Min and Max are required"},
		{"negative min", with(func(a *AdaptiveTTL) { a.Min = -time.Second }), nil, "Min and Max are required"},
		{"min above max", with(func(a *AdaptiveTTL) { a.Min = 20 * time.Second }), nil, "Min 20s is above Max 10s"},
		{"min below limits.MinTTL", with(func(a *AdaptiveTTL) { a.Min = time.Millisecond }), nil, "below the minimum TTL"},
		{"max above max TTL", with(func(a *AdaptiveTTL) { a.Max = 2 * time.Minute }), nil, "above the deployment's maximum TTL"},
		{"max above WithMaxTTL given later", ok, []Option{WithMaxTTL(5 * time.Second)}, "above the deployment's maximum TTL"},
		{"min too short for node timeout", with(func(a *AdaptiveTTL) { a.Min = 100 * time.Millisecond }), []Option{WithNodeTimeout(time.Second)}, "adaptive TTL Min: redlock: invalid argument: per-node timeout"},
		{"small RTT multiple", with(func(a *AdaptiveTTL) { a.RTTMultiple = 2 }), nil, "RTTMultiple 2 must be at least 3"},
		{"negative RTT multiple", with(func(a *AdaptiveTTL) { a.RTTMultiple = -1 }), nil, "RTTMultiple -1"},
		{"negative contention", with(func(a *AdaptiveTTL) { a.ContentionHalf = -1 }), nil, "ContentionHalf -1"},
		{"negative interval", with(func(a *AdaptiveTTL) { a.SampleInterval = -time.Second }), nil, "SampleInterval -1s must be at least 10ms"},
		{"tiny interval", with(func(a *AdaptiveTTL) { a.SampleInterval = time.Nanosecond }), nil, "SampleInterval 1ns must be at least 10ms"},
		{"infinite RTT multiple", with(func(a *AdaptiveTTL) { a.RTTMultiple = math.Inf(1) }), nil, "RTTMultiple +Inf"},
		{"memory ratio above 1", with(func(a *AdaptiveTTL) { a.MemoryRatio = 1.5 }), nil, "MemoryRatio 1.5 is outside"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{WithAdaptiveTTL(tc.a)}, tc.opts...)
			c, err := New(cl.clients, opts...)
			if err == nil {
				_ = c.Close()
				t.Fatal("New accepted it")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrInvalid saying %q", err, tc.want)
			}
		})
	}

	t.Run("refresh interval not below Min", func(t *testing.T) {
		c := newClient(t, cl.clients, WithAdaptiveTTL(ok))
		_, err := c.Obtain(context.Background(), "interval", 5*time.Second, WithAutoRefresh(), WithRefreshInterval(time.Second))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "below the adaptive TTL's Min") {
			t.Fatalf("error %v: want ErrInvalid about Min", err)
		}
		_, err = c.All("interval-a", "interval-b").Obtain(context.Background(), 5*time.Second, WithRefreshInterval(time.Second))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "below the adaptive TTL's Min") {
			t.Fatalf("ObtainAll: error %v, want ErrInvalid about Min", err)
		}
		// WithFixedTTL takes the TTL as given, so only it bounds the interval.
		l, err := c.Obtain(context.Background(), "interval", 5*time.Second, WithAutoRefresh(), WithRefreshInterval(time.Second), WithFixedTTL())
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(context.Background())
	})

	t.Run("defaults filled in, option not shared", func(t *testing.T) {
		opt := WithAdaptiveTTL(ok)
		c1 := newClient(t, cl.clients, opt)
		c2 := newClient(t, cl.clients, opt, WithMaxTTL(20*time.Second))
		for _, c := range []*Client{c1, c2} {
			a := c.e.cfg.adaptive
			if a.RTTMultiple != adaptive.RTTMultiple || a.ContentionHalf != adaptive.ContentionHalf ||
				a.SampleInterval != adaptive.SampleInterval || a.MemoryRatio != adaptive.MemoryRatio {
				t.Fatalf("defaults not filled in: %+v", a)
			}
		}
	})
}

// TestAdaptiveTTLFollowsRTT injects latency between the Client and its
// nodes: the TTL of obtains and automatic refreshes rises to RTTMultiple
// × the round-trip time, and never above Max.
func TestAdaptiveTTLFollowsRTT(t *testing.T) {
	var (
		nodes   []redis.UniversalClient
		proxies []*faultproxy.Proxy
	)
	for _, s := range redistest.Start(t, 3) {
		p, err := faultproxy.New(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		proxies = append(proxies, p)
		rc := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	const latency = 50 * time.Millisecond // each way: a round trip takes at least 100 ms
	a := AdaptiveTTL{Min: 1500 * time.Millisecond, Max: 30 * time.Second, SampleInterval: 50 * time.Millisecond}
	capped := a
	capped.Max = 3 * time.Second
	rec := &eventRecorder{}
	// A node timeout that outlasts the injected round trip on a loaded
	// machine: the adaptive TTL does not change a WithNodeTimeout.
	c := newClient(t, nodes, WithAdaptiveTTL(a), WithHook(rec), WithNodeTimeout(time.Second))
	recCapped := &eventRecorder{}
	cc := newClient(t, nodes, WithAdaptiveTTL(capped), WithHook(recCapped), WithNodeTimeout(time.Second))
	ctx := context.Background()

	const base = 2 * time.Second
	// Measure the round trip without latency first: the p95 counts once
	// the window holds enough samples.
	c.e.sampler.start()
	eventuallyWithin(t, 20*time.Second, "an RTT p95 measured", func() bool { return c.e.adapt.RTTP95(time.Now()) > 0 })
	l, err := c.Obtain(ctx, "rtt-before", base)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	before := rec.lastObtain(t, "rtt-before")
	inBounds(t, "before", before.TTL, a)
	if before.TTL >= 40*2*latency {
		t.Fatalf("TTL %v (%v) before any latency was injected: loopback RTT p95 above 100 ms?", before.TTL, before.TTLReason)
	}
	t.Logf("before: TTL %v (%v), RTT p95 %v", before.TTL, before.TTLReason, c.e.adapt.RTTP95(time.Now()))

	for _, p := range proxies {
		p.SetLatency(latency)
	}
	for _, x := range []*Client{c, cc} {
		// Both samplers start with the first obtain: cc's now.
		x.e.sampler.start()
		eventuallyWithin(t, 20*time.Second, "RTT p95 reflects the injected latency", func() bool {
			return x.e.adapt.RTTP95(time.Now()) >= 2*latency
		})
	}

	l, err = c.Obtain(ctx, "rtt-after", base, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	after := rec.lastObtain(t, "rtt-after")
	t.Logf("after: TTL %v (%v), RTT p95 %v", after.TTL, after.TTLReason, c.e.adapt.RTTP95(time.Now()))
	inBounds(t, "after", after.TTL, a)
	if after.TTL < 40*2*latency || after.TTLReason != "rtt" || l.TTL() != after.TTL {
		t.Fatalf("with a %v round trip: TTL %v (%v), lock TTL %v; want at least %v, reason rtt",
			2*latency, after.TTL, after.TTLReason, l.TTL(), 40*2*latency)
	}
	// The keep-alive picks the TTL again for each refresh.
	eventuallyWithin(t, 3*after.TTL, "an automatic refresh", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.refreshs) > 0
	})
	rec.mu.Lock()
	r := rec.refreshs[0]
	rec.mu.Unlock()
	if r.Err != nil || !r.Auto || r.TTL < 40*2*latency || r.TTL > a.Max || r.TTLReason != "rtt" {
		t.Fatalf("automatic refresh %+v: want a TTL of at least %v, reason rtt", r, 40*2*latency)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Never above Max, however slow the nodes.
	l, err = cc.Obtain(ctx, "rtt-capped", base)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	e := recCapped.lastObtain(t, "rtt-capped")
	if e.TTL != capped.Max || e.TTLReason != "max" {
		t.Fatalf("capped client: TTL %v (%v), want Max %v (max)", e.TTL, e.TTLReason, capped.Max)
	}
}

// TestAdaptiveTTLFollowsContention queues waiters for a held name: the TTL
// of an obtain of that name falls with their number, and stays within the
// bounds; an uncontended name keeps the TTL asked for.
func TestAdaptiveTTLFollowsContention(t *testing.T) {
	cl := startNodes(t, 1)
	a := AdaptiveTTL{Min: 300 * time.Millisecond, Max: 10 * time.Second, SampleInterval: time.Hour}
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithAdaptiveTTL(a), WithHook(rec))
	holder := newClient(t, cl.clients)
	ctx := context.Background()
	const base = 4 * time.Second

	l, err := c.Obtain(ctx, "cold", base)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if e := rec.lastObtain(t, "cold"); e.TTL != base || e.TTLReason != "base" {
		t.Fatalf("uncontended: TTL %v (%v), want %v (base)", e.TTL, e.TTLReason, base)
	}

	held, err := holder.Obtain(ctx, "hot", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	key, _ := c.e.layout.redisKey("hot")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		wg   sync.WaitGroup
		errs = make(chan error, waiters)
	)
	for range waiters {
		wg.Go(func() {
			l, err := c.Obtain(wctx, "hot", base)
			if err != nil {
				errs <- err
				return
			}
			errs <- l.Release(ctx)
		})
	}
	eventuallyWithin(t, 10*time.Second, "the waiters queue", func() bool { return c.e.waits.queues.Waiting(key) == waiters })

	// One more attempt, while they wait: its TTL is at most
	// base / (1 + 6/4); with a base of 400 ms that is below Min.
	_, err = c.TryObtain(ctx, "hot", base)
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("TryObtain: %v, want ErrHeld", err)
	}
	e := rec.lastObtain(t, "hot")
	if limit := time.Duration(float64(base) / (1 + waiters/4.0)); e.TTL > limit || e.TTLReason != "contention" {
		t.Fatalf("with %d waiters: TTL %v (%v), want at most %v (contention)", waiters, e.TTL, e.TTLReason, limit)
	}
	inBounds(t, "contended", e.TTL, a)
	_, _ = c.TryObtain(ctx, "hot", 400*time.Millisecond)
	if e := rec.lastObtain(t, "hot"); e.TTL != a.Min || e.TTLReason != "min" {
		t.Fatalf("with %d waiters and a 400 ms base: TTL %v (%v), want Min %v (min)", waiters, e.TTL, e.TTLReason, a.Min)
	}

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	contended := 0
	for _, e := range rec.obtains {
		if e.Name != "hot" || e.Err != nil {
			continue
		}
		inBounds(t, "waiter", e.TTL, a)
		if e.TTL < base && e.TTLReason == "contention" {
			contended++
		}
	}
	if contended == 0 {
		t.Fatalf("no waiter obtained the lock with a TTL lowered for contention: %+v", rec.obtains)
	}
}

// seedTTL is the formula of seed 002 §4.2, which docs/adaptive-ttl.md
// compares with ours.
func seedTTL(base, rttP95 time.Duration, qpsDelta, memRatio float64) time.Duration {
	rtt := max(0.7, min(1.3, 1.5-float64(rttP95)/float64(time.Millisecond)/20))
	qps := max(0.4, 1-qpsDelta/5)
	mem := max(0.5, 1-(memRatio-0.7)*3)
	return time.Duration(float64(base) * rtt * qps * mem).Round(time.Millisecond)
}

// TestAdaptiveTTLAgainstSeedFormula computes the table of
// docs/adaptive-ttl.md: the seed's TTL and ours, with the default per-node
// timeout of each.
func TestAdaptiveTTLAgainstSeedFormula(t *testing.T) {
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New does no I/O
	defer node.Close()
	policy := func(t *testing.T) *adaptive.Policy {
		c, err := New([]redis.UniversalClient{node}, WithAdaptiveTTL(AdaptiveTTL{Min: limits.MinTTL, Max: time.Minute}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c.e.adapt
	}
	cases := []struct {
		name              string
		base, rtt         time.Duration
		mem               float64
		seed, seedTimeout time.Duration
		ours, oursTimeout time.Duration
		reason            string
	}{
		{"idle, fast LAN, memory at 30%", 10 * time.Second, time.Millisecond, 0.3, 28600 * time.Millisecond, time.Second, 10 * time.Second, 500 * time.Millisecond, "base"},
		{"cross-region link", time.Second, 50 * time.Millisecond, 0.7, 700 * time.Millisecond, 35 * time.Millisecond, 2 * time.Second, 100 * time.Millisecond, "rtt"},
		{"short lock, slow link", 200 * time.Millisecond, 20 * time.Millisecond, 0.7, 140 * time.Millisecond, 10 * time.Millisecond, 800 * time.Millisecond, 40 * time.Millisecond, "rtt"},
		{"memory at 87%", 10 * time.Second, time.Millisecond, 0.87, 6500 * time.Millisecond, 325 * time.Millisecond, 10 * time.Second, 500 * time.Millisecond, "base"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seed := seedTTL(tc.base, tc.rtt, 0, tc.mem)
			if seed != tc.seed || limits.NodeTimeout(seed) != tc.seedTimeout {
				t.Errorf("seed: %v (node timeout %v), want %v (%v)", seed, limits.NodeTimeout(seed), tc.seed, tc.seedTimeout)
			}
			p, now := policy(t), time.Now()
			for range 20 { // enough samples for a p95: every one is tc.rtt
				p.AddRTT(now, tc.rtt)
			}
			ours, reason, _ := p.Choose("{redlock:seed}", tc.base, 0, now)
			if ours != tc.ours || reason != tc.reason || limits.NodeTimeout(ours) != tc.oursTimeout {
				t.Errorf("ours: %v (%v, node timeout %v), want %v (%v, %v)", ours, reason, limits.NodeTimeout(ours), tc.ours, tc.reason, tc.oursTimeout)
			}
		})
	}

	// Contention: refusals at 4 a second halve the base (ContentionHalf 4),
	// and decay with a time constant of 10 s.
	p, now := policy(t), time.Now()
	for range 40 { // each adds 1/10 s to the rate
		p.Refused("{redlock:hot}", now)
	}
	if ttl, reason, _ := p.Choose("{redlock:hot}", 10*time.Second, 0, now); ttl < 5*time.Second-time.Millisecond || ttl > 5*time.Second || reason != "contention" {
		t.Errorf("4 refusals a second: %v (%v), want 5s (contention)", ttl, reason)
	}
	base := float64(10 * time.Second)
	want := time.Duration(base / (1 + 1/math.E)).Truncate(time.Millisecond)
	if ttl, _, _ := p.Choose("{redlock:hot}", 10*time.Second, 0, now.Add(10*time.Second)); ttl < want-time.Millisecond || ttl > want+time.Millisecond {
		t.Errorf("after one time constant: %v, want about %v (a rate of 4/e)", ttl, want)
	}
}

// TestSeedFormulaOnASlowLink runs the "short lock, slow link" row of
// docs/adaptive-ttl.md on a real node behind 10 ms of latency each way,
// with the default per-node timeout: the seed formula's TTL (140 ms for a
// 200 ms base) leaves a 10 ms node timeout, below the round trip, and is
// never obtained; the adaptive TTL raises the TTL to 40 × the RTT, obtains
// the lock and keeps it alive.
func TestSeedFormulaOnASlowLink(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	p, err := faultproxy.New(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	p.SetLatency(10 * time.Millisecond)
	node := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = node.Close() })
	nodes := []redis.UniversalClient{node}
	ctx := context.Background()
	const base = 200 * time.Millisecond

	fixed, err := New(nodes, WithRestartGuard(GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fixed.Close() })
	seed := seedTTL(base, 20*time.Millisecond, 0, 0.7)
	_, err = fixed.Obtain(ctx, "slow-link", seed, WithMaxAttempts(5))
	// Three timeouts in a row, then the node is skipped for a second.
	if !errors.Is(err, ErrNotObtained) || !(errors.Is(err, ErrNodeTimeout) || errors.Is(err, ErrNodeSkipped)) {
		t.Fatalf("seed TTL %v (node timeout %v) over a 20 ms round trip: %v, want timeouts", seed, limits.NodeTimeout(seed), err)
	}

	rec := &eventRecorder{}
	a := AdaptiveTTL{Min: limits.MinTTL, Max: time.Minute, SampleInterval: 50 * time.Millisecond}
	c, err := New(nodes, WithRestartGuard(GuardOff), WithAdaptiveTTL(a), WithHook(rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.e.sampler.start()
	eventuallyWithin(t, 20*time.Second, "the RTT measured", func() bool { return c.e.adapt.RTTP95(time.Now()) >= 20*time.Millisecond })
	l, err := c.Obtain(ctx, "slow-link", base, WithAutoRefresh())
	if err != nil {
		t.Fatalf("adaptive TTL over a 20 ms round trip: %v", err)
	}
	e := rec.lastObtain(t, "slow-link")
	if e.TTL < 800*time.Millisecond || e.TTLReason != "rtt" {
		t.Fatalf("TTL %v (%v), want at least 800ms (rtt)", e.TTL, e.TTLReason)
	}
	time.Sleep(2 * e.TTL) // kept alive through several refreshes
	if err := l.Err(); err != nil {
		t.Fatalf("after two TTLs: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed: %v, not obtained; adaptive: %v (%v), held for two TTLs", seed, e.TTL, e.TTLReason)
}

// BenchmarkAdaptiveTTL measures what the adaptive TTL adds to an attempt:
// choosing its TTL (with 512 RTT samples, the p95 recomputed at most every
// 100 ms) and recording the round trips of a five-node round.
func BenchmarkAdaptiveTTL(b *testing.B) {
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New does no I/O
	defer node.Close()
	c, err := New([]redis.UniversalClient{node}, WithAdaptiveTTL(AdaptiveTTL{Min: limits.MinTTL, Max: time.Minute}))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	replies := make([]quorum.Reply[bool], 5)
	for i := range replies {
		replies[i].Latency = time.Duration(i+1) * 100 * time.Microsecond
	}
	for range 512 / len(replies) {
		observeRTT(&c.e, replies, time.Second)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = c.e.ttlFor("{redlock:bench}", 10*time.Second, false)
		observeRTT(&c.e, replies, time.Second)
	}
}

// TestAdaptiveTTLBoundsPassCheckTTL checks the claim of docs/safety.md:
// once New accepted Min and Max, every TTL between them passes checkTTL,
// whatever the node timeout, drift factor and replica acknowledgement.
func TestAdaptiveTTLBoundsPassCheckTTL(t *testing.T) {
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New does no I/O
	defer node.Close()
	configs := [][]Option{
		nil,
		{WithNodeTimeout(300 * time.Millisecond)},
		{WithDriftFactor(0.4)},
		{WithReplicaAck(1, 50*time.Millisecond), WithDriftFactor(0.2)},
	}
	accepted := 0
	for i, opts := range configs {
		for _, min := range []time.Duration{limits.MinTTL, 50 * time.Millisecond, 400 * time.Millisecond, time.Second} {
			a := AdaptiveTTL{Min: min, Max: time.Minute}
			c, err := New([]redis.UniversalClient{node}, append(opts, WithAdaptiveTTL(a))...)
			if err != nil {
				continue // Min refused for this configuration
			}
			_ = c.Close()
			accepted++
			for ttl := min; ttl <= a.Max; ttl += ttl/7 + time.Millisecond {
				if _, err := c.e.cfg.checkTTL(ttl); err != nil {
					t.Fatalf("config %d, Min %v accepted, but TTL %v refused: %v", i, min, ttl, err)
				}
			}
		}
	}
	if accepted < 10 {
		t.Fatalf("only %d of 16 configurations accepted: the check covers too little", accepted)
	}
}
