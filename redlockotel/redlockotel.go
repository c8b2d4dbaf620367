package redlockotel

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the Hook's tracer and meter.
const ScopeName = "github.com/redlock-go/redlock/redlockotel"

// DefaultDurationBoundaries are the bucket boundaries, in seconds, of the
// duration histograms: from a millisecond to an hour.
var DefaultDurationBoundaries = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// Option configures a Hook.
type Option interface {
	apply(*config)
}

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	keyAttr    bool
	lockAttr   func(string) string
	parent     trace.SpanContext
	boundaries []float64
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithTracerProvider sets the provider of the Hook's tracer. Default the
// global provider, otel.GetTracerProvider(), at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return option(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the provider of the Hook's meter. Default the
// global provider, otel.GetMeterProvider(), at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return option(func(c *config) { c.mp = mp })
}

// WithKeyAttribute adds the lock's name to every span as redlock.key.
// Default off: lock names may identify users, orders or payments.
func WithKeyAttribute() Option {
	return option(func(c *config) { c.keyAttr = true })
}

// WithLockAttribute adds redlock.lock, whose value is f(name), to every
// metric but redlock.node.errors. f must map the unbounded set of lock
// names to a small fixed one, and be fast and safe for concurrent use.
// Default none.
func WithLockAttribute(f func(name string) string) Option {
	return option(func(c *config) { c.lockAttr = f })
}

// WithParent makes every span whose call's context holds no span a child
// of the span sc, such as a long-lived span of the worker that uses the
// Client. Default none: such spans are roots.
func WithParent(sc trace.SpanContext) Option {
	return option(func(c *config) { c.parent = sc })
}

// WithDurationBoundaries sets the bucket boundaries, in seconds, of the
// duration histograms. Default DefaultDurationBoundaries.
func WithDurationBoundaries(b []float64) Option {
	return option(func(c *config) { c.boundaries = b })
}

// Hook is a redlock.Hook that makes spans and metrics of what Clients do.
// It is safe for concurrent use and may be shared by Clients.
type Hook struct {
	tracer   trace.Tracer
	keyAttr  bool
	lockAttr func(string) string
	parent   trace.SpanContext

	locks    lockInstruments
	adaptive adaptiveInstruments
	breaker  breakerInstruments

	journal journal
}

// lockInstruments are the metrics of locks: obtains and their attempts
// and waits, holds, refreshes, releases, losses, and the nodes' errors.
type lockInstruments struct {
	obtainTime  metric.Float64Histogram
	attempts    metric.Int64Counter
	waitTime    metric.Float64Histogram
	holdTime    metric.Float64Histogram
	refreshTime metric.Float64Histogram
	releases    metric.Int64Counter
	lost        metric.Int64Counter
	nodeErrors  metric.Int64Counter
	held        metric.Int64UpDownCounter
}

// adaptiveInstruments are the metrics of the adaptive TTL
// (redlock.WithAdaptiveTTL) and its sampler.
type adaptiveInstruments struct {
	ttlChosen   metric.Float64Histogram
	rttP95      metric.Float64Gauge
	memRatio    metric.Float64Gauge
	memPressure metric.Int64Gauge
	evicted     metric.Int64Counter
}

// breakerInstruments are the metrics of the circuit breaker and of the
// locks obtained in degraded mode.
type breakerInstruments struct {
	state         metric.Int64Gauge
	transitions   metric.Int64Counter
	degradedLocks metric.Int64UpDownCounter
}

var _ redlock.Hook = (*Hook)(nil)

