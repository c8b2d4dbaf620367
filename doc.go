// Package redlock provides distributed locks on Redis: the single-instance
// lock (SET NX PX with a compare-and-delete release) on one node, and the
// Redlock algorithm on N independent nodes.
//
// # Use
//
//	c, err := redlock.New([]redis.UniversalClient{n1, n2, n3, n4, n5})
//	...
//	lock, err := c.Obtain(ctx, "order:42", 10*time.Second)
//	if err != nil { ... }
//	defer lock.Release(ctx)
//	// The lock is held until lock.ValidUntil(), unless refreshed.
//
// # Safety
//
// With N nodes, a lock is obtained when a quorum of N/2+1 nodes agreed
// within its validity: TTL − elapsed − (TTL × drift factor + 2 ms), measured
// on the monotonic clock from before the first request was sent. Any two
// quorums share a node, and a node holds one owner's key at a time, so two
// clients cannot both hold a valid lock, provided that the nodes are
// independent (not replicas of one another), that clocks run at rates within
// the drift factor of one another, and that a node that loses its data does
// not take part in locking for at least one TTL after it restarts. The file
// docs/safety.md in the repository gives the whole argument.
//
// A lock is not a guarantee that the holder's work finishes before the lock
// expires: a paused process can outlive its lock. Check ValidUntil, refresh
// in time, and let the resource reject stale writers.
//
// # The lock family
//
// Beside the plain lock, ObtainOptions select the lock family (see
// docs/lock-family.md in the repository): WithOwner makes a reentrant lock,
// which its owner may obtain again while holding it, through any Client,
// keeping its fencing token; WithShared and WithExclusive make the readers
// and the writer of a read-write lock. Each kind has everything the plain
// lock has: validity, keep-alive, Do, fencing tokens, the restart guard,
// notified waiting and hooks (events carry the Kind). A plain lock and a
// lock of the family never share a name (ErrWrongKind). ObtainAll obtains
// several names as one lock, all or nothing. ObtainAny obtains whichever of
// several names is free: a segmented lock, for a hot resource split into
// segments that each have a name; it waits on all of them at once when
// none is free.
//
// # Circuit breaker and degraded mode
//
// A Client counts a node unreachable after three requests in a row without
// a reply (WithBreaker). When fewer than a quorum are reachable its breaker
// opens: TryObtain fails at once with a *BreakerError (ErrBreakerOpen,
// naming each unreachable node), Obtain and Do wait for it to close (their
// context bounds the wait), and a PING to every node each second (the
// half-open probe) closes it once a quorum answers. Refreshes and releases
// are never refused by it. WithoutBreaker turns it off.
//
// WithDegradedMode (off by default) installs a LeaseStore used while the
// breaker is open: NewLocalLeases in memory, or the redlocksql module's
// SQLite and PostgreSQL stores. A lock taken there is degraded: Degraded
// reports it, IsDegraded sees it in Do's function, a BreakerHook hears of
// it, and its Token is negative (DegradedTokenBase + the lease's version),
// below every Redis token. It excludes only the clients that fell back to
// the same store, not a client that still reaches a quorum: the degraded
// mode trades mutual exclusion for availability (docs/safety.md, section
// 7). Once the breaker closes, a degraded lock is not extended (ErrDegraded)
// and runs out; it is never silently moved to Redis.
// # Semaphores
//
// ObtainPermit (and TryObtainPermit) takes one of the k permits of a named
// semaphore: at most k permits of a name are valid at once. A permit is a
// *Lock of Kind Permit, with its TTL, keep-alive, Done and Err, Release, a
// fencing token, the restart guard, notified waiting and hooks; a permit
// whose holder crashed expires on the nodes. On N independent nodes each
// permit needs PermitQuorum(N, k) = floor(N·k/(k+1)) + 1 of them, a
// majority for k = 1 but all five of five nodes once k >= 4: that is the
// availability a semaphore costs. One node, including a Sentinel- or
// Cluster-backed one, serves any k. A semaphore never shares a name with a
// lock (ErrWrongKind), and its k cannot change while a permit is live
// (ErrPermitCount). See docs/safety.md, "Semaphores".
//
// # Adaptive TTL
//
// WithAdaptiveTTL makes the TTL given to Obtain (and Refresh) a base that
// the Client adjusts for each attempt and refresh, within [Min, Max] (the
// last refreshes before a WithMaxHold limit may go below Min): it is
// raised to cover the nodes' round-trip time (p95) and lowered while the
// name is contended, never above Max. A sampler reads INFO from every node
// and reports memory pressure (SampleHook, WithLogger) without shortening
// any TTL. ObtainEvent and RefreshEvent carry the TTL and its TTLReason.
// A shorter TTL does not weaken mutual exclusion: it only makes a lock
// whose refreshes fail lost sooner. See docs/adaptive-ttl.md.
//
// # Nodes
//
// Give each node's go-redis client ContextTimeoutEnabled: true, so that a
// frozen node releases its connection at the per-node timeout; see
// WithNodeTimeout. A node that times out three times in a row is skipped
// for one second (ErrNodeSkipped), then probed with a single request.
package redlock
