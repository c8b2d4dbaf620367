package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Defaults of AdaptiveTTL's optional fields (docs/adaptive-ttl.md says
// why each has the value it has).
const (
	// DefaultRTTMultiple: the adaptive TTL is at least this many times the
	// nodes' round-trip time (p95), so that a round spends at most 2.5% of
	// the TTL, and the default per-node timeout (TTL/20) is at least twice
	// the p95.
	DefaultRTTMultiple = 40
	// DefaultContentionHalf is the contention on a name (waiters plus
	// refused attempts per second) at which the adaptive TTL is half the
	// TTL asked for.
	DefaultContentionHalf = 4
	// DefaultSampleInterval is how often the adaptive TTL's sampler reads
	// INFO from every node.
	DefaultSampleInterval = 5 * time.Second
	// DefaultMemoryRatio is the share of maxmemory in use above which a
	// node is reported under memory pressure.
	DefaultMemoryRatio = 0.9
)

const (
	// rttWindow: RTT samples older than this are not counted.
	rttWindow = time.Minute
	// rttSamples is the most recent RTT samples kept.
	rttSamples = 512
	// rttMinSamples: with fewer samples in the window the RTT counts as
	// unknown (0): the p95 of a handful is their maximum, often a
	// connection's dial and handshake.
	rttMinSamples = 20
	// rttRecompute bounds how often the p95 is recomputed.
	rttRecompute = 100 * time.Millisecond
	// contentionTau is the time constant of a name's refusal rate.
	contentionTau = 10 * time.Second
	// maxTrackedNames bounds the names whose refusal rate is tracked.
	maxTrackedNames = 4096
	// minSampleInterval keeps the sampler from hammering the nodes.
	minSampleInterval = 10 * time.Millisecond
	// sampleTimeout bounds one node's INFO in the sampler.
	sampleTimeout = time.Second
	// maxSubNames bounds the names whose waiting Clients one sample counts
	// (PUBSUB NUMSUB).
	maxSubNames = 128
	// kinds of nodeLog lines of the adaptive TTL (beside hook.go's).
	logMemory    = 100
	logRTTAtMax  = 101
	logSampleErr = 102
)

// AdaptiveTTL configures WithAdaptiveTTL: the bounds of the TTLs it picks
// and how it weighs its signals. Min and Max are required; a zero value in
// any other field means its default.
type AdaptiveTTL struct {
	// Min and Max bound every TTL picked: MinTTL ≤ Min ≤ Max ≤ the
	// deployment's maximum TTL (WithMaxTTL). No TTL above Max is ever
	// used. The one exception to Min: the last automatic refreshes
	// before a WithMaxHold limit ask only for the time left to the limit
	// (TTLHoldLimit), which may be below Min, down to MinTTL.
	Min, Max time.Duration
	// RTTMultiple: the TTL is raised to at least RTTMultiple × the p95 of
	// the nodes' round-trip times, so that the validity stays far above a
	// round trip. Default DefaultRTTMultiple (40); at least 3.
	RTTMultiple float64
	// ContentionHalf is the contention on a name at which the TTL is
	// halved: the TTL is ttl / (1 + contention/ContentionHalf). Contention
	// is this Client's goroutines waiting for the name, plus the other
	// Clients waiting for it (counted by the sampler), plus this Client's
	// attempts refused because another owner held it, per second. Default
	// DefaultContentionHalf (4).
	ContentionHalf float64
	// SampleInterval is how often a goroutine of the Client reads INFO
	// (memory and stats) from every node, to report memory pressure and
	// measure round trips when no lock is taken, and counts the Clients
	// waiting for its names (PUBSUB NUMSUB). Default DefaultSampleInterval
	// (5 s).
	SampleInterval time.Duration
	// MemoryRatio: a node whose used_memory is at least MemoryRatio ×
	// maxmemory is reported under memory pressure. In (0, 1]; default
	// DefaultMemoryRatio (0.9).
	MemoryRatio float64
}

