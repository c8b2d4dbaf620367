// Package adaptive is the policy of the adaptive TTL (WithAdaptiveTTL): it
// picks the TTL of each acquire attempt and refresh from a base, the nodes'
// round-trip times and the contention on the name (docs/adaptive-ttl.md).
// It does no I/O: the Client feeds it the round trips of its rounds, its
// refused attempts, its local waiters, and the sampler's counts of other
// Clients' waiters.
package adaptive

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Defaults of the optional settings (docs/adaptive-ttl.md says why each has
// the value it has).
const (
	// RTTMultiple: the TTL is at least this many times the nodes'
	// round-trip time (p95), so that a round spends at most 2.5% of the
	// TTL, and the default per-node timeout (TTL/20) is at least twice the
	// p95.
	RTTMultiple = 40
	// ContentionHalf is the contention on a name (waiters plus refused
	// attempts per second) at which the TTL is half the base.
	ContentionHalf = 4
	// SampleInterval is how often the sampler reads INFO from every node.
	SampleInterval = 5 * time.Second
	// MemoryRatio is the share of maxmemory in use above which a node is
	// reported under memory pressure.
	MemoryRatio = 0.9
	// MinSampleInterval keeps the sampler from hammering the nodes.
	MinSampleInterval = 10 * time.Millisecond
)

// The reasons a TTL has its value (ObtainEvent.TTLReason).
const (
	Given      = "given"      // no adaptive TTL: as given
	Base       = "base"       // nothing moved it
	Contention = "contention" // lowered while the name is contended
	RTT        = "rtt"        // raised to cover the round trips
	Min        = "min"        // raised to Min
	Max        = "max"        // lowered to Max
	HoldLimit  = "hold_limit" // cut short by a hold limit (WithMaxHold)
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
)

// Settings are the policy's bounds and weights, defaults filled in.
type Settings struct {
	Min, Max       time.Duration
	RTTMultiple    float64
	ContentionHalf float64
	// SampleInterval is the sampler's; counts of other Clients older than
	// three intervals are not used.
	SampleInterval time.Duration
}

// Policy is the adaptive TTL's state: the round trips, the names' refusal
// rates and the last counts of other Clients' waiters. It is safe for
// concurrent use.
type Policy struct {
	s Settings

	mu    sync.Mutex
	rtts  [rttSamples]rttSample
	nRTT  int // samples written, ever
	p95   time.Duration
	p95At time.Time // when p95 was computed; zero: stale
	names map[string]*nameRate
	// remote is, per lock key, the Clients subscribed to its release
	// channel (each has waiters) at the last sample, this Client included.
	remote   map[string]int64
	remoteAt time.Time
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

// New returns a Policy with settings s.
func New(s Settings) *Policy {
	return &Policy{s: s, names: make(map[string]*nameRate), remote: make(map[string]int64)}
}

// Settings returns the policy's settings.
func (p *Policy) Settings() Settings { return p.s }

// Choose is the TTL for the lock key whose caller gave base, with local
// goroutines of this Client waiting for it, and why
// (docs/adaptive-ttl.md):
//
//	contended = base / (1 + contention/ContentionHalf)
//	floor     = RTTMultiple × RTT p95
//	ttl       = min(Max, max(Min, floor, contended))
//
// atMax is set when the round trips asked for more than Max.
func (p *Policy) Choose(key string, base time.Duration, local int, now time.Time) (ttl time.Duration, reason string, atMax time.Duration) {
	contention := float64(local) + p.refusals(key, now) + float64(p.otherClients(key, local > 0, now))
	p95 := p.RTTP95(now)
	ttl, reason = base, Base
	if contention > 0 {
		ttl = time.Duration(float64(base) / (1 + contention/p.s.ContentionHalf))
		if ttl < base {
			reason = Contention
		}
	}
	// In floating point: a huge multiple must not overflow a Duration.
	if floor := p.s.RTTMultiple * float64(p95); floor > float64(ttl) && floor > float64(p.s.Min) {
		ttl, reason = time.Duration(min(floor, float64(p.s.Max)+1)), RTT
		if floor > float64(p.s.Max) {
			atMax = p95
		}
	}
	switch {
	case ttl > p.s.Max:
		ttl, reason = p.s.Max, Max
	case ttl < p.s.Min:
		ttl, reason = p.s.Min, Min
	}
	return ttl.Truncate(time.Millisecond), reason, atMax
}

// otherClients is the number of other Clients waiting for key at the last
// sample, if that sample is recent; own says this Client has waiters, and
// so a subscription, of its own.
func (p *Policy) otherClients(key string, own bool, now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.remoteAt) > 3*p.s.SampleInterval {
		return 0
	}
	n := p.remote[key]
	if own {
		n--
	}
	return max(n, 0)
}

// SetWaiting records the sampler's count, per lock key, of the Clients
// waiting for it (this one included).
func (p *Policy) SetWaiting(counts map[string]int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remote, p.remoteAt = counts, now
}

// Contended returns up to n lock keys whose refusals are tracked, for the
// sampler to count their waiters.
func (p *Policy) Contended(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([]string, 0, min(n, len(p.names)))
	for k := range p.names {
		if len(keys) >= n {
			break
		}
		keys = append(keys, k)
	}
	return keys
}

// refusals is key's rate of refused attempts per second at now.
func (p *Policy) refusals(key string, now time.Time) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.names[key]
	if r == nil {
		return 0
	}
	return r.rate * math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds())
}

// Refused counts an attempt on key that another owner refused.
func (p *Policy) Refused(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.names[key]
	if r == nil {
		if len(p.names) >= maxTrackedNames {
			p.prune(now)
			if len(p.names) >= maxTrackedNames {
				return
			}
		}
		r = &nameRate{last: now}
		p.names[key] = r
	}
	r.rate = r.rate*math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds()) + 1/contentionTau.Seconds()
	r.last = now
}

// prune forgets the names whose rate has decayed below one refusal a
// minute. p.mu must be held.
func (p *Policy) prune(now time.Time) {
	for k, r := range p.names {
		if r.rate*math.Exp(-now.Sub(r.last).Seconds()/contentionTau.Seconds()) < 1.0/60 {
			delete(p.names, k)
		}
	}
}

// AddRTT records round trips measured at now.
func (p *Policy) AddRTT(now time.Time, ds ...time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		if d <= 0 {
			continue
		}
		p.rtts[p.nRTT%rttSamples] = rttSample{at: now, d: d}
		p.nRTT++
		if d > p.p95 {
			p.p95At = time.Time{} // a higher sample is seen at once
		}
	}
}

// RTTP95 is the p95 of the round trips of the last minute, recomputed at
// most every rttRecompute unless a sample above it came; 0 with fewer than
// rttMinSamples.
func (p *Policy) RTTP95(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.p95At.IsZero() && now.Sub(p.p95At) < rttRecompute {
		return p.p95
	}
	n := min(p.nRTT, rttSamples)
	ds := make([]time.Duration, 0, n)
	for _, s := range p.rtts[:n] {
		if now.Sub(s.at) < rttWindow {
			ds = append(ds, s.d)
		}
	}
	p.p95, p.p95At = 0, now
	if len(ds) >= rttMinSamples {
		slices.Sort(ds)
		p.p95 = ds[(len(ds)*95+99)/100-1]
	}
	return p.p95
}
