package redlock

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redlock-go/redlock/internal/adaptive"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/quorum"
)

// The adaptive TTL (WithAdaptiveTTL, docs/adaptive-ttl.md): its settings,
// the TTL of each attempt and refresh, and the round trips it is fed. The
// policy is internal/adaptive's; the sampler that also feeds it is in
// sampler.go.

// AdaptiveTTL configures WithAdaptiveTTL: the bounds of the TTLs it picks
// and how it weighs its signals. Min and Max are required; a zero value in
// any other field means its default.
type AdaptiveTTL struct {
	// Min and Max bound every TTL picked: 10 ms ≤ Min ≤ Max ≤ the
	// deployment's maximum TTL (WithMaxTTL). No TTL above Max is ever
	// used. The one exception to Min: the last automatic refreshes before
	// a WithMaxHold limit ask only for the time left to the limit (reason
	// "hold_limit"), which may be below Min, down to 10 ms.
	Min, Max time.Duration
	// RTTMultiple: the TTL is raised to at least RTTMultiple × the p95 of
	// the nodes' round-trip times, so that the validity stays far above a
	// round trip. Default 40; at least 3.
	RTTMultiple float64
	// ContentionHalf is the contention on a name at which the TTL is
	// halved: the TTL is ttl / (1 + contention/ContentionHalf). Contention
	// is this Client's goroutines waiting for the name, plus the other
	// Clients waiting for it (counted by the sampler), plus this Client's
	// attempts refused because another owner held it, per second. Default
	// 4.
	ContentionHalf float64
	// SampleInterval is how often a goroutine of the Client reads INFO
	// (memory and stats) from every node, to report memory pressure and
	// measure round trips when no lock is taken, and counts the Clients
	// waiting for its names (PUBSUB NUMSUB). Default 5 s.
	SampleInterval time.Duration
	// MemoryRatio: a node whose used_memory is at least MemoryRatio ×
	// maxmemory is reported under memory pressure. In (0, 1]; default 0.9.
	MemoryRatio float64
}

// WithAdaptiveTTL makes the Client pick the TTL of every acquire attempt
// and every refresh, automatic or manual, within [a.Min, a.Max]: the TTL
// given to an obtain or to Refresh becomes the base that the Client
// adjusts. It lowers it when the name is contended (a crashed holder's lock
// is handed over sooner) and raises it to cover the nodes' round-trip time.
// Memory pressure on the nodes is reported (SampleEvent, the logger) and
// changes no TTL. A shorter TTL does not weaken mutual exclusion: it only
// makes a lock whose refreshes fail lost sooner.
//
// The TTL chosen and its reason are in ObtainEvent and RefreshEvent, and
// Lock.TTL returns it. WithFixedTTL opts one obtain out. The sampler reads
// INFO from every node every a.SampleInterval on a goroutine that starts
// with the first obtain and that Close stops. See docs/adaptive-ttl.md.
//
// New returns an error wrapping ErrInvalid when a is out of range: Min or
// Max missing, Min above Max, Min below 10 ms or too short for the
// per-node timeout, Max above WithMaxTTL, or another field out of its
// range.
func WithAdaptiveTTL(a AdaptiveTTL) Option {
	return clientOption(func(c *config) { c.adaptive = &a })
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
	case a.Min < limits.MinTTL:
		return invalid("adaptive TTL Min %v is below the minimum TTL %v", a.Min, limits.MinTTL)
	case a.Max > c.maxTTL:
		return invalid("adaptive TTL Max %v is above the deployment's maximum TTL %v (WithMaxTTL)", a.Max, c.maxTTL)
	case a.RTTMultiple < 0 || math.IsNaN(a.RTTMultiple) || math.IsInf(a.RTTMultiple, 0) || (a.RTTMultiple > 0 && a.RTTMultiple < 3):
		return invalid("adaptive TTL RTTMultiple %v must be at least 3 (0: default %d)", a.RTTMultiple, adaptive.RTTMultiple)
	case a.ContentionHalf < 0 || math.IsNaN(a.ContentionHalf) || math.IsInf(a.ContentionHalf, 0):
		return invalid("adaptive TTL ContentionHalf %v must be positive (0: default %d)", a.ContentionHalf, adaptive.ContentionHalf)
	case a.SampleInterval < 0 || (a.SampleInterval > 0 && a.SampleInterval < adaptive.MinSampleInterval):
		return invalid("adaptive TTL SampleInterval %v must be at least %v (0: default %v)", a.SampleInterval, adaptive.MinSampleInterval, adaptive.SampleInterval)
	case a.MemoryRatio < 0 || a.MemoryRatio > 1 || math.IsNaN(a.MemoryRatio):
		return invalid("adaptive TTL MemoryRatio %v is outside (0, 1] (0: default %v)", a.MemoryRatio, adaptive.MemoryRatio)
	}
	if _, err := c.checkTTL(a.Min); err != nil {
		return fmt.Errorf("adaptive TTL Min: %w", err)
	}
	if a.RTTMultiple == 0 {
		a.RTTMultiple = adaptive.RTTMultiple
	}
	if a.ContentionHalf == 0 {
		a.ContentionHalf = adaptive.ContentionHalf
	}
	if a.SampleInterval == 0 {
		a.SampleInterval = adaptive.SampleInterval
	}
	if a.MemoryRatio == 0 {
		a.MemoryRatio = adaptive.MemoryRatio
	}
	return nil
}

// observeRTT records a round's round trips for the adaptive TTL: each
// node's latency, or the round's timeout for a node that did not answer in
// time.
func observeRTT[T any](e *engine, replies []quorum.Reply[T], timeout time.Duration) {
	if e.adapt == nil {
		return
	}
	ds := make([]time.Duration, 0, len(replies))
	for _, r := range replies {
		d := r.Latency
		if d <= 0 && errors.Is(r.Err, quorum.ErrTimeout) {
			d = timeout
		}
		ds = append(ds, d)
	}
	e.adapt.AddRTT(e.cfg.now(), ds...)
}