// WithAdaptiveTTL makes the Client pick the TTL of every acquire attempt
// and every refresh, automatic or manual, within [a.Min, a.Max]: the TTL
// given to Obtain, TryObtain, Do, ObtainAll or Refresh becomes the base
// that the Client adjusts. It lowers it when the name is contended (a
// crashed holder's lock is handed over sooner) and raises it to cover the
// nodes' round-trip time (p95), and clamps the result to the bounds. Memory
// pressure on the nodes is reported (SampleHook, the logger) and changes no
// TTL. docs/adaptive-ttl.md gives the formula and the reasons.
//
// The TTL chosen and its reason are in ObtainEvent and RefreshEvent, and
// Lock.TTL returns it. WithFixedTTL exempts one obtain. The Client reads
// INFO from every node every a.SampleInterval on a goroutine that starts
// with the first obtain and that Close stops.
//
// New returns an error wrapping ErrInvalid when a is out of range: Min or
// Max missing, Min above Max, Min below MinTTL or too short for the
// per-node timeout, Max above the maximum TTL, or a negative field.
// Default: off, every TTL is used as given.
func WithAdaptiveTTL(a AdaptiveTTL) Option {
	return clientOption(func(c *config) {
		cp := a // validate fills in defaults: not in a shared Option
		c.adaptive = &cp
	})
}

// WithFixedTTL makes one obtain, and the lock's refreshes, use the TTL as
// given on a Client with WithAdaptiveTTL. Without WithAdaptiveTTL it
// changes nothing.
func WithFixedTTL() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.fixedTTL = true })
}

// TTLReason says why a lock has the TTL it has: what decided the choice of
// WithAdaptiveTTL.
type TTLReason int

const (
	// TTLGiven: the TTL as given (no WithAdaptiveTTL, or WithFixedTTL).
	TTLGiven TTLReason = iota
	// TTLBase: the adaptive TTL kept the TTL given: no signal moved it.
	TTLBase
	// TTLContention: lowered because the name is contended.
	TTLContention
	// TTLRTT: raised to RTTMultiple × the nodes' round-trip time (p95).
	TTLRTT
	// TTLMin: raised to AdaptiveTTL.Min.
	TTLMin
	// TTLMax: lowered to AdaptiveTTL.Max; when the round-trip time asked
	// for more, the Client's logger says so.
	TTLMax
	// TTLHoldLimit: an automatic refresh cut short by WithMaxHold.
	TTLHoldLimit
)

// String returns the reason as a label value: "given", "base",
// "contention", "rtt", "min", "max", "hold_limit", or "unknown".
func (r TTLReason) String() string {
	switch r {
	case TTLGiven:
		return "given"
	case TTLBase:
		return "base"
	case TTLContention:
		return "contention"
	case TTLRTT:
		return "rtt"
	case TTLMin:
		return "min"
	case TTLMax:
		return "max"
	case TTLHoldLimit:
		return "hold_limit"
	}
	return "unknown"
}

// SampleHook is implemented by a Hook that also observes the samples of
// WithAdaptiveTTL: the nodes' round-trip time and memory, read every
// AdaptiveTTL.SampleInterval. JoinHooks passes them on to the hooks that
// implement it. Like every Hook method, Sample must be fast.
type SampleHook interface {
	Sample(context.Context, SampleEvent)
}

// SampleEvent is one sample of WithAdaptiveTTL.
type SampleEvent struct {
	// RTT is the p95 of the nodes' round-trip times over the last minute
	// (acquire and refresh rounds, and the sampler's INFO); 0 when none.
	RTT time.Duration
	// Nodes is each node's memory, in node order.
	Nodes []NodeMemory
}

