package redlockprom

import (
	"context"
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redlock-go/redlock"
)

// Default bucket boundaries, in seconds.
var (
	// DefaultDurationBuckets are the buckets of the acquire, wait and
	// refresh durations: from a millisecond to a minute.
	DefaultDurationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	// DefaultHoldBuckets are the buckets of the hold duration: from 10 ms
	// to an hour.
	DefaultHoldBuckets = []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}
	// DefaultTTLBuckets are the buckets of redlock_ttl_chosen_seconds:
	// from 10 ms (the shortest TTL redlock accepts) to 5 minutes.
	DefaultTTLBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300}
)

// Option configures a Hook.
type Option interface {
	apply(*config)
}

type config struct {
	lockLabel       func(string) string
	constLabels     prometheus.Labels
	durationBuckets []float64
	holdBuckets     []float64
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithLockLabel adds a "lock" label, whose value is f(name), to every
// metric but redlock_node_errors_total. f must map the unbounded set of lock
// names to a small fixed one (a prefix, a kind of job), or the metrics grow
// without bound; it must be fast and safe for concurrent use. Default none:
// lock names appear nowhere.
func WithLockLabel(f func(name string) string) Option {
	return option(func(c *config) { c.lockLabel = f })
}

// WithConstLabels adds labels with fixed values to every metric, such as
// the name of the Client when several Hooks share a registry. Default none.
func WithConstLabels(l prometheus.Labels) Option {
	return option(func(c *config) { c.constLabels = l })
}

// WithDurationBuckets sets the buckets, in seconds, of the acquire, wait
// and refresh durations. Default DefaultDurationBuckets.
func WithDurationBuckets(b []float64) Option {
	return option(func(c *config) { c.durationBuckets = b })
}

// WithHoldBuckets sets the buckets, in seconds, of the hold duration.
// Default DefaultHoldBuckets.
func WithHoldBuckets(b []float64) Option {
	return option(func(c *config) { c.holdBuckets = b })
}

// Hook is a redlock.Hook that records what Clients do as Prometheus
// metrics. It is safe for concurrent use and may be shared by Clients.
type Hook struct {
	lockLabel func(string) string

	acquires    *prometheus.CounterVec
	acquireTime *prometheus.HistogramVec
	attempts    *prometheus.CounterVec
	waitTime    *prometheus.HistogramVec
	holdTime    *prometheus.HistogramVec
	refreshes   *prometheus.CounterVec
	refreshTime *prometheus.HistogramVec
	releases    *prometheus.CounterVec
	lost        *prometheus.CounterVec
	nodeErrors  *prometheus.CounterVec
	heldLocks   *prometheus.GaugeVec

	breakerState       prometheus.Gauge
	breakerTransitions *prometheus.CounterVec
	degradedLocks      *prometheus.GaugeVec

	ttlChosen   *prometheus.HistogramVec
	rttP95      prometheus.Gauge
	memRatio    *prometheus.GaugeVec
	memPressure *prometheus.GaugeVec
	evicted     *prometheus.CounterVec
}

var _ redlock.Hook = (*Hook)(nil)

// New returns a Hook whose metrics are registered on reg. It returns an
// error when reg is nil or refuses the metrics (names already registered:
// see WithConstLabels), and registers nothing then.
func New(reg prometheus.Registerer, opts ...Option) (*Hook, error) {
	if reg == nil {
		return nil, errors.New("redlockprom: nil Registerer")
	}
	cfg := config{durationBuckets: DefaultDurationBuckets, holdBuckets: DefaultHoldBuckets}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlockprom: nil option")
		}
		o.apply(&cfg)
	}
	f := factory{&cfg}
	h := f.lockMetrics()
	f.samplerMetrics(h)
	all := collectors{
		h.acquires, h.acquireTime, h.attempts, h.waitTime, h.holdTime,
		h.refreshes, h.refreshTime, h.releases, h.lost, h.nodeErrors, h.heldLocks,
		h.breakerState, h.breakerTransitions, h.degradedLocks,
		h.ttlChosen, h.rttP95, h.memRatio, h.memPressure, h.evicted,
	}
	if cfg.lockLabel == nil {
		// Without a lock label these have one series per kind: show them
		// at 0 from the start.
		for _, k := range redlock.Kinds() {
			h.lost.WithLabelValues(string(k))
			h.heldLocks.WithLabelValues(string(k))
		}
		h.degradedLocks.WithLabelValues()
	}
	for s := range breakerStates {
		h.breakerTransitions.WithLabelValues(string(s))
	}
	if err := reg.Register(all); err != nil {
		return nil, err
	}
	return h, nil
}

// factory makes the metrics of a Hook with its options' labels.
type factory struct{ cfg *config }

// labels appends the lock label, when there is one, to names.
func (f factory) labels(names ...string) []string {
	if f.cfg.lockLabel != nil {
		names = append(names, "lock")
	}
	return names
}

func (f factory) counter(name, help string, names ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "redlock", Name: name, Help: help, ConstLabels: f.cfg.constLabels,
	}, names)
}

