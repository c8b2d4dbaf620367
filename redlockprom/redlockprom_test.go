package redlockprom_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockprom"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newClient returns a Client on nodes with the hook, closed when the test
// ends (before the nodes stop).
func newClient(t *testing.T, nodes []redis.UniversalClient, h redlock.Hook) *redlock.Client {
	t.Helper()
	c, err := redlock.New(nodes, redlock.WithHook(h), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// value sums, over the series of the metric name whose labels include
// want, the value of a counter or gauge or the sample count of a histogram.
func value(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				sum += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				sum += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// labelValues returns the values of label across the series of name that
// match want.
func labelValues(t *testing.T, g prometheus.Gatherer, name, label string, want map[string]string) map[string]bool {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			out[labels[label]] = true
		}
	}
	return out
}

func TestMetricsOfALifeCycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, 3)
	c := newClient(t, nodes, h)
	ctx := context.Background()
	held := func() float64 { return value(t, reg, "redlock_held_locks", nil) }

	// Obtain, then contend twice: TryObtain, and Obtain until its context ends.
	job, err := c.TryObtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryObtain(ctx, "job", time.Minute); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("TryObtain of a held lock: %v, want ErrHeld", err)
	}
	_, err = c.Obtain(ctx, "job", time.Minute, redlock.WithMaxAttempts(3), redlock.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond))
	if !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("Obtain of a held lock: %v, want ErrHeld", err)
	}
	if err := job.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}

	// Lose a lock to another owner: its refresh is refused.
	fragile, err := c.TryObtain(ctx, "fragile", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := held(); got != 2 {
		t.Errorf("held_locks = %v with two locks held, want 2", got)
	}
	for _, n := range nodes {
		if err := n.Set(ctx, "{redlock:fragile}", "someone else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fragile.Refresh(ctx, time.Minute); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Refresh of a taken lock: %v, want ErrNotHeld", err)
	}
	if !errors.Is(fragile.Err(), redlock.ErrLost) {
		t.Fatalf("fragile.Err() = %v, want ErrLost", fragile.Err())
	}
	// Lose one by letting it run out.
	short, err := c.TryObtain(ctx, "short", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	if got := held(); got != 1 {
		t.Errorf("held_locks = %v after two losses, want 1", got)
	}
	// Releasing the lost locks does not count them out twice.
	if err := fragile.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Release of a taken lock: %v, want ErrNotHeld", err)
	}
	_ = short.Release(ctx) // expired or not by now: either result
	if got := held(); got != 1 {
		t.Errorf("held_locks = %v after releasing the lost locks, want 1", got)
	}
	if err := job.Release(ctx); err != nil {
		t.Fatal(err)
	}

	expected := `
# HELP redlock_acquire_total Calls of Obtain, TryObtain and Do's obtain, by result and lock kind.
# TYPE redlock_acquire_total counter
redlock_acquire_total{lock_kind="plain",result="held"} 2
redlock_acquire_total{lock_kind="plain",result="obtained"} 3
# HELP redlock_held_locks Locks obtained and neither released nor lost, by lock kind.
# TYPE redlock_held_locks gauge
redlock_held_locks{lock_kind="permit"} 0
redlock_held_locks{lock_kind="plain"} 0
redlock_held_locks{lock_kind="read"} 0
redlock_held_locks{lock_kind="reentrant"} 0
redlock_held_locks{lock_kind="write"} 0
# HELP redlock_lost_total Locks lost while held, by lock kind.
# TYPE redlock_lost_total counter
redlock_lost_total{lock_kind="permit"} 0
redlock_lost_total{lock_kind="plain"} 2
redlock_lost_total{lock_kind="read"} 0
redlock_lost_total{lock_kind="reentrant"} 0
redlock_lost_total{lock_kind="write"} 0
# HELP redlock_refresh_total Refreshes, manual (auto=false) and by the keep-alive (auto=true), by result and lock kind.
# TYPE redlock_refresh_total counter
redlock_refresh_total{auto="false",lock_kind="plain",result="not_held"} 1
redlock_refresh_total{auto="false",lock_kind="plain",result="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"redlock_acquire_total", "redlock_held_locks", "redlock_lost_total", "redlock_refresh_total"); err != nil {
		t.Error(err)
	}

	checks := []struct {
		name   string
		labels map[string]string
		min    float64
		max    float64
	}{
		{"redlock_acquire_duration_seconds", map[string]string{"result": "held"}, 2, 2},
		{"redlock_acquire_duration_seconds", map[string]string{"result": "obtained"}, 3, 3},
		{"redlock_attempts_total", map[string]string{"result": "obtained"}, 3, 3},
		{"redlock_attempts_total", map[string]string{"result": "held"}, 4, 4},
		{"redlock_wait_duration_seconds", nil, 1, 2}, // none between the first two
		{"redlock_hold_duration_seconds", map[string]string{"outcome": "lost"}, 2, 2},
		{"redlock_hold_duration_seconds", map[string]string{"outcome": "released"}, 1, 1},
		{"redlock_refresh_duration_seconds", map[string]string{"auto": "false"}, 2, 2},
		{"redlock_release_total", map[string]string{"result": "ok"}, 1, 2},
		{"redlock_release_total", map[string]string{"result": "not_held"}, 1, 2},
		{"redlock_release_total", nil, 3, 3},
		// Two of three nodes refuse before the outcome is decided; the
		// third may still be pending.
		{"redlock_node_errors_total", map[string]string{"op": "acquire", "kind": "held"}, 4 * 2, 4 * 3},
		// The core reports a refused refresh as ErrHeld per node.
		{"redlock_node_errors_total", map[string]string{"op": "refresh", "kind": "held"}, 2, 3},
		// A release waits for every node: all three refuse the taken lock.
		{"redlock_node_errors_total", map[string]string{"op": "release", "kind": "not_owner"}, 3, 6},
	}
	for _, c := range checks {
		if got := value(t, reg, c.name, c.labels); got < c.min || got > c.max {
			t.Errorf("%s%v = %v, want [%v, %v]", c.name, c.labels, got, c.min, c.max)
		}
	}
	for op, allowed := range map[string]string{"acquire": "held pending", "refresh": "held pending", "release": "not_owner"} {
		for kind := range labelValues(t, reg, "redlock_node_errors_total", "kind", map[string]string{"op": op}) {
			if !strings.Contains(allowed, kind) {
				t.Errorf("redlock_node_errors_total{op=%q} has kind %q, want only %s", op, kind, allowed)
			}
		}
	}
	if nodes := labelValues(t, reg, "redlock_node_errors_total", "node", map[string]string{"op": "release"}); len(nodes) != 3 || !nodes["0"] || !nodes["1"] || !nodes["2"] {
		t.Errorf("release node labels %v, want 0, 1 and 2", nodes)
	}

	// The keep-alive's refreshes are counted apart.
	err = c.Do(ctx, "kept", 300*time.Millisecond, func(context.Context) error {
		time.Sleep(250 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "redlock_refresh_total", map[string]string{"auto": "true", "result": "ok"}); got < 1 {
		t.Errorf("automatic refreshes = %v, want at least 1", got)
	}
	if got := held(); got != 0 {
		t.Errorf("held_locks = %v after Do, want 0", got)
	}

	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestKindLabel follows a plain lock and a read lock of one Client through
// obtain, attempt, refresh, release and loss: each metric carries its kind.
func TestKindLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	cycle := func(lk redlock.Locker) {
		t.Helper()
		l, err := lk.TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Refresh(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Lose one by letting it run out.
		short, err := lk.TryObtain(ctx, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		<-short.Done()
		_ = short.Release(ctx)
	}
	reader, _ := c.RWMutex("shared")
	cycle(c.Mutex("plain"))
	cycle(reader)
	// Two readers at once: both obtained, counted as reads.
	r1, err := reader.TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := reader.TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "redlock_held_locks", map[string]string{"lock_kind": "read"}); got != 2 {
		t.Errorf("held_locks{lock_kind=read} = %v with two readers, want 2", got)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	for _, kind := range []string{"plain", "read"} {
		reads := 0.0
		if kind == "read" {
			reads = 2
		}
		checks := []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"redlock_acquire_total", map[string]string{"result": "obtained"}, 2 + reads},
			{"redlock_acquire_duration_seconds", map[string]string{"result": "obtained"}, 2 + reads},
			{"redlock_attempts_total", map[string]string{"result": "obtained"}, 2 + reads},
			{"redlock_refresh_total", map[string]string{"result": "ok", "auto": "false"}, 1},
			{"redlock_refresh_duration_seconds", map[string]string{"auto": "false"}, 1},
			{"redlock_release_total", nil, 2 + reads}, // the lost one's too, whatever its result
			{"redlock_lost_total", nil, 1},
			{"redlock_hold_duration_seconds", map[string]string{"outcome": "lost"}, 1},
			{"redlock_hold_duration_seconds", map[string]string{"outcome": "released"}, 1 + reads},
			{"redlock_held_locks", nil, 0},
		}
		for _, ch := range checks {
			labels := map[string]string{"lock_kind": kind}
			for k, v := range ch.labels {
				labels[k] = v
			}
			if got := value(t, reg, ch.name, labels); got != ch.want {
				t.Errorf("%s%v = %v, want %v", ch.name, labels, got, ch.want)
			}
		}
	}
	for _, name := range []string{"redlock_acquire_total", "redlock_attempts_total", "redlock_refresh_total", "redlock_release_total", "redlock_hold_duration_seconds"} {
		for kind := range labelValues(t, reg, name, "lock_kind", nil) {
			if kind != "plain" && kind != "read" {
				t.Errorf("%s has lock_kind %q, want plain or read only", name, kind)
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestReentrantHolds: the holds of a reentrant owner share a token; each
// counts in held_locks until its release.
func TestReentrantHolds(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	held := func() float64 {
		return value(t, reg, "redlock_held_locks", map[string]string{"lock_kind": "reentrant"})
	}
	var locks []*redlock.Lock
	for range 2 {
		l, err := c.Reentrant("job", "job-7").TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	if locks[0].Token() != locks[1].Token() {
		t.Fatalf("re-entry changed the token: %d, %d", locks[0].Token(), locks[1].Token())
	}
	if got := held(); got != 2 {
		t.Errorf("held_locks{lock_kind=reentrant} = %v with two holds, want 2", got)
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := held(); got != 0 {
		t.Errorf("held_locks{lock_kind=reentrant} = %v after both releases, want 0", got)
	}
	if got := value(t, reg, "redlock_hold_duration_seconds", map[string]string{"lock_kind": "reentrant", "outcome": "released"}); got != 2 {
		t.Errorf("hold_duration_seconds{lock_kind=reentrant} has %v samples, want 2", got)
	}
}

func TestLockLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg, redlockprom.WithLockLabel(func(name string) string {
		kind, _, _ := strings.Cut(name, ":")
		return kind
	}))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	for _, name := range []string{"order:1", "order:2", "cron:cleanup"} {
		l, err := c.TryObtain(ctx, name, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	expected := `
# HELP redlock_acquire_total Calls of Obtain, TryObtain and Do's obtain, by result and lock kind.
# TYPE redlock_acquire_total counter
redlock_acquire_total{lock="cron",lock_kind="plain",result="obtained"} 1
redlock_acquire_total{lock="order",lock_kind="plain",result="obtained"} 2
# HELP redlock_held_locks Locks obtained and neither released nor lost, by lock kind.
# TYPE redlock_held_locks gauge
redlock_held_locks{lock="cron",lock_kind="plain"} 1
redlock_held_locks{lock="order",lock_kind="plain"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "redlock_acquire_total", "redlock_held_locks"); err != nil {
		t.Error(err)
	}
}