// NodeMemory is one node's memory, from INFO memory and INFO stats (on a
// Redis Cluster, the fullest master's, and the evictions of all).
type NodeMemory struct {
	Node int    // index in the slice given to New
	Addr string // for humans
	// UsedMemory and MaxMemory are INFO's used_memory and maxmemory, in
	// bytes; MaxMemory is 0 when the node has no limit.
	UsedMemory, MaxMemory int64
	// Policy is the node's maxmemory-policy.
	Policy string
	// Evicted is how many keys the node evicted since the previous sample
	// (INFO's evicted_keys went up by that much).
	Evicted int64
	// Pressure is empty when the node is fine, and otherwise says what is
	// wrong: keys evicted, or memory at AdaptiveTTL.MemoryRatio of
	// maxmemory. An evicted lock key breaks mutual exclusion like a node
	// that restarts without its data; no TTL prevents it.
	Pressure string
	// Err is the error of the node's INFO; the other fields are then
	// zero.
	Err error
}

// Sample passes the event to every hook that implements SampleHook.
func (j joined) Sample(ctx context.Context, e SampleEvent) {
	for _, h := range j {
		if s, ok := h.(SampleHook); ok {
			s.Sample(ctx, e)
		}
	}
}

// validateAdaptive checks WithAdaptiveTTL's settings and fills in the
// defaults.
func (c *config) validateAdaptive() error {
	a := c.adaptive
	if a == nil {
		return nil
	}
	switch {
	case a.Min <= 0 || a.Max <= 0:
		return invalid("adaptive TTL bounds [%v, %v]: Min and Max are required and must be positive", a.Min, a.Max)
	case a.Min > a.Max:
		return invalid("adaptive TTL Min %v is above Max %v", a.Min, a.Max)
	case a.Min < MinTTL:
		return invalid("adaptive TTL Min %v is below the minimum TTL %v", a.Min, MinTTL)
	case a.Max > c.maxTTL:
		return invalid("adaptive TTL Max %v is above the deployment's maximum TTL %v (WithMaxTTL)", a.Max, c.maxTTL)
	case a.RTTMultiple < 0 || math.IsNaN(a.RTTMultiple) || math.IsInf(a.RTTMultiple, 0) || (a.RTTMultiple > 0 && a.RTTMultiple < 3):
		return invalid("adaptive TTL RTTMultiple %v must be at least 3 (0: default %d)", a.RTTMultiple, DefaultRTTMultiple)
	case a.ContentionHalf < 0 || math.IsNaN(a.ContentionHalf) || math.IsInf(a.ContentionHalf, 0):
		return invalid("adaptive TTL ContentionHalf %v must be positive (0: default %d)", a.ContentionHalf, DefaultContentionHalf)
	case a.SampleInterval < 0 || (a.SampleInterval > 0 && a.SampleInterval < minSampleInterval):
		return invalid("adaptive TTL SampleInterval %v must be at least %v (0: default %v)", a.SampleInterval, minSampleInterval, DefaultSampleInterval)
	case a.MemoryRatio < 0 || a.MemoryRatio > 1 || math.IsNaN(a.MemoryRatio):
		return invalid("adaptive TTL MemoryRatio %v is outside (0, 1] (0: default %v)", a.MemoryRatio, DefaultMemoryRatio)
	}
	if _, err := c.checkTTL(a.Min); err != nil {
		return fmt.Errorf("adaptive TTL Min: %w", err)
	}
	if a.RTTMultiple == 0 {
		a.RTTMultiple = DefaultRTTMultiple
	}
	if a.ContentionHalf == 0 {
		a.ContentionHalf = DefaultContentionHalf
	}
	if a.SampleInterval == 0 {
		a.SampleInterval = DefaultSampleInterval
	}
	if a.MemoryRatio == 0 {
		a.MemoryRatio = DefaultMemoryRatio
	}
	return nil
}

