package redlock

import "time"

// DriftAllowance is the part of a lock's TTL set aside for clock drift
// between the client and the nodes: TTL × factor (WithDriftFactor,
// DefaultDriftFactor by default) plus 2 ms for the granularity of Redis
// expiry. A lock obtained after elapsed time is valid for
// TTL − elapsed − DriftAllowance(TTL, factor); tools that judge a
// deployment's clocks (redlock doctor) compare offsets against it.
func DriftAllowance(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + driftFixed
}