func TestRegistration(t *testing.T) {
	if _, err := redlockprom.New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	reg := prometheus.NewPedanticRegistry()
	a := redlockprom.WithConstLabels(prometheus.Labels{"client": "a"})
	if _, err := redlockprom.New(reg, a); err != nil {
		t.Fatal(err)
	}
	if _, err := redlockprom.New(reg, a); err == nil {
		t.Error("a second Hook with the same labels registered on one registry")
	}
	if _, err := redlockprom.New(reg, redlockprom.WithConstLabels(prometheus.Labels{"client": "b"})); err != nil {
		t.Errorf("a second Hook with its own const labels: %v", err)
	}
	// Only what was registered is there: the series of each kind at zero.
	if got := testutil.CollectAndCount(reg, "redlock_held_locks"); got != 10 {
		t.Errorf("%d held_locks series, want 10 (one per kind and Hook)", got)
	}
	if n, err := testutil.GatherAndCount(prometheus.DefaultGatherer, "redlock_held_locks", "redlock_acquire_total"); err != nil || n != 0 {
		t.Errorf("the global registry has %d redlock series (%v), want 0", n, err)
	}
}

// TestNodeErrorKindLabel: node_errors_total's kind is each node's
// redlock.NodeResult.Reason, here "wrong_kind" for a plain lock asked on the
// name of a semaphore.
func TestNodeErrorKindLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 3), h)
	ctx := context.Background()
	p, err := c.Semaphore("exports", 2).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	if _, err := c.TryObtain(ctx, "exports", time.Minute); !errors.Is(err, redlock.ErrWrongKind) {
		t.Fatalf("TryObtain on a semaphore's name: %v, want ErrWrongKind", err)
	}
	// Two of three nodes refuse before the outcome is decided; the third
	// may still be pending.
	if got := value(t, reg, "redlock_node_errors_total", map[string]string{"op": "acquire", "kind": "wrong_kind"}); got < 2 || got > 3 {
		t.Errorf("node_errors_total{op=acquire,kind=wrong_kind} = %v, want 2 or 3", got)
	}
	for kind := range labelValues(t, reg, "redlock_node_errors_total", "kind", nil) {
		if kind != "wrong_kind" && kind != "pending" {
			t.Errorf("node_errors_total has kind %q, want wrong_kind or pending", kind)
		}
	}
}