// adaptive is the state of WithAdaptiveTTL: the RTT samples, the names'
// refusal rates and the sampler goroutine.
type adaptive struct {
	cfg AdaptiveTTL
	c   *Client

	mu      sync.Mutex
	rtts    [rttSamples]rttSample
	nRTT    int // samples written, ever
	p95     time.Duration
	p95At   time.Time // when p95 was computed; zero: stale
	names   map[string]*nameRate
	evicted []int64 // each node's evicted_keys at the last sample; -1: none yet
	warm    []bool  // the sampler read the node once: its dial is not an RTT
	// remote is, per lock key, the Clients subscribed to its release
	// channel (each has waiters) at the last sample, this Client included.
	remote   map[string]int64
	remoteAt time.Time
	started  bool
	stopped  bool
	cancel   context.CancelFunc
	finished chan struct{}
}

type rttSample struct {
	at time.Time
	d  time.Duration
}

// nameRate is a name's rate of refused attempts, decaying with
// contentionTau.
type nameRate struct {
	rate float64 // per second, at last
	last time.Time
}

func newAdaptive(c *Client) *adaptive {
	a := &adaptive{cfg: *c.cfg.adaptive, c: c, names: make(map[string]*nameRate), remote: make(map[string]int64)}
	a.evicted = make([]int64, len(c.nodes))
	a.warm = make([]bool, len(c.nodes))
	for i := range a.evicted {
		a.evicted[i] = -1
	}
	return a
}

// ttlFor is the TTL of an attempt or refresh of the lock key whose caller
// gave base, and why; base has passed checkTTL.
func (c *Client) ttlFor(key string, base time.Duration, fixed bool) (time.Duration, TTLReason) {
	if c.adapt == nil || fixed {
		return base, TTLGiven
	}
	c.adapt.start()
	return c.adapt.choose(key, base, time.Now())
}

// checkAdaptiveInterval refuses a refresh interval that an adaptive TTL
// could reach: the interval must be below every TTL the Client may pick.
func (c *Client) checkAdaptiveInterval(o *obtainConfig) error {
	if c.adapt == nil || o.fixedTTL || o.interval == 0 || o.interval < c.adapt.cfg.Min {
		return nil
	}
	return invalid("refresh interval %v must be below the adaptive TTL's Min %v", o.interval, c.adapt.cfg.Min)
}

// choose is the adaptive TTL for key (docs/adaptive-ttl.md):
//
//	contended = base / (1 + contention/ContentionHalf)
//	floor     = RTTMultiple × RTT p95
//	ttl       = min(Max, max(Min, floor, contended))
func (a *adaptive) choose(key string, base time.Duration, now time.Time) (time.Duration, TTLReason) {
	local := a.c.waiters(key)
	contention := float64(local) + a.refusals(key, now) + float64(a.otherClients(key, local > 0, now))
	p95 := a.rttP95(now)
	ttl, reason := base, TTLBase
	if contention > 0 {
		ttl = time.Duration(float64(base) / (1 + contention/a.cfg.ContentionHalf))
		if ttl < base {
			reason = TTLContention
		}
	}
	// In floating point: a huge multiple must not overflow a Duration.
	if floor := a.cfg.RTTMultiple * float64(p95); floor > float64(ttl) && floor > float64(a.cfg.Min) {
		ttl, reason = time.Duration(min(floor, float64(a.cfg.Max)+1)), TTLRTT
		if floor > float64(a.cfg.Max) {
			a.rttAtMax(p95)
		}
	}
	switch {
	case ttl > a.cfg.Max:
		ttl, reason = a.cfg.Max, TTLMax
	case ttl < a.cfg.Min:
		ttl, reason = a.cfg.Min, TTLMin
	}
	return ttl.Truncate(time.Millisecond), reason
}

// rttAtMax logs, at most once a minute, that the round-trip time asks for
// a TTL above Max.
func (a *adaptive) rttAtMax(p95 time.Duration) {
	l := a.c.cfg.logger
	if l == nil || !a.c.nodeLog.due(-1, logRTTAtMax, time.Now()) {
		return
	}
	l.LogAttrs(context.Background(), slog.LevelWarn,
		"redlock: adaptive TTL capped at Max although the nodes' round-trip time asks for more: validity margins are thinner than RTTMultiple",
		slog.Duration("rtt_p95", p95), slog.Float64("wanted_seconds", a.cfg.RTTMultiple*p95.Seconds()), slog.Duration("max", a.cfg.Max))
}