// New returns a Hook. It returns an error when the meter refuses an
// instrument.
func New(opts ...Option) (*Hook, error) {
	cfg := config{boundaries: DefaultDurationBoundaries}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlockotel: nil option")
		}
		o.apply(&cfg)
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	meter := cfg.mp.Meter(ScopeName)
	h := &Hook{
		tracer:   cfg.tp.Tracer(ScopeName),
		keyAttr:  cfg.keyAttr,
		lockAttr: cfg.lockAttr,
		parent:   cfg.parent,
	}
	var errs []error
	histogram := func(name, desc string) metric.Float64Histogram {
		i, err := meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(cfg.boundaries...))
		errs = append(errs, err)
		return i
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		i, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	// Locks.
	h.locks.obtainTime = histogram("redlock.obtain.duration", "Duration of Obtain, TryObtain and Do's obtain, waits included.")
	h.locks.attempts = counter("redlock.attempts", "{attempt}", "Acquire rounds.")
	h.locks.waitTime = histogram("redlock.wait.duration", "Waits between acquire attempts.")
	h.locks.holdTime = histogram("redlock.hold.duration", "How long each lock was held, until its release or its loss.")
	h.locks.refreshTime = histogram("redlock.refresh.duration", "Duration of refreshes, manual and automatic.")
	h.locks.releases = counter("redlock.releases", "{release}", "Releases.")
	h.locks.lost = counter("redlock.lost", "{lock}", "Locks lost while held.")
	h.locks.nodeErrors = counter("redlock.node.errors", "{error}", "Refusals and failures of one node in an acquire, refresh or release round.")
	var err error
	h.locks.held, err = meter.Int64UpDownCounter("redlock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks obtained and neither released nor lost."))
	errs = append(errs, err)
	// The adaptive TTL (redlock.WithAdaptiveTTL) and its sampler.
	h.adaptive.ttlChosen = histogram("redlock.ttl.chosen", "TTL of each lock obtained and each successful refresh, by redlock.op and redlock.ttl.reason.")
	h.adaptive.rttP95, err = meter.Float64Gauge("redlock.rtt.p95", metric.WithUnit("s"),
		metric.WithDescription("p95 of the nodes' round-trip times over the last minute, as the adaptive TTL measures it."))
	errs = append(errs, err)
	h.adaptive.memRatio, err = meter.Float64Gauge("redlock.node.memory.used_ratio", metric.WithUnit("1"),
		metric.WithDescription("used_memory / maxmemory of each node at the adaptive TTL's last sample (0: no maxmemory)."))
	errs = append(errs, err)
	h.adaptive.memPressure, err = meter.Int64Gauge("redlock.node.memory.pressure", metric.WithUnit("1"),
		metric.WithDescription("1 while a node evicts keys or is near its maxmemory: lock keys can vanish or be refused."))
	errs = append(errs, err)
	h.adaptive.evicted = counter("redlock.node.evicted_keys", "{key}", "Keys each node evicted, as the adaptive TTL's sampler saw evicted_keys grow.")
	// The circuit breaker and degraded mode.
	h.breaker.state, err = meter.Int64Gauge("redlock.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("State of the Client's circuit breaker: 0 closed, 1 open, 2 half-open (redlock.Client.BreakerState)."))
	errs = append(errs, err)
	h.breaker.transitions = counter("redlock.breaker.transitions", "{change}", "Changes of the circuit breaker's state, by the state entered.")
	h.breaker.degradedLocks, err = meter.Int64UpDownCounter("redlock.locks.degraded", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks obtained in degraded mode (from the lease store, not Redis) and neither released nor lost."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// Attribute keys.
const (
	keyKey         = attribute.Key("redlock.key")
	lockKey        = attribute.Key("redlock.lock")
	outcomeKey     = attribute.Key("redlock.outcome")
	kindKey        = attribute.Key("redlock.kind")
	attemptsKey    = attribute.Key("redlock.attempts")
	attemptKey     = attribute.Key("redlock.attempt")
	tokenKey       = attribute.Key("redlock.token")
	nodesKey       = attribute.Key("redlock.nodes")
	quorumKey      = attribute.Key("redlock.quorum")
	agreedKey      = attribute.Key("redlock.agreed")
	autoKey        = attribute.Key("redlock.auto")
	heldKey        = attribute.Key("redlock.held_ms")
	secondKey      = attribute.Key("redlock.second_round")
	wokenKey       = attribute.Key("redlock.woken_by")
	waitedKey      = attribute.Key("redlock.waited_ms")
	opKey          = attribute.Key("redlock.op")
	nodeKey        = attribute.Key("redlock.node")
	nodeAddrKey    = attribute.Key("redlock.node.addr")
	nodeOutcomeKey = attribute.Key("redlock.node.outcome")
	nodeLatencyKey = attribute.Key("redlock.node.latency_ms")
	errorKindKey   = attribute.Key("redlock.node.error_kind")
	ttlKey         = attribute.Key("redlock.ttl_ms")
	ttlReasonKey   = attribute.Key("redlock.ttl.reason")
	breakerKey     = attribute.Key("redlock.breaker.state")
	degradedKey    = attribute.Key("redlock.degraded")
)

// measure returns the metric option of attrs, with the lock attribute when
// there is one.
func (h *Hook) measure(name string, attrs ...attribute.KeyValue) metric.MeasurementOption {
	if h.lockAttr != nil {
		attrs = append(attrs, lockKey.String(h.lockAttr(name)))
	}
	return metric.WithAttributes(attrs...)
}

// start starts a span that began at start: a child of the span in ctx,
// else of WithParent's, else a root.
func (h *Hook) start(ctx context.Context, name, key string, start time.Time, attrs ...attribute.KeyValue) trace.Span {
	opts := []trace.SpanStartOption{trace.WithTimestamp(start)}
	switch {
	case trace.SpanContextFromContext(ctx).IsValid():
	case h.parent.IsValid():
		ctx = trace.ContextWithSpanContext(ctx, h.parent)
	default:
		opts = append(opts, trace.WithNewRoot())
	}
	if h.keyAttr {
		attrs = append(attrs, keyKey.String(key))
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	_, span := h.tracer.Start(ctx, name, opts...)
	return span
}

// end ends span at end, with status Error when err is not nil.
func end(span trace.Span, at time.Time, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End(trace.WithTimestamp(at))
}

// Observe records the event (redlock.Hook).
func (h *Hook) Observe(ctx context.Context, e redlock.Event) {
	switch e := e.(type) {
	case redlock.AttemptEvent:
		h.attempt(ctx, e)
	case redlock.WaitEvent:
		h.locks.waitTime.Record(ctx, e.Waited.Seconds(), h.measure(e.Name, wokenKey.String(string(e.WokenBy))))
		h.journal.add(e.ObtainID, record{at: time.Now(), wait: &e})
	case redlock.ObtainEvent:
		h.obtain(ctx, e)
	case redlock.RefreshEvent:
		h.refresh(ctx, e)
	case redlock.ReleaseEvent:
		h.release(ctx, e)
	case redlock.LostEvent:
		h.lose(ctx, e)
	case redlock.BreakerEvent:
		if s, ok := breakerStates[e.To]; ok {
			h.breaker.state.Record(ctx, s)
		}
		h.breaker.transitions.Add(ctx, 1, metric.WithAttributes(breakerKey.String(string(e.To))))
	case redlock.SampleEvent:
		h.sample(ctx, e)
	}
}

// breakerStates are the values of redlock.breaker.state.
var breakerStates = map[redlock.BreakerState]int64{redlock.BreakerClosed: 0, redlock.BreakerOpen: 1, redlock.BreakerHalfOpen: 2}

// attempt counts the attempt and keeps it for its obtain's span.
func (h *Hook) attempt(ctx context.Context, e redlock.AttemptEvent) {
	h.locks.attempts.Add(ctx, 1, h.measure(e.Name, outcomeKey.String(string(e.Result)), kindKey.String(string(e.Kind))))
	for _, n := range e.Nodes {
		if n.Err != nil {
			h.nodeError(ctx, "acquire", n)
		}
	}
	e.Nodes = append([]redlock.NodeResult(nil), e.Nodes...)
	h.journal.add(e.ObtainID, record{at: time.Now(), attempt: &e})
}

// obtain makes the redlock.obtain span, with the obtain's attempts and
// waits, and counts the lock obtained as held.
func (h *Hook) obtain(ctx context.Context, e redlock.ObtainEvent) {
	now := time.Now()
	began := now.Add(-e.Elapsed)
	kind := kindKey.String(string(e.Kind))
	h.locks.obtainTime.Record(ctx, e.Elapsed.Seconds(), h.measure(e.Name, outcomeKey.String(string(e.Result)), kind))
	if e.Err == nil {
		h.adaptive.ttlChosen.Record(ctx, e.TTL.Seconds(), h.measure(e.Name, opKey.String("obtain"), ttlReasonKey.String(e.TTLReason)))
		if e.LockID != 0 {
			h.locks.held.Add(ctx, 1, h.measure(e.Name, kind))
			if e.Degraded {
				h.breaker.degradedLocks.Add(ctx, 1, h.measure(e.Name))
			}
		}
	}

	records := h.journal.take(e.ObtainID)
	attrs := []attribute.KeyValue{outcomeKey.String(string(e.Result)), kind, attemptsKey.Int(e.Attempts)}
	if e.TTL > 0 {
		attrs = append(attrs, ttlKey.Float64(ms(e.TTL)), ttlReasonKey.String(e.TTLReason))
	}
	if e.Err == nil {
		attrs = append(attrs, tokenKey.Int64(e.Token), degradedKey.Bool(e.Degraded))
	}
	for _, r := range records {
		if r.attempt != nil && len(r.attempt.Nodes) > 0 {
			n := len(r.attempt.Nodes)
			attrs = append(attrs, nodesKey.Int(n), quorumKey.Int(n/2+1))
			break
		}
	}
	span := h.start(ctx, "redlock.obtain", e.Name, began, attrs...)
	if span.IsRecording() {
		number := 0
		for _, r := range records {
			if r.wait != nil {
				span.AddEvent("redlock.wait", trace.WithTimestamp(r.at), trace.WithAttributes(
					wokenKey.String(string(r.wait.WokenBy)), waitedKey.Float64(ms(r.wait.Waited))))
				continue
			}
			number++
			a := r.attempt
			attemptStart := r.at.Add(-a.Elapsed)
			for _, n := range a.Nodes {
				at, outcome := r.at, "agreed"
				if n.Latency > 0 {
					at = attemptStart.Add(n.Latency)
				}
				if n.Err != nil {
					outcome = string(n.Reason)
				}
				span.AddEvent("redlock.node", trace.WithTimestamp(at), trace.WithAttributes(
					attemptKey.Int(number), nodeKey.Int(n.Node), nodeAddrKey.String(n.Addr),
					nodeOutcomeKey.String(outcome), nodeLatencyKey.Float64(ms(n.Latency))))
			}
			attempt := []attribute.KeyValue{attemptKey.Int(number), outcomeKey.String(string(a.Result)), secondKey.Bool(a.SecondRound)}
			if a.Obtained {
				attempt = append(attempt, tokenKey.Int64(a.Token))
			}
			span.AddEvent("redlock.attempt", trace.WithTimestamp(r.at), trace.WithAttributes(attempt...))
		}
	}
	end(span, now, e.Err)
}

// refresh makes the redlock.refresh span.
func (h *Hook) refresh(ctx context.Context, e redlock.RefreshEvent) {
	now := time.Now()
	kind := kindKey.String(string(e.Kind))
	h.locks.refreshTime.Record(ctx, e.Elapsed.Seconds(),
		h.measure(e.Name, outcomeKey.String(string(e.Result)), autoKey.Bool(e.Auto), kind))
	h.quorumNodes(ctx, "refresh", e.Err)
	ttlReason := ttlReasonKey.String(e.TTLReason)
	if e.Err == nil {
		h.adaptive.ttlChosen.Record(ctx, e.TTL.Seconds(), h.measure(e.Name, opKey.String("refresh"), ttlReason))
	}
	span := h.start(ctx, "redlock.refresh", e.Name, now.Add(-e.Elapsed), outcomeKey.String(string(e.Result)), autoKey.Bool(e.Auto), kind,
		ttlKey.Float64(ms(e.TTL)), ttlReason)
	h.nodeEvents(span, now, e.Err)
	end(span, now, e.Err)
}

// release makes the redlock.release span and, unless the lock was lost
// before, ends its hold.
func (h *Hook) release(ctx context.Context, e redlock.ReleaseEvent) {
	now := time.Now()
	kind := kindKey.String(string(e.Kind))
	h.locks.releases.Add(ctx, 1, h.measure(e.Name, outcomeKey.String(string(e.Result)), kind))
	h.quorumNodes(ctx, "release", e.Err)
	if !e.Lost { // else its hold ended at its LostEvent
		h.ended(ctx, e.Name, kind, "released", e.Held, e.Degraded)
	}
	span := h.start(ctx, "redlock.release", e.Name, now, outcomeKey.String(string(e.Result)), kind, heldKey.Float64(ms(e.Held)))
	h.nodeEvents(span, now, e.Err)
	end(span, now, e.Err)
}

// lose makes the redlock.lost span and ends the lock's hold.
func (h *Hook) lose(ctx context.Context, e redlock.LostEvent) {
	now := time.Now()
	kind := kindKey.String(string(e.Kind))
	h.locks.lost.Add(ctx, 1, h.measure(e.Name, kind))
	h.ended(ctx, e.Name, kind, "lost", e.Held, e.Degraded)
	span := h.start(ctx, "redlock.lost", e.Name, now, kind, heldKey.Float64(ms(e.Held)))
	err := e.Err
	if err == nil {
		err = redlock.ErrLost
	}
	end(span, now, err)
}

// sample records one node's sample of the adaptive TTL's sampler: the RTT
// p95, and the node's memory, pressure and evictions.
func (h *Hook) sample(ctx context.Context, e redlock.SampleEvent) {
	h.adaptive.rttP95.Record(ctx, e.RTT.Seconds())
	if e.Err != nil {
		return
	}
	node := metric.WithAttributes(nodeKey.Int(e.Node))
	ratio := 0.0
	if e.MaxMemory > 0 {
		ratio = float64(e.UsedMemory) / float64(e.MaxMemory)
	}
	h.adaptive.memRatio.Record(ctx, ratio, node)
	var pressure int64
	if e.Pressure != "" {
		pressure = 1
	}
	h.adaptive.memPressure.Record(ctx, pressure, node)
	h.adaptive.evicted.Add(ctx, e.Evicted, node)
}

// ended counts the end of a lock's hold: its loss, or its release when it
// was not lost before. The Client reports a lock's ObtainEvent before its
// end (redlock.Hook), so the lock was counted as held.
func (h *Hook) ended(ctx context.Context, name string, kind attribute.KeyValue, outcome string, held time.Duration, degraded bool) {
	h.locks.holdTime.Record(ctx, held.Seconds(), h.measure(name, outcomeKey.String(outcome), kind))
	h.locks.held.Add(ctx, -1, h.measure(name, kind))
	if degraded {
		h.breaker.degradedLocks.Add(ctx, -1, h.measure(name))
	}
}

// nodeEvents adds the quorum and an event per node that did not agree in
// the failed round of err.
func (h *Hook) nodeEvents(span trace.Span, at time.Time, err error) {
	var qe *redlock.QuorumError
	if !span.IsRecording() || !errors.As(err, &qe) {
		return
	}
	span.SetAttributes(quorumKey.Int(qe.Need), agreedKey.Int(qe.Agreed))
	for _, n := range qe.Nodes {
		span.AddEvent("redlock.node", trace.WithTimestamp(at), trace.WithAttributes(
			nodeKey.Int(n.Node), nodeAddrKey.String(n.Addr), nodeOutcomeKey.String(string(n.Reason))))
	}
}

// quorumNodes counts the node errors of a failed refresh or release.
func (h *Hook) quorumNodes(ctx context.Context, op string, err error) {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return
	}
	for _, n := range qe.Nodes {
		if n.Err != nil {
			h.nodeError(ctx, op, n)
		}
	}
}

func (h *Hook) nodeError(ctx context.Context, op string, n redlock.NodeResult) {
	h.locks.nodeErrors.Add(ctx, 1, metric.WithAttributes(
		opKey.String(op), nodeKey.Int(n.Node), errorKindKey.String(string(n.Reason))))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