// TestPermitKindLabel: a semaphore's permits are counted under
// kind="permit".
func TestPermitKindLabel(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	p1, err := c.Semaphore("exports", 2).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Semaphore("exports", 2).TryObtain(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "redlock_held_locks", map[string]string{"lock_kind": "permit"}); got != 2 {
		t.Errorf("held_locks{lock_kind=permit} = %v with two permits, want 2", got)
	}
	_ = p1.Release(ctx)
	_ = p2.Release(ctx)
	if got := value(t, reg, "redlock_acquire_total", map[string]string{"lock_kind": "permit", "result": "obtained"}); got != 2 {
		t.Errorf("acquire_total{lock_kind=permit,result=obtained} = %v, want 2", got)
	}
	if got := value(t, reg, "redlock_held_locks", map[string]string{"lock_kind": "permit"}); got != 0 {
		t.Errorf("held_locks{lock_kind=permit} = %v after the releases, want 0", got)
	}
}

// TestAdaptiveTTLMetrics checks the metrics of redlock.WithAdaptiveTTL: the
// TTL chosen for obtains and refreshes, with its reason, and the sampler's
// memory gauges on a real node pushed to its maxmemory.
func TestAdaptiveTTLMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, 1)
	c, err := redlock.New(nodes, redlock.WithHook(h), redlock.WithRestartGuard(redlock.GuardOff),
		redlock.WithAdaptiveTTL(redlock.AdaptiveTTL{Min: time.Second, Max: 20 * time.Second, SampleInterval: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	l, err := c.Obtain(ctx, "ttl", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Refresh(ctx, 30*time.Second); err != nil { // above Max: capped
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "redlock_ttl_chosen_seconds", map[string]string{"op": "obtain", "reason": "base"}); got != 1 {
		t.Errorf("ttl_chosen_seconds{op=obtain,reason=base} has %v observations, want 1", got)
	}
	if got := value(t, reg, "redlock_ttl_chosen_seconds", map[string]string{"op": "refresh", "reason": "max"}); got != 1 {
		t.Errorf("ttl_chosen_seconds{op=refresh,reason=max} has %v observations, want 1", got)
	}

	// Memory at maxmemory (noeviction, the default policy: no key is
	// evicted, writes are refused).
	redistest.MaxMemoryAtUsed(t, nodes[0])
	deadline := time.Now().Add(10 * time.Second)
	for value(t, reg, "redlock_node_memory_pressure", map[string]string{"node": "0"}) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("redlock_node_memory_pressure{node=0} did not become 1 with the node at its maxmemory")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := value(t, reg, "redlock_node_memory_used_ratio", map[string]string{"node": "0"}); got < 0.9 {
		t.Errorf("node_memory_used_ratio = %v at maxmemory, want ≥ 0.9", got)
	}
	if n := testutil.CollectAndCount(reg, "redlock_node_evicted_keys_total", "redlock_rtt_p95_seconds"); n != 2 {
		t.Errorf("%d series of node_evicted_keys_total and rtt_p95_seconds, want 2", n)
	}
}

// TestBreakerAndDegradedMetrics kills two of three nodes: the breaker
// opens (redlock_breaker_state 1), a lock is obtained in degraded mode
// (redlock_degraded_locks 1) and released (0).
func TestBreakerAndDegradedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := redlockprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	servers := redistest.Start(t, 3)
	var nodes []redis.UniversalClient
	for _, s := range servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, c)
	}
	c, err := redlock.New(nodes, redlock.WithHook(h), redlock.WithRestartGuard(redlock.GuardOff),
		redlock.WithNodeTimeout(150*time.Millisecond), redlock.WithBreaker(2, 200*time.Millisecond),
		redlock.WithDegradedMode(redlock.NewLocalLeases()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, s := range servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	var l *redlock.Lock
	for range 40 {
		if l, err = c.TryObtain(ctx, "job", 10*time.Second); err == nil {
			break
		}
	}
	if l == nil || !l.Degraded() {
		t.Fatalf("no degraded lock: %v", err)
	}
	if got := value(t, reg, "redlock_breaker_state", nil); got != 1 {
		t.Errorf("redlock_breaker_state = %v with the breaker open, want 1", got)
	}
	if got := value(t, reg, "redlock_breaker_transitions_total", map[string]string{"to": "open"}); got != 1 {
		t.Errorf("transitions to open = %v, want 1", got)
	}
	if got := value(t, reg, "redlock_degraded_locks", nil); got != 1 {
		t.Errorf("redlock_degraded_locks = %v with one degraded lock held, want 1", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "redlock_degraded_locks", nil); got != 0 {
		t.Errorf("redlock_degraded_locks = %v after the release, want 0", got)
	}
	if got := value(t, reg, "redlock_held_locks", nil); got != 0 {
		t.Errorf("redlock_held_locks = %v after the release, want 0", got)
	}
}
