package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redistest"
)

// TestAdaptiveTTLMemoryPressure fills a node with a low maxmemory until it
// evicts: the sampler reports it to the hook and the logger, and the TTL
// is not shortened.
func TestAdaptiveTTLMemoryPressure(t *testing.T) {
	cl := startNodes(t, 1)
	node := cl.clients[0]
	ctx := context.Background()
	if err := node.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	used := redistest.MaxMemoryAtUsed(t, node)
	if err := node.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+2<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	a := AdaptiveTTL{Min: 500 * time.Millisecond, Max: 10 * time.Second, SampleInterval: 50 * time.Millisecond}
	rec := &eventRecorder{}
	c := newClient(t, cl.clients, WithAdaptiveTTL(a), WithHook(JoinHooks(&eventRecorder{}, rec)), WithLogger(logger))
	const base = 5 * time.Second
	l, err := c.Obtain(ctx, "before-fill", base)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)

	value := strings.Repeat("x", 10<<10)
	for i := range 600 { // 6 MB into 2 MB of room
		if err := node.Set(ctx, fmt.Sprintf("fill:%d", i), value, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var pressed SampleEvent
	eventuallyWithin(t, 10*time.Second, "a sample reports evictions", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, n := range rec.samples {
			if n.Evicted > 0 && n.Pressure != "" {
				pressed = n
				return true
			}
		}
		return false
	})
	t.Logf("pressure: %+v", pressed)
	if pressed.Policy != "allkeys-lru" || pressed.MaxMemory == 0 || !strings.Contains(pressed.Pressure, "evicted") {
		t.Errorf("sample %+v: want policy, maxmemory and evictions", pressed)
	}
	eventuallyWithin(t, 5*time.Second, "the logger warns", func() bool {
		out := logs.String()
		return strings.Contains(out, "level=WARN") && strings.Contains(out, "memory pressure")
	})

	l, err = c.Obtain(ctx, "under-pressure", base)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if e := rec.lastObtain(t, "under-pressure"); e.TTL != base || e.TTLReason != "base" {
		t.Fatalf("under memory pressure: TTL %v (%v), want %v unchanged (base)", e.TTL, e.TTLReason, base)
	}
}

func TestParseMemory(t *testing.T) {
	info := "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:2097152\r\nmaxmemory_policy:volatile-ttl\r\n# Stats\r\nevicted_keys:42\r\n"
	m := parseMemory(info)
	if m.UsedMemory != 1<<20 || m.MaxMemory != 2<<20 || m.Policy != "volatile-ttl" || m.Evicted != 42 {
		t.Fatalf("parseMemory: %+v", m)
	}
	m.Evicted = 0
	if p := pressure(&m, 0.9); p != "" {
		t.Fatalf("half full: pressure %q", p)
	}
	m.UsedMemory = 2 << 20
	if p := pressure(&m, 0.9); !strings.Contains(p, "100% of maxmemory") || !strings.Contains(p, "keys will be evicted") {
		t.Fatalf("full: pressure %q", p)
	}
	m.Policy = "noeviction"
	if p := pressure(&m, 0.9); !strings.Contains(p, "will be refused") {
		t.Fatalf("full, noeviction: pressure %q", p)
	}
}

func TestAdaptiveTTLSeesOtherClientsWaiting(t *testing.T) {
	cl := startNodes(t, 1)
	a := AdaptiveTTL{Min: 500 * time.Millisecond, Max: 10 * time.Second, SampleInterval: 50 * time.Millisecond}
	rec := &eventRecorder{}
	holder := newClient(t, cl.clients, WithAdaptiveTTL(a), WithHook(rec))
	ctx := context.Background()
	const base = 3 * time.Second
	l, err := holder.Obtain(ctx, "shared", base, WithAutoRefresh())
	if err != nil {
		t.Fatal(err)
	}
	if e := rec.lastObtain(t, "shared"); e.TTL != base || e.TTLReason != "base" {
		t.Fatalf("nobody waits: TTL %v (%v), want %v (base)", e.TTL, e.TTLReason, base)
	}

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		w := newClient(t, cl.clients)
		wg.Go(func() {
			l, err := w.Obtain(wctx, "shared", time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			errs <- err
		})
	}
	var contended RefreshEvent
	eventuallyWithin(t, 15*time.Second, "an automatic refresh lowered for contention", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, e := range rec.refreshs {
			if e.Auto && e.Err == nil && e.TTLReason == "contention" {
				contended = e
				return true
			}
		}
		return false
	})
	// One waiting Client at least: base / (1 + 1/4).
	if limit := time.Duration(float64(base) / 1.25); contended.TTL > limit {
		t.Errorf("refresh with other Clients waiting: TTL %v, want at most %v", contended.TTL, limit)
	}
	inBounds(t, "contended refresh", contended.TTL, a)
	t.Logf("refresh while two Clients wait: TTL %v (%v)", contended.TTL, contended.TTLReason)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdaptiveTTLOnRedisCluster samples a Redis Cluster node: every master
// is read, and the fullest one reported.
func TestAdaptiveTTLOnRedisCluster(t *testing.T) {
	rc := redistest.StartClusterT(t, 3)
	node := rc.Client()
	t.Cleanup(func() { _ = node.Close() })
	rec := &eventRecorder{}
	a := AdaptiveTTL{Min: time.Second, Max: 10 * time.Second, SampleInterval: 50 * time.Millisecond}
	c := newClient(t, []redis.UniversalClient{node}, WithAdaptiveTTL(a), WithHook(rec))
	ctx := context.Background()
	l, err := c.Obtain(ctx, "cluster-ttl", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if e := rec.lastObtain(t, "cluster-ttl"); e.TTL != 5*time.Second || e.TTLReason != "base" {
		t.Fatalf("TTL %v (%v), want 5s (base)", e.TTL, e.TTLReason)
	}
	eventuallyWithin(t, 10*time.Second, "a sample of the cluster", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.samples) > 0
	})
	rec.mu.Lock()
	m := rec.samples[0]
	rec.mu.Unlock()
	if m.Err != nil || m.Policy == "" || m.UsedMemory == 0 || m.Pressure != "" {
		t.Fatalf("cluster node sample %+v: want the masters read, no pressure", m)
	}

	// One master at its maxmemory: the cluster node is under pressure.
	last := rc.Servers[len(rc.Servers)-1].Client()
	defer last.Close()
	redistest.MaxMemoryAtUsed(t, last)
	eventuallyWithin(t, 10*time.Second, "the full master reported", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		m = rec.samples[len(rec.samples)-1]
		return m.Pressure != ""
	})
	if m.MaxMemory == 0 || !strings.Contains(m.Pressure, "of maxmemory") {
		t.Fatalf("cluster node with a full master: %+v", m)
	}
}
