package redlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlockotel"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newTelemetry(t *testing.T) *telemetry {
	sr := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tel := &telemetry{
		spans:  sr,
		reader: reader,
		tp:     sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr)),
		mp:     sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	}
	t.Cleanup(func() {
		_ = tel.tp.Shutdown(context.Background())
		_ = tel.mp.Shutdown(context.Background())
	})
	return tel
}

func newClient(t *testing.T, nodes []redis.UniversalClient, h redlock.Hook) *redlock.Client {
	t.Helper()
	c, err := redlock.New(nodes, redlock.WithHook(h), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ended returns the ended spans named name.
func (tel *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// sum returns the sum of a counter's or up-down counter's points, or the
// count of a histogram's, whose attributes include want.
func (tel *telemetry) sum(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n += int64(p.Count)
					}
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n += p.Value
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n++ // a point's presence; its value is not an integer
					}
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return n
}

func TestSpansAndMetricsOfALifeCycle(t *testing.T) {
	tel := newTelemetry(t)
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, 3)
	c := newClient(t, nodes, h)
	ctx := context.Background()

	job, err := c.TryObtain(ctx, "job", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, "job", time.Minute, redlock.WithMaxAttempts(2), redlock.WithRetryDelay(10*time.Millisecond, 20*time.Millisecond)); !errors.Is(err, redlock.ErrHeld) {
		t.Fatalf("Obtain of a held lock: %v, want ErrHeld", err)
	}
	if err := job.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	fragile, err := c.TryObtain(ctx, "fragile", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := tel.sum(t, "redlock.locks.held"); got != 2 {
		t.Errorf("redlock.locks.held = %d with two locks held, want 2", got)
	}
	for _, n := range nodes {
		if err := n.Set(ctx, "{redlock:fragile}", "someone else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fragile.Refresh(ctx, time.Minute); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Refresh of a taken lock: %v, want ErrNotHeld", err)
	}
	if err := fragile.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Release of a taken lock: %v, want ErrNotHeld", err)
	}
	if got := tel.sum(t, "redlock.locks.held"); got != 1 {
		t.Errorf("redlock.locks.held = %d after a loss and its release, want 1", got)
	}
	if err := job.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Obtain spans: two obtained, one refused.
	obtains := tel.ended("redlock.obtain")
	if len(obtains) != 3 {
		t.Fatalf("%d obtain spans, want 3", len(obtains))
	}
	first, refused := obtains[0], obtains[1]
	a := attrs(first.Attributes())
	if a["redlock.outcome"].AsString() != "obtained" || a["redlock.attempts"].AsInt64() != 1 ||
		a["redlock.token"].AsInt64() != job.Token() || a["redlock.nodes"].AsInt64() != 3 || a["redlock.quorum"].AsInt64() != 2 {
		t.Errorf("obtain span attributes %v", first.Attributes())
	}
	if _, ok := a["redlock.key"]; ok {
		t.Error("the lock name is an attribute without WithKeyAttribute")
	}
	if first.Status().Code != codes.Unset {
		t.Errorf("obtained: status %v, want Unset", first.Status())
	}
	if d := first.EndTime().Sub(first.StartTime()); d <= 0 || d > time.Second {
		t.Errorf("obtain span lasts %v", d)
	}
	if first.Parent().IsValid() {
		t.Error("obtain span has a parent without WithParent")
	}
	var nodeEvents, attemptEvents int
	for _, e := range first.Events() {
		ea := attrs(e.Attributes)
		switch e.Name {
		case "redlock.node":
			nodeEvents++
			if o := ea["redlock.node.outcome"].AsString(); o != "agreed" && o != "pending" {
				t.Errorf("node event of an obtained lock: %v", e.Attributes)
			}
			if e.Time.Before(first.StartTime()) || e.Time.After(first.EndTime()) {
				t.Errorf("node event at %v outside its span [%v, %v]", e.Time, first.StartTime(), first.EndTime())
			}
		case "redlock.attempt":
			attemptEvents++
			if ea["redlock.outcome"].AsString() != "obtained" || ea["redlock.attempt"].AsInt64() != 1 {
				t.Errorf("attempt event %v", e.Attributes)
			}
		}
	}
	if nodeEvents != 3 || attemptEvents != 1 {
		t.Errorf("obtain span has %d node events and %d attempt events, want 3 and 1", nodeEvents, attemptEvents)
	}

	a = attrs(refused.Attributes())
	if a["redlock.outcome"].AsString() != "held" || a["redlock.attempts"].AsInt64() != 2 || refused.Status().Code != codes.Error {
		t.Errorf("refused obtain: attributes %v, status %v", refused.Attributes(), refused.Status())
	}
	var held, waits int
	for _, e := range refused.Events() {
		switch e.Name {
		case "redlock.node":
			if attrs(e.Attributes)["redlock.node.outcome"].AsString() == "held" {
				held++
			}
		case "redlock.wait":
			waits++
		}
	}
	if held < 2*2 {
		t.Errorf("refused obtain has %d node events saying held, want at least 4", held)
	}

	// Refresh spans: one ok, one refused.
	refreshes := tel.ended("redlock.refresh")
	if len(refreshes) != 2 {
		t.Fatalf("%d refresh spans, want 2", len(refreshes))
	}
	if a := attrs(refreshes[0].Attributes()); a["redlock.outcome"].AsString() != "ok" || a["redlock.auto"].AsBool() || refreshes[0].Status().Code != codes.Unset {
		t.Errorf("refresh span %v %v", refreshes[0].Attributes(), refreshes[0].Status())
	}
	if a := attrs(refreshes[1].Attributes()); a["redlock.outcome"].AsString() != "not_held" || a["redlock.quorum"].AsInt64() != 2 ||
		refreshes[1].Status().Code != codes.Error || len(refreshes[1].Events()) < 2 {
		t.Errorf("refused refresh span %v %v %d events", refreshes[1].Attributes(), refreshes[1].Status(), len(refreshes[1].Events()))
	}

	// The loss, and the releases.
	if lost := tel.ended("redlock.lost"); len(lost) != 1 || lost[0].Status().Code != codes.Error {
		t.Errorf("lost spans %v, want one with status Error", lost)
	}
	releases := tel.ended("redlock.release")
	if len(releases) != 2 {
		t.Fatalf("%d release spans, want 2", len(releases))
	}
	if a := attrs(releases[0].Attributes()); a["redlock.outcome"].AsString() != "not_held" || len(releases[0].Events()) != 3 || releases[0].Status().Code != codes.Error {
		t.Errorf("release of a taken lock: %v, %d events, %v", releases[0].Attributes(), len(releases[0].Events()), releases[0].Status())
	}
	if a := attrs(releases[1].Attributes()); a["redlock.outcome"].AsString() != "ok" || a["redlock.held_ms"].AsFloat64() <= 0 || releases[1].Status().Code != codes.Unset {
		t.Errorf("release: %v %v", releases[1].Attributes(), releases[1].Status())
	}

	// Metrics.
	checks := []struct {
		name     string
		attrs    []attribute.KeyValue
		min, max int64
	}{
		{"redlock.obtain.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "obtained")}, 2, 2},
		{"redlock.obtain.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "held")}, 1, 1},
		{"redlock.attempts", []attribute.KeyValue{attribute.String("redlock.outcome", "held")}, 2, 2},
		{"redlock.attempts", nil, 4, 4},
		{"redlock.wait.duration", nil, 0, 1},
		{"redlock.refresh.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "ok"), attribute.Bool("redlock.auto", false)}, 1, 1},
		{"redlock.refresh.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "not_held")}, 1, 1},
		{"redlock.releases", []attribute.KeyValue{attribute.String("redlock.outcome", "ok")}, 1, 1},
		{"redlock.releases", []attribute.KeyValue{attribute.String("redlock.outcome", "not_held")}, 1, 1},
		{"redlock.lost", nil, 1, 1},
		{"redlock.hold.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "lost")}, 1, 1},
		{"redlock.hold.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "released")}, 1, 1},
		{"redlock.locks.held", nil, 0, 0},
		{"redlock.node.errors", []attribute.KeyValue{attribute.String("redlock.op", "acquire"), attribute.String("redlock.node.error_kind", "held")}, 2 * 2, 2 * 3},
		{"redlock.node.errors", []attribute.KeyValue{attribute.String("redlock.op", "release"), attribute.String("redlock.node.error_kind", "not_owner")}, 3, 3},
		{"redlock.node.errors", []attribute.KeyValue{attribute.String("redlock.op", "release"), attribute.Int("redlock.node", 2)}, 1, 1},
	}
	for _, c := range checks {
		if got := tel.sum(t, c.name, c.attrs...); got < c.min || got > c.max {
			t.Errorf("%s%v = %d, want [%d, %d]", c.name, c.attrs, got, c.min, c.max)
		}
	}
}

// TestKindAttribute follows a plain lock and a read lock through obtain,
// refresh, release and loss: each span and metric carries redlock.kind.
func TestKindAttribute(t *testing.T) {
	tel := newTelemetry(t)
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
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

	for _, name := range []string{"redlock.obtain", "redlock.refresh", "redlock.release", "redlock.lost"} {
		counts := map[string]int{}
		for _, s := range tel.ended(name) {
			counts[attrs(s.Attributes())["redlock.kind"].AsString()]++
		}
		want := map[string]int{"plain": 2, "read": 2}
		switch name {
		case "redlock.refresh", "redlock.lost":
			want = map[string]int{"plain": 1, "read": 1}
		}
		if len(counts) != len(want) || counts["plain"] != want["plain"] || counts["read"] != want["read"] {
			t.Errorf("%s spans by redlock.kind: %v, want %v", name, counts, want)
		}
	}
	for _, kind := range []string{"plain", "read"} {
		k := attribute.String("redlock.kind", kind)
		checks := []struct {
			name  string
			attrs []attribute.KeyValue
			want  int64
		}{
			{"redlock.obtain.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "obtained")}, 2},
			{"redlock.attempts", []attribute.KeyValue{attribute.String("redlock.outcome", "obtained")}, 2},
			{"redlock.refresh.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "ok")}, 1},
			{"redlock.releases", nil, 2},
			{"redlock.lost", nil, 1},
			{"redlock.hold.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "lost")}, 1},
			{"redlock.hold.duration", []attribute.KeyValue{attribute.String("redlock.outcome", "released")}, 1},
			{"redlock.locks.held", nil, 0},
		}
		for _, ch := range checks {
			if got := tel.sum(t, ch.name, append(ch.attrs, k)...); got != ch.want {
				t.Errorf("%s%v{%s} = %d, want %d", ch.name, ch.attrs, kind, got, ch.want)
			}
		}
	}
	// Every point of these metrics has a kind.
	for _, name := range []string{"redlock.obtain.duration", "redlock.attempts", "redlock.releases", "redlock.lost", "redlock.hold.duration", "redlock.refresh.duration"} {
		all := tel.sum(t, name)
		plain := tel.sum(t, name, attribute.String("redlock.kind", "plain"))
		read := tel.sum(t, name, attribute.String("redlock.kind", "read"))
		if all == 0 || plain+read != all {
			t.Errorf("%s: %d points, %d plain and %d read", name, all, plain, read)
		}
	}
}

// TestReentrantHolds: the holds of a reentrant owner share a token; each
// counts in redlock.locks.held until its release.
func TestReentrantHolds(t *testing.T) {
	tel := newTelemetry(t)
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	reentrant := attribute.String("redlock.kind", "reentrant")
	var locks []*redlock.Lock
	for range 2 {
		l, err := c.Reentrant("job", "job-7").TryObtain(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	if got := tel.sum(t, "redlock.locks.held", reentrant); got != 2 {
		t.Errorf("redlock.locks.held{reentrant} = %d with two holds, want 2", got)
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := tel.sum(t, "redlock.locks.held", reentrant); got != 0 {
		t.Errorf("redlock.locks.held{reentrant} = %d after both releases, want 0", got)
	}
	if got := tel.sum(t, "redlock.hold.duration", reentrant); got != 2 {
		t.Errorf("redlock.hold.duration{reentrant} has %d samples, want 2", got)
	}
}

func TestKeyAttributeAndParent(t *testing.T) {
	tel := newTelemetry(t)
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
	})
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp),
		redlockotel.WithKeyAttribute(), redlockotel.WithParent(parent),
		redlockotel.WithLockAttribute(func(string) string { return "jobs" }))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx := context.Background()
	l, err := c.TryObtain(ctx, "job:7", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	spans := tel.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	for _, s := range spans {
		if got := attrs(s.Attributes())["redlock.key"].AsString(); got != "job:7" {
			t.Errorf("%s: redlock.key %q, want job:7", s.Name(), got)
		}
		if s.Parent().SpanID() != parent.SpanID() || s.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("%s: parent %v, want %v", s.Name(), s.Parent(), parent)
		}
	}
	if got := tel.sum(t, "redlock.obtain.duration", attribute.String("redlock.lock", "jobs")); got != 1 {
		t.Errorf("obtains with redlock.lock=jobs: %d, want 1", got)
	}
}

func TestDefaultsToTheGlobalProviders(t *testing.T) {
	tel := newTelemetry(t)
	otel.SetTracerProvider(tel.tp)
	otel.SetMeterProvider(tel.mp)
	t.Cleanup(func() {
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		otel.SetMeterProvider(metricnoop.NewMeterProvider())
	})
	h, err := redlockotel.New()
	if err != nil {
		t.Fatal(err)
	}
	h.Observe(context.Background(), redlock.LostEvent{LockInfo: redlock.LockInfo{Name: "k", Kind: redlock.KindPlain, LockID: 1}, Held: time.Second, Err: redlock.ErrLost})
	if got := len(tel.ended("redlock.lost")); got != 1 {
		t.Errorf("%d lost spans through the global provider, want 1", got)
	}
	if got := tel.sum(t, "redlock.lost"); got != 1 {
		t.Errorf("redlock.lost = %d through the global provider, want 1", got)
	}
}

// Spans are children of the span in the call's context, which wins over
// WithParent; an automatic refresh of Do's lock is a child of Do's caller.
// Concurrent obtains of one name show only their own attempts.
func TestSpansJoinTheCallersTrace(t *testing.T) {
	tel := newTelemetry(t)
	fallback := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, TraceFlags: trace.FlagsSampled})
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp), redlockotel.WithParent(fallback))
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, redistest.Clients(t, 1), h)
	ctx, request := tel.tp.Tracer("test").Start(context.Background(), "request")

	held, err := c.TryObtain(ctx, "shared", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Two waiters of the held name, in other traces, give up after a few
	// attempts each.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			wctx, span := tel.tp.Tracer("test").Start(context.Background(), "waiter")
			defer span.End()
			_, err := c.Obtain(wctx, "shared", time.Minute, redlock.WithMaxAttempts(3), redlock.WithRetryDelay(5*time.Millisecond, 10*time.Millisecond))
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("waiter: %v, want ErrNotObtained", err)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	err = c.Do(ctx, "job", 300*time.Millisecond, func(context.Context) error {
		time.Sleep(250 * time.Millisecond) // a refresh every 50 ms
		return nil
	}, redlock.WithRefreshInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	request.End()

	want := request.SpanContext()
	waiters := map[trace.SpanID]bool{}
	for _, s := range tel.ended("waiter") {
		waiters[s.SpanContext().SpanID()] = true
	}
	var fromRequest, fromWaiters, refreshes int
	for _, s := range tel.spans.Ended() {
		switch {
		case s.Name() == "request" || s.Name() == "waiter":
			continue
		case s.Parent().SpanID() == want.SpanID() && s.SpanContext().TraceID() == want.TraceID():
			fromRequest++
			if s.Name() == "redlock.refresh" {
				refreshes++
			}
		case s.Name() == "redlock.obtain" && waiters[s.Parent().SpanID()]:
			fromWaiters++
			attempts := 0
			for _, e := range s.Events() {
				if e.Name == "redlock.attempt" {
					attempts++
				}
			}
			if got := attrs(s.Attributes())["redlock.attempts"].AsInt64(); attempts != 3 || got != 3 {
				t.Errorf("a waiter's obtain span has %d attempt events and redlock.attempts %d, want its own 3", attempts, got)
			}
		default:
			t.Errorf("span %s: parent %v, want the caller's span", s.Name(), s.Parent())
		}
	}
	// The request's obtain and release, then Do's obtain, refreshes and
	// release.
	if fromRequest < 5 || refreshes < 1 || fromWaiters != 2 {
		t.Errorf("%d spans under the request (%d refreshes), %d obtains under the waiters; want at least 5 (1), and 2",
			fromRequest, refreshes, fromWaiters)
	}
}

// TestAdaptiveTTL checks the metrics and span attributes of
// redlock.WithAdaptiveTTL: the TTL chosen for obtains and refreshes, with
// its reason, and the sampler's memory gauges on a real node pushed to its
// maxmemory.
func TestAdaptiveTTL(t *testing.T) {
	tel := newTelemetry(t)
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
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
	op, reason := attribute.Key("redlock.op"), attribute.Key("redlock.ttl.reason")
	if got := tel.sum(t, "redlock.ttl.chosen", op.String("obtain"), reason.String("base")); got != 1 {
		t.Errorf("redlock.ttl.chosen{obtain, base} has %d points, want 1", got)
	}
	if got := tel.sum(t, "redlock.ttl.chosen", op.String("refresh"), reason.String("max")); got != 1 {
		t.Errorf("redlock.ttl.chosen{refresh, max} has %d points, want 1", got)
	}
	obtain := tel.ended("redlock.obtain")
	if len(obtain) != 1 {
		t.Fatalf("%d obtain spans, want 1", len(obtain))
	}
	if a := attrs(obtain[0].Attributes()); a["redlock.ttl_ms"].AsFloat64() != 10000 || a["redlock.ttl.reason"].AsString() != "base" {
		t.Errorf("obtain span attributes %v: want redlock.ttl_ms 10000, redlock.ttl.reason base", a)
	}
	refresh := tel.ended("redlock.refresh")
	if len(refresh) != 1 {
		t.Fatalf("%d refresh spans, want 1", len(refresh))
	}
	if a := attrs(refresh[0].Attributes()); a["redlock.ttl_ms"].AsFloat64() != 20000 || a["redlock.ttl.reason"].AsString() != "max" {
		t.Errorf("refresh span attributes %v: want redlock.ttl_ms 20000, redlock.ttl.reason max", a)
	}

	redistest.MaxMemoryAtUsed(t, nodes[0]) // noeviction: writes are refused
	node := attribute.Key("redlock.node").Int(0)
	deadline := time.Now().Add(10 * time.Second)
	for tel.sum(t, "redlock.node.memory.pressure", node) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("redlock.node.memory.pressure{node 0} did not become 1 with the node at its maxmemory")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tel.sum(t, "redlock.node.memory.used_ratio", node) != 1 || tel.sum(t, "redlock.rtt.p95") != 1 {
		t.Error("no point of redlock.node.memory.used_ratio or redlock.rtt.p95")
	}
}

// TestBreakerAndDegradedMetrics kills two of three nodes: the breaker
// opens (redlock.breaker.state 1), a lock is obtained in degraded mode
// (redlock.locks.degraded 1, its span redlock.degraded) and released (0).
func TestBreakerAndDegradedMetrics(t *testing.T) {
	tel := newTelemetry(t)
	h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
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
	if got := tel.sum(t, "redlock.breaker.state"); got != 1 {
		t.Errorf("redlock.breaker.state = %d with the breaker open, want 1", got)
	}
	if got := tel.sum(t, "redlock.breaker.transitions", attribute.String("redlock.breaker.state", "open")); got != 1 {
		t.Errorf("transitions to open = %d, want 1", got)
	}
	if got := tel.sum(t, "redlock.locks.degraded"); got != 1 {
		t.Errorf("redlock.locks.degraded = %d with one degraded lock held, want 1", got)
	}
	degraded := 0
	for _, s := range tel.ended("redlock.obtain") {
		if v, ok := attrs(s.Attributes())["redlock.degraded"]; ok && v.AsBool() {
			degraded++
		}
	}
	if degraded != 1 {
		t.Errorf("%d obtain spans with redlock.degraded true, want 1", degraded)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tel.sum(t, "redlock.locks.degraded"); got != 0 {
		t.Errorf("redlock.locks.degraded = %d after the release, want 0", got)
	}
}

// TestHeldCount feeds a Hook the events of locks in the orders a Client
// reports them (redlock.Hook: a lock's ObtainEvent first, a LostEvent
// before the ReleaseEvent, which then says Lost). redlock.locks.held and
// redlock.locks.degraded return to 0, and each lock's hold is recorded
// once, by its first end.
func TestHeldCount(t *testing.T) {
	obtain := func(id uint64, degraded bool) redlock.Event {
		return redlock.ObtainEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Result: "obtained", Degraded: degraded}
	}
	lost := func(id uint64, degraded bool) redlock.Event {
		return redlock.LostEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Degraded: degraded}
	}
	release := func(id uint64, wasLost, degraded bool) redlock.Event {
		return redlock.ReleaseEvent{LockInfo: redlock.LockInfo{Name: "x", Kind: redlock.KindPlain, LockID: id}, Result: "ok", Lost: wasLost, Degraded: degraded}
	}
	tests := []struct {
		name     string
		events   []redlock.Event
		held     []int64 // redlock.locks.held after each event
		degraded []int64 // redlock.locks.degraded after each event
		lost     int64   // redlock.hold.duration{outcome=lost} samples
		released int64
	}{
		{"released", []redlock.Event{obtain(1, false), release(1, false, false)}, []int64{1, 0}, []int64{0, 0}, 0, 1},
		{"lost then released", []redlock.Event{obtain(1, false), lost(1, false), release(1, true, false)}, []int64{1, 0, 0}, []int64{0, 0, 0}, 1, 0},
		{"two locks, one degraded", []redlock.Event{obtain(1, false), obtain(2, true), lost(2, true), release(1, false, false), release(2, true, true)},
			[]int64{1, 2, 1, 0, 0}, []int64{0, 1, 0, 0, 0}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tel := newTelemetry(t)
			h, err := redlockotel.New(redlockotel.WithTracerProvider(tel.tp), redlockotel.WithMeterProvider(tel.mp))
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range tt.events {
				h.Observe(context.Background(), e)
				if got := tel.sum(t, "redlock.locks.held"); got != tt.held[i] {
					t.Errorf("redlock.locks.held = %d after event %d (%T), want %d", got, i, e, tt.held[i])
				}
				if got := tel.sum(t, "redlock.locks.degraded"); got != tt.degraded[i] {
					t.Errorf("redlock.locks.degraded = %d after event %d (%T), want %d", got, i, e, tt.degraded[i])
				}
			}
			for outcome, want := range map[string]int64{"lost": tt.lost, "released": tt.released} {
				if got := tel.sum(t, "redlock.hold.duration", attribute.String("redlock.outcome", outcome)); got != want {
					t.Errorf("redlock.hold.duration{outcome=%s} has %d samples, want %d", outcome, got, want)
				}
			}
		})
	}
}