func (f factory) histogram(name, help string, buckets []float64, names ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "redlock", Name: name, Help: help, ConstLabels: f.cfg.constLabels, Buckets: buckets,
	}, names)
}

// lockMetrics makes a Hook with the metrics of locks and of the circuit
// breaker.
func (f factory) lockMetrics() *Hook {
	cfg, labels, counter, histogram := f.cfg, f.labels, f.counter, f.histogram
	return &Hook{
		lockLabel: cfg.lockLabel,
		acquires: counter("acquire_total",
			"Calls of Obtain, TryObtain and Do's obtain, by result and lock kind.", labels("result", "lock_kind")...),
		acquireTime: histogram("acquire_duration_seconds",
			"Duration of Obtain, TryObtain and Do's obtain, waits included, by result and lock kind.", cfg.durationBuckets, labels("result", "lock_kind")...),
		attempts: counter("attempts_total",
			"Acquire rounds, by result and lock kind.", labels("result", "lock_kind")...),
		waitTime: histogram("wait_duration_seconds",
			"Waits between acquire attempts, by what ended them.", cfg.durationBuckets, labels("woken_by")...),
		holdTime: histogram("hold_duration_seconds",
			"How long each lock was held, until its release or its loss, by outcome and lock kind.", cfg.holdBuckets, labels("outcome", "lock_kind")...),
		refreshes: counter("refresh_total",
			"Refreshes, manual (auto=false) and by the keep-alive (auto=true), by result and lock kind.", labels("result", "auto", "lock_kind")...),
		refreshTime: histogram("refresh_duration_seconds",
			"Duration of refreshes, by lock kind.", cfg.durationBuckets, labels("auto", "lock_kind")...),
		releases: counter("release_total",
			"Releases, by result and lock kind.", labels("result", "lock_kind")...),
		lost: counter("lost_total",
			"Locks lost while held, by lock kind.", labels("lock_kind")...),
		nodeErrors: counter("node_errors_total",
			"Refusals and failures of one node in an acquire, refresh or release round, by node index and kind of error (not of lock).", "op", "node", "kind"),
		heldLocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "redlock", Name: "held_locks", ConstLabels: cfg.constLabels,
			Help: "Locks obtained and neither released nor lost, by lock kind.",
		}, labels("lock_kind")),
		breakerState: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "redlock", Name: "breaker_state", ConstLabels: cfg.constLabels,
			Help: "State of the Client's circuit breaker: 0 closed, 1 open, 2 half-open (redlock.Client.BreakerState).",
		}),
		breakerTransitions: counter("breaker_transitions_total",
			"Changes of the circuit breaker's state, by the state entered (closed, open, half_open).", "to"),
		degradedLocks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "redlock", Name: "degraded_locks", ConstLabels: cfg.constLabels,
			Help: "Locks obtained in degraded mode (from the lease store, not Redis) and neither released nor lost.",
		}, labels()),
	}
}

// samplerMetrics adds to h the metrics of the adaptive TTL
// (redlock.WithAdaptiveTTL) and its sampler.
func (f factory) samplerMetrics(h *Hook) {
	cfg := f.cfg
	h.ttlChosen = f.histogram("ttl_chosen_seconds",
		"TTL of each lock obtained (op=obtain) and each successful refresh (op=refresh), and why it has that value (reason: given, base, contention, rtt, min, max, hold_limit).",
		DefaultTTLBuckets, f.labels("op", "reason")...)
	h.rttP95 = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "redlock", Name: "rtt_p95_seconds", ConstLabels: cfg.constLabels,
		Help: "p95 of the nodes' round-trip times over the last minute, as the adaptive TTL measures it.",
	})
	h.memRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "redlock", Name: "node_memory_used_ratio", ConstLabels: cfg.constLabels,
		Help: "used_memory / maxmemory of each node at the adaptive TTL's last sample (0: no maxmemory).",
	}, []string{"node"})
	h.memPressure = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "redlock", Name: "node_memory_pressure", ConstLabels: cfg.constLabels,
		Help: "1 while a node evicts keys or is near its maxmemory: lock keys can vanish or be refused.",
	}, []string{"node"})
	h.evicted = f.counter("node_evicted_keys_total",
		"Keys each node evicted, as the adaptive TTL's sampler saw evicted_keys grow.", "node")
}

// collectors registers every metric of a Hook at once, so that New
// registers all of them or none.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// values appends the lock label's value, when there is one, to vals.
func (h *Hook) values(name string, vals ...string) []string {
	if h.lockLabel != nil {
		vals = append(vals, h.lockLabel(name))
	}
	return vals
}