// waiters is the number of this Client's goroutines queued for the lock
// key.
func (c *Client) waiters(key string) int {
	c.waits.mu.Lock()
	defer c.waits.mu.Unlock()
	if q := c.waits.queues[key]; q != nil {
		return len(q.members)
	}
	return 0
}

// otherClients is the number of other Clients waiting for key at the last
// sample (PUBSUB NUMSUB of its release channel), if that sample is recent;
// own says this Client has waiters, and so a subscription, of its own.
func (a *adaptive) otherClients(key string, own bool, now time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.remoteAt) > 3*a.cfg.SampleInterval {
		return 0
	}
	n := a.remote[key]
	if own {
		n--
	}
	return max(n, 0)
}

// sampleWaiters counts, on every node that is not a Redis Cluster, the
// Clients subscribed to the release channels of up to maxSubNames names:
// this Client's held locks with an adaptive TTL and the names it was
// refused. A Client subscribes once per name and node while it has
// waiters, so the highest count over the nodes is the number of Clients
// waiting.
func (a *adaptive) sampleWaiters(ctx context.Context) {
	held := make([]*Lock, 0, maxSubNames)
	a.c.mu.Lock()
	for l := range a.c.held { // map order: another subset each time when there are more
		if len(held) >= maxSubNames {
			break
		}
		held = append(held, l)
	}
	a.c.mu.Unlock()
	names := make(map[string]string, maxSubNames) // channel → lock key
	for _, l := range held {
		l.mu.Lock()
		if l.base > 0 {
			names[keys.Channel(l.key)] = l.key
		}
		l.mu.Unlock()
	}
	a.mu.Lock()
	for k := range a.names {
		if len(names) >= maxSubNames {
			break
		}
		names[keys.Channel(k)] = k
	}
	a.mu.Unlock()
	channels := make([]string, 0, len(names))
	for ch := range names {
		channels = append(channels, ch)
	}
	counts := make(map[string]int64, len(channels))
	if len(channels) > 0 {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, n := range a.c.nodes {
			if n.Cluster {
				continue // sharded channels live on their slot's shard: not counted
			}
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
				defer cancel()
				subs, err := n.Client.PubSubNumSub(ctx, channels...).Result()
				if err != nil {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for ch, c := range subs {
					if k, ok := names[ch]; ok {
						counts[k] = max(counts[k], c)
					}
				}
			})
		}
		wg.Wait()
	}
	a.mu.Lock()
	a.remote, a.remoteAt = counts, time.Now()
	a.mu.Unlock()
}

// refusals is key's rate of refused attempts per second at now.
func (a *adaptive) refusals(key string, now time.Time) float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.names[key]
	if r == nil {
		return 0
	}
	return r.rate * math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds())
}

// refused counts an attempt on key that another owner refused.
func (a *adaptive) refused(key string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.names[key]
	if r == nil {
		if len(a.names) >= maxTrackedNames {
			a.prune(now)
			if len(a.names) >= maxTrackedNames {
				return
			}
		}
		r = &nameRate{last: now}
		a.names[key] = r
	}
	r.rate = r.rate*math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds()) + 1/contentionTau.Seconds()
	r.last = now
}

// prune forgets the names whose rate has decayed below one refusal a
// minute. a.mu must be held.
func (a *adaptive) prune(now time.Time) {
	for k, r := range a.names {
		if r.rate*math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds()) < 1.0/60 {
			delete(a.names, k)
		}
	}
}

