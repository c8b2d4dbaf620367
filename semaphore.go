package redlock

import (
	"context"
	"errors"
	"time"
)

// MaxPermits is the most permits a semaphore has (ObtainPermit's k). Each
// node keeps one hash field per live permit and every permit script reads
// them all, so k is the cost of one call on a node.
const MaxPermits = 1024

// ErrPermitCount is the per-node reason, inside an obtain's *QuorumError,
// when ObtainPermit names a semaphore that is in use with another number
// of permits. A semaphore's k is stored on each node with its permits and
// is fixed while any permit is live there; once every permit is released
// or expired, the next ObtainPermit may set another k. ObtainPermit does
// not wait for that: the mismatch is a bug to fix.
var ErrPermitCount = errors.New("the semaphore is in use with another number of permits")

// PermitQuorum returns how many of n independent nodes must agree to each
// permit of a semaphore of k permits: floor(n*k/(k+1)) + 1, a majority for
// k = 1 and all n nodes once k >= n-1. It returns 0 when n or k is below 1.
//
// A majority is not enough: two majorities share a node, but k+1 of them
// need not share one that would have to admit all k+1. With this quorum,
// k+1 permits would need (k+1)*q > n*k votes, so some node would have
// admitted k+1 permits, and no node admits more than k (docs/safety.md,
// "Semaphores"). It is also the smallest quorum that guarantees it.
//
// It is the availability the semaphore costs: a permit needs n-q+1 nodes
// down or unreachable to be refused, where a lock needs n/2+1. For n = 5:
//
//	k = 1        3 nodes (a majority; survives 2 down)
//	k = 2 or 3   4 nodes (survives 1 down)
//	k >= 4       all 5   (no node may be down)
//
// One node, including a Sentinel- or Cluster-backed one, is a quorum of 1
// for every k.
func PermitQuorum(n, k int) int {
	if n < 1 || k < 1 {
		return 0
	}
	return n*k/(k+1) + 1
}

// checkPermits is ObtainPermit's check of k.
func checkPermits(k int) error {
	if k < 1 || k > MaxPermits {
		return invalid("%d permits: a semaphore has 1 to %d (MaxPermits)", k, MaxPermits)
	}
	return nil
}

// ObtainPermit obtains one of the k permits of the semaphore named name,
// for ttl, waiting like Obtain until a permit is free, ctx ends or the
// attempts of WithMaxAttempts are used up. At most k permits of a name are
// valid at any moment, across every Client that uses the same nodes and
// prefix.
//
// The permit is a *Lock of Kind Permit, with everything a lock has: its
// TTL and validity, Refresh and WithAutoRefresh, Done and Err, Release, a
// fencing token, the restart guard and notified waiting (a release wakes
// the waiters). A permit whose holder crashed is taken back by the nodes
// when its TTL runs out. Its token is greater than that of every permit of
// the name granted before this call began (but permits obtained at the
// same time may share a token: see docs/safety.md, "Semaphores").
//
// On n independent nodes a permit needs PermitQuorum(n, k) of them, more
// than the majority of a lock once k > 1: with five nodes, all five for
// k >= 4, so one node down refuses every permit. One node (standalone,
// Sentinel or Cluster) serves any k.
//
// k must be 1 to MaxPermits, and the same for every user of the name while
// any permit is live: a different k is refused with ErrPermitCount inside
// the *QuorumError, without waiting. A name held by a plain lock or a lock
// of the family is refused with ErrWrongKind, likewise. WithOwner,
// WithShared and WithExclusive do not apply (ErrInvalid). Other errors
// are those of Obtain: ErrNotObtained (inside a *QuorumError) when no
// permit was free or no quorum agreed in time, ErrClosed, ErrInvalid for a
// bad name, TTL or k, and ctx's error when ctx ends.
//
// The caller must Release the returned permit.
func (c *Client) ObtainPermit(ctx context.Context, name string, k int, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	o := obtainConfig{retry: c.cfg.retry, kind: Permit, permits: k}
	return c.obtain(ctx, name, ttl, o, opts)
}

// TryObtainPermit makes one attempt to obtain one of the k permits of the
// semaphore named name, at once, like TryObtain. Its errors are those of
// ObtainPermit; ErrNotObtained when every permit is taken.
//
// The caller must Release the returned permit.
func (c *Client) TryObtainPermit(ctx context.Context, name string, k int, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	o := obtainConfig{retry: c.cfg.retry, kind: Permit, permits: k, try: true}
	return c.obtain(ctx, name, ttl, o, opts)
}

// optionOf names the option of a kind of the family, for errors.
func optionOf(k Kind) string {
	switch k {
	case Reentrant:
		return "WithOwner"
	case Write:
		return "WithExclusive"
	case Read:
		return "WithShared"
	}
	return k.String()
}