// Observe records the event (redlock.Hook).
func (h *Hook) Observe(_ context.Context, e redlock.Event) {
	switch e := e.(type) {
	case redlock.AttemptEvent:
		h.attempt(e)
	case redlock.WaitEvent:
		h.waitTime.WithLabelValues(h.values(e.Name, string(e.WokenBy))...).Observe(e.Waited.Seconds())
	case redlock.ObtainEvent:
		h.obtain(e)
	case redlock.RefreshEvent:
		h.refresh(e)
	case redlock.ReleaseEvent:
		h.releases.WithLabelValues(h.values(e.Name, string(e.Result), string(e.Kind))...).Inc()
		h.quorumNodes("release", e.Err)
		if !e.Lost { // else its hold ended at its LostEvent
			h.ended(e.Name, e.Kind, "released", e.Held.Seconds(), e.Degraded)
		}
	case redlock.LostEvent:
		h.lost.WithLabelValues(h.values(e.Name, string(e.Kind))...).Inc()
		h.ended(e.Name, e.Kind, "lost", e.Held.Seconds(), e.Degraded)
	case redlock.BreakerEvent:
		if s, ok := breakerStates[e.To]; ok {
			h.breakerState.Set(s)
		}
		h.breakerTransitions.WithLabelValues(string(e.To)).Inc()
	case redlock.SampleEvent:
		h.sample(e)
	}
}

// breakerStates are the values of redlock_breaker_state.
var breakerStates = map[redlock.BreakerState]float64{redlock.BreakerClosed: 0, redlock.BreakerOpen: 1, redlock.BreakerHalfOpen: 2}

// attempt counts the attempt and each node's refusal or failure.
func (h *Hook) attempt(e redlock.AttemptEvent) {
	h.attempts.WithLabelValues(h.values(e.Name, string(e.Result), string(e.Kind))...).Inc()
	for _, n := range e.Nodes {
		if n.Err != nil {
			h.nodeError("acquire", n)
		}
	}
}

// obtain counts the call and, when it obtained a lock, the lock as held.
func (h *Hook) obtain(e redlock.ObtainEvent) {
	h.acquires.WithLabelValues(h.values(e.Name, string(e.Result), string(e.Kind))...).Inc()
	h.acquireTime.WithLabelValues(h.values(e.Name, string(e.Result), string(e.Kind))...).Observe(e.Elapsed.Seconds())
	if e.Err != nil {
		return
	}
	h.ttlChosen.WithLabelValues(h.values(e.Name, "obtain", e.TTLReason)...).Observe(e.TTL.Seconds())
	if e.LockID == 0 {
		return
	}
	h.heldLocks.WithLabelValues(h.values(e.Name, string(e.Kind))...).Inc()
	if e.Degraded {
		h.degradedLocks.WithLabelValues(h.values(e.Name)...).Inc()
	}
}

// ended counts the end of a lock's hold: its loss, or its release when it
// was not lost before. The Client reports a lock's ObtainEvent before its
// end (redlock.Hook), so the lock was counted as held.
func (h *Hook) ended(name string, kind redlock.Kind, outcome string, held float64, degraded bool) {
	h.holdTime.WithLabelValues(h.values(name, outcome, string(kind))...).Observe(held)
	h.heldLocks.WithLabelValues(h.values(name, string(kind))...).Dec()
	if degraded {
		h.degradedLocks.WithLabelValues(h.values(name)...).Dec()
	}
}

// refresh counts the refresh and the nodes that refused or failed in it.
func (h *Hook) refresh(e redlock.RefreshEvent) {
	auto := strconv.FormatBool(e.Auto)
	h.refreshes.WithLabelValues(h.values(e.Name, string(e.Result), auto, string(e.Kind))...).Inc()
	h.refreshTime.WithLabelValues(h.values(e.Name, auto, string(e.Kind))...).Observe(e.Elapsed.Seconds())
	h.quorumNodes("refresh", e.Err)
	if e.Err == nil {
		h.ttlChosen.WithLabelValues(h.values(e.Name, "refresh", e.TTLReason)...).Observe(e.TTL.Seconds())
	}
}

// sample records one node's sample of the adaptive TTL's sampler: the RTT
// p95, and the node's memory, pressure and evictions.
func (h *Hook) sample(e redlock.SampleEvent) {
	h.rttP95.Set(e.RTT.Seconds())
	if e.Err != nil {
		return
	}
	node := strconv.Itoa(e.Node)
	ratio := 0.0
	if e.MaxMemory > 0 {
		ratio = float64(e.UsedMemory) / float64(e.MaxMemory)
	}
	h.memRatio.WithLabelValues(node).Set(ratio)
	pressure := 0.0
	if e.Pressure != "" {
		pressure = 1
	}
	h.memPressure.WithLabelValues(node).Set(pressure)
	h.evicted.WithLabelValues(node).Add(float64(e.Evicted))
}

// quorumNodes counts the node errors of a failed refresh or release.
func (h *Hook) quorumNodes(op string, err error) {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return
	}
	for _, n := range qe.Nodes {
		if n.Err != nil {
			h.nodeError(op, n)
		}
	}
}

func (h *Hook) nodeError(op string, n redlock.NodeResult) {
	h.nodeErrors.WithLabelValues(op, strconv.Itoa(n.Node), string(n.Reason)).Inc()
}