// observeRTT records a round's round trips: each node's latency, or the
// round's timeout for a node that did not answer in time.
func observeRTT[T any](a *adaptive, replies []quorum.Reply[T], timeout time.Duration) {
	if a == nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range replies {
		d := r.Latency
		if d <= 0 && errors.Is(r.Err, quorum.ErrTimeout) {
			d = timeout
		}
		if d > 0 {
			a.addRTT(now, d)
		}
	}
}

// addRTT records one round trip. a.mu must be held.
func (a *adaptive) addRTT(now time.Time, d time.Duration) {
	a.rtts[a.nRTT%rttSamples] = rttSample{at: now, d: d}
	a.nRTT++
	if d > a.p95 {
		a.p95At = time.Time{} // a higher sample is seen at once
	}
}

// rttP95 is the p95 of the round trips of the last rttWindow, recomputed
// at most every rttRecompute unless a sample above it came.
func (a *adaptive) rttP95(now time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.p95At.IsZero() && now.Sub(a.p95At) < rttRecompute {
		return a.p95
	}
	n := min(a.nRTT, rttSamples)
	ds := make([]time.Duration, 0, n)
	for _, s := range a.rtts[:n] {
		if now.Sub(s.at) < rttWindow {
			ds = append(ds, s.d)
		}
	}
	a.p95, a.p95At = 0, now
	if len(ds) >= rttMinSamples {
		slices.Sort(ds)
		a.p95 = ds[(len(ds)*95+99)/100-1]
	}
	return a.p95
}

// start starts the sampler, once, unless the Client is closed.
func (a *adaptive) start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.stopped {
		return
	}
	a.started = true
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.finished = cancel, make(chan struct{})
	go a.loop(ctx)
}

// stop stops the sampler and waits for it; no sampler starts after it.
func (a *adaptive) stop() {
	a.mu.Lock()
	a.stopped = true
	started := a.started
	a.mu.Unlock()
	if started {
		a.cancel()
		<-a.finished
	}
}

