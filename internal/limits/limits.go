// Package limits holds the defaults, the bounds and the arithmetic of
// validity and quorums that the library and its command line tool share, so
// that the tool never keeps a copy of a library constant.
package limits

import "time"

const (
	// Prefix is prepended to every lock name to form its Redis key
	// (WithPrefix).
	Prefix = "redlock:"
	// DriftFactor is the share of the TTL set aside for clock rate drift
	// between the client and the nodes (WithDriftFactor).
	DriftFactor = 0.01
	// DriftFixed is added to the drift allowance: the granularity of Redis
	// expiry (milliseconds) plus a margin.
	DriftFixed = 2 * time.Millisecond
	// MinRetryDelay and MaxRetryDelay bound the wait between two attempts
	// of an obtain (WithRetryDelay).
	MinRetryDelay = 10 * time.Millisecond
	MaxRetryDelay = 500 * time.Millisecond
	// MaxTTL is the longest TTL accepted unless WithMaxTTL says otherwise,
	// and so the recovery window of a restarted node.
	MaxTTL = time.Minute
	// MaxMaxTTL is the largest max TTL that WithMaxTTL accepts: the
	// longest recovery window a restarted node can be given, and the
	// longest that one Client can raise a node's epoch record to.
	MaxMaxTTL = time.Hour
	// EpochTrust is how long a node trusts its last check of its own
	// identity (run_id) before checking again with INFO. A deployment
	// whose failovers are detected faster than this (Sentinel's
	// down-after-milliseconds) is not protected against them.
	EpochTrust = 50 * time.Millisecond
	// MaxNodes is the most nodes a Client takes: a lock keeps one bit per
	// node.
	MaxNodes = 64
	// MinTTL is the shortest TTL accepted: below it the fixed 2 ms of the
	// drift allowance and a round trip leave no validity.
	MinTTL = 10 * time.Millisecond
	// MaxNames is the most lock names of one Client.All or Client.Any.
	MaxNames = 1024
	// MaxPermits is the most permits of a semaphore. Each node keeps one
	// hash field per live permit and every permit script reads them all.
	MaxPermits = 1024
	// MaxLeaseVersion bounds the versions of a degraded mode's lease
	// store: they lie in [1, MaxLeaseVersion).
	MaxLeaseVersion = 1 << 62
)

// DriftAllowance is the part of a lock's TTL set aside for clock drift
// between the client and the nodes, and for the granularity of Redis
// expiry. A lock obtained after elapsed time is valid for
// TTL − elapsed − DriftAllowance(TTL, factor); tools that judge a
// deployment's clocks (redlock doctor) compare offsets against it.
func DriftAllowance(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + DriftFixed
}

// NodeTimeout is the per-node timeout of a call with this TTL when
// WithNodeTimeout is not given: TTL/20 (500 ms for a 10 s TTL), at least
// 10 ms but never more than TTL/4, and at most 1 s.
//
// Rounds are parallel and decide as soon as a quorum agrees, so a dead or
// frozen node does not slow a round that the others can decide, and after
// three timeouts in a row the node is skipped for a second. The timeout only
// bounds a round that needs the slow node; set generously, it keeps a loaded
// machine's queueing (a full connection pool, a GC pause) from counting as a
// failed node. Safety never depends on it: a lock's validity is checked when
// the round is decided.
func NodeTimeout(ttl time.Duration) time.Duration {
	t := min(ttl/20, time.Second)
	if t < 10*time.Millisecond {
		t = min(10*time.Millisecond, ttl/4)
	}
	return t
}

// Majority is the quorum of a lock on n nodes: n/2+1.
func Majority(n int) int { return n/2 + 1 }

// PermitQuorum returns how many of n independent nodes must agree to each
// permit of a semaphore of k permits: floor(n*k/(k+1)) + 1, a majority for
// k = 1 and all n nodes once k >= n-1. It returns 0 when n or k is below 1.
//
// A majority is not enough: two majorities share a node, but k+1 of them
// need not share one that would have to admit all k+1. With this quorum,
// k+1 permits would need (k+1)*q > n*k votes, so some node would have
// admitted k+1 permits, and no node admits more than k (docs/safety.md,
// "Semaphores"). It is also the smallest quorum that guarantees it.
func PermitQuorum(n, k int) int {
	if n < 1 || k < 1 {
		return 0
	}
	return n*k/(k+1) + 1
}