func (a *adaptive) loop(ctx context.Context) {
	defer close(a.finished)
	t := time.NewTicker(a.cfg.SampleInterval)
	defer t.Stop()
	for {
		a.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads every node's memory, records the round trips, and reports
// the sample to the hook and any pressure to the logger.
func (a *adaptive) sample(ctx context.Context) {
	nodes := make([]NodeMemory, len(a.c.nodes))
	var wg sync.WaitGroup
	for i, n := range a.c.nodes {
		wg.Go(func() {
			nodes[i] = a.readNode(ctx, n)
		})
	}
	wg.Wait()
	a.sampleWaiters(ctx)
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	a.mu.Lock()
	for i := range nodes {
		m := &nodes[i]
		if m.Err != nil {
			continue
		}
		total := m.Evicted // readNode puts the node's total here
		if prev := a.evicted[i]; prev >= 0 && total >= prev {
			m.Evicted = total - prev
		} else {
			m.Evicted = 0 // first sample, or a restarted node
		}
		a.evicted[i] = total
		m.Pressure = pressure(m, a.cfg.MemoryRatio)
	}
	a.mu.Unlock()
	if l := a.c.cfg.logger; l != nil {
		for _, m := range nodes {
			if m.Err != nil && a.c.nodeLog.due(m.Node, logSampleErr, now) {
				l.LogAttrs(ctx, slog.LevelWarn, "redlock: adaptive TTL cannot read the node's memory (INFO): its memory pressure is unknown",
					slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("error", m.Err.Error()))
			}
			if m.Pressure == "" || !a.c.nodeLog.due(m.Node, logMemory, now) {
				continue
			}
			l.LogAttrs(ctx, slog.LevelWarn, "redlock: node under memory pressure: lock keys can be evicted or refused (the adaptive TTL does not shorten TTLs for it)",
				slog.Int("node", m.Node), slog.String("addr", m.Addr), slog.String("pressure", m.Pressure),
				slog.Int64("used_memory", m.UsedMemory), slog.Int64("maxmemory", m.MaxMemory), slog.String("policy", m.Policy))
		}
	}
	if h, ok := a.c.cfg.hook.(SampleHook); ok {
		h.Sample(ctx, SampleEvent{RTT: a.rttP95(now), Nodes: nodes})
	}
}

// pressure says what is wrong with a node's memory, or "" when nothing is.
func pressure(m *NodeMemory, ratio float64) string {
	var why []string
	if m.Evicted > 0 {
		why = append(why, fmt.Sprintf("%d keys evicted since the last sample (maxmemory-policy %s): a lock key may be among them", m.Evicted, m.Policy))
	}
	if m.MaxMemory > 0 && float64(m.UsedMemory) >= ratio*float64(m.MaxMemory) {
		effect := "keys will be evicted"
		if m.Policy == "noeviction" {
			effect = "writes, acquires included, will be refused"
		}
		why = append(why, fmt.Sprintf("used_memory %d is %.0f%% of maxmemory %d (maxmemory-policy %s): %s",
			m.UsedMemory, 100*float64(m.UsedMemory)/float64(m.MaxMemory), m.MaxMemory, m.Policy, effect))
	}
	return strings.Join(why, "; ")
}

// readNode reads one node's memory; its Evicted is the node's total
// evicted_keys, which sample turns into a difference. On a Redis Cluster
// it reads every master, and reports the fullest and the sum of
// evictions.
func (a *adaptive) readNode(ctx context.Context, n *quorum.Node) NodeMemory {
	m := NodeMemory{Node: n.Index, Addr: n.Addr}
	read := func(ctx context.Context, c redis.Cmdable) (NodeMemory, error) {
		ctx, cancel := context.WithTimeout(ctx, sampleTimeout)
		defer cancel()
		start := time.Now()
		var mem, stats *redis.StringCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			mem = p.Info(ctx, "memory")
			stats = p.Info(ctx, "stats")
			return nil
		})
		if err != nil {
			return NodeMemory{}, err
		}
		a.mu.Lock()
		if a.warm[n.Index] {
			a.addRTT(time.Now(), time.Since(start))
		}
		a.warm[n.Index] = true
		a.mu.Unlock()
		return parseMemory(mem.Val() + stats.Val()), nil
	}
	if cc, ok := n.Client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			s, err := read(ctx, c)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			ev := m.Evicted + s.Evicted
			if m.Policy == "" || fuller(s, m) {
				m.UsedMemory, m.MaxMemory, m.Policy = s.UsedMemory, s.MaxMemory, s.Policy
			}
			m.Evicted = ev
			return nil
		})
		if err != nil {
			return NodeMemory{Node: n.Index, Addr: n.Addr, Err: err}
		}
		return m
	}
	s, err := read(ctx, n.Client)
	if err != nil {
		m.Err = err
		return m
	}
	m.UsedMemory, m.MaxMemory, m.Policy, m.Evicted = s.UsedMemory, s.MaxMemory, s.Policy, s.Evicted
	return m
}

// fuller reports whether x is closer to its maxmemory than y.
func fuller(x, y NodeMemory) bool {
	ratio := func(m NodeMemory) float64 {
		if m.MaxMemory <= 0 {
			return 0
		}
		return float64(m.UsedMemory) / float64(m.MaxMemory)
	}
	return ratio(x) > ratio(y)
}

// parseMemory reads used_memory, maxmemory, maxmemory_policy and
// evicted_keys (into Evicted) from INFO's text.
func parseMemory(info string) NodeMemory {
	var m NodeMemory
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_memory":
			m.UsedMemory, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			m.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
		case "maxmemory_policy":
			m.Policy = v
		case "evicted_keys":
			m.Evicted, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m
}

// acquireRefused reports whether an acquire round met another owner.
func acquireRefused(replies []quorum.Reply[script.Acquired]) bool {
	for _, r := range replies {
		if r.Err == nil && r.Val.Status == script.Held {
			return true
		}
	}
	return false
}
