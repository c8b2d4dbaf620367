// Package redlock provides distributed locks on Redis: the single-instance
// lock (SET NX PX with a compare-and-delete release) on one node, and the
// Redlock algorithm on N independent nodes. It is for Go services where
// something must happen once: a flash sale that must not oversell, a cron
// job that must run on one instance of a fleet, a payment that must not be
// processed twice.
//
// # Use
//
// New takes a go-redis client per node (NewFromNodes takes the nodes of
// any driver: package driver):
//
//	c, err := redlock.New(nodes, redlock.WithLogger(slog.Default()))
//	...
//	defer c.Close() // releases locks still held
//
//	// The simplest form: obtain, keep alive, run, release.
//	err = c.Do(ctx, "payment:8812", 10*time.Second, func(ctx context.Context) error {
//		// ctx is cancelled (cause redlock.ErrLost) if the lock is lost.
//		log.Print("holding payment:8812")
//		return nil
//	})
//
//	// Or hold it yourself.
//	lock, err := c.TryObtain(ctx, "cron:cleanup", time.Minute)
//	if errors.Is(err, redlock.ErrHeld) {
//		return // another instance runs the job
//	} else if err != nil {
//		log.Fatal(err) // no quorum of nodes answered; the error says why, node by node
//	}
//	defer lock.Release(ctx)
//
//	// ... work, refreshing before lock.ValidUntil() ...
//	if err := lock.Refresh(ctx, time.Minute); errors.Is(err, redlock.ErrNotHeld) {
//		log.Fatal("lost the lock: stop")
//	}
//
// Obtain, unlike TryObtain, waits for the lock until its context ends. On
// nodes just started, the first minute is refused: a node whose Redis
// process is new answers "recovering" for the longest TTL (WithMaxTTL, 1
// minute by default), so that it cannot give out a lock it forgot in a
// restart (the restart guard, below); with WithLogger, the Client logs
// each recovering node at once, and why. The README of the repository has the
// whole program (its quick start), what you get, and where each part is
// documented.
//
// # Handles
//
// A handle names a lock and its kind; each Obtain, TryObtain or Do of it
// gets a new *Lock. Every handle is a Locker:
//
//	c.Mutex("order:42")            // the plain lock (Obtain, TryObtain, Do on the Client are its shorthand)
//	c.Reentrant("job:nightly", id) // reentrant: its owner may obtain it again while holding it
//	r, w := c.RWMutex("doc:7")     // a read-write lock: readers share it, a writer holds it alone
//	c.Semaphore("api:quota", 3)    // three permits: at most three holders at once
//	c.All("acct:1", "acct:2")      // several plain locks as one, all or nothing, without deadlock
//	c.Any("stock:0", "stock:1")    // whichever of several plain locks is free (segments)
//
// Every kind has everything the plain lock has: validity, automatic refresh
// (WithAutoRefresh, and Do), fencing tokens, the restart guard, notified
// waiting and hooks. Locks of different kinds never share a name
// (ErrWrongKind). docs/lock-family.md in the repository describes the
// reentrant and read-write locks and multi-name locks; docs/safety.md the
// semaphore.
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
// not take part in locking for at least one TTL after it restarts (the
// restart guard, WithRestartGuard, enforces it on the nodes). The file
// docs/safety.md in the repository gives the whole argument.
//
// A lock is not a guarantee that the holder's work finishes before the lock
// expires: a paused process can outlive its lock. Check ValidUntil, refresh
// in time, and let the resource reject stale writers with the lock's
// fencing token (Lock.Token).
//
// # Circuit breaker and degraded mode
//
// A Client counts a node unreachable after three requests in a row without
// a reply (WithBreaker). When fewer than a quorum are reachable its breaker
// opens: TryObtain fails at once with an error matching ErrBreakerOpen that
// names each unreachable node, Obtain and Do wait for it to close (their
// context bounds the wait), and a PING to every node each second (the
// half-open probe) closes it once a quorum answers. Refreshes and releases
// are never refused by it. WithoutBreaker turns it off.
//
// WithDegradedMode (off by default) installs a LeaseStore used while the
// breaker is open: NewLocalLeases in memory, or the redlocksql module's
// SQLite and PostgreSQL stores. A plain lock taken there is degraded:
// Degraded reports it, IsDegraded sees it in Do's function, its ObtainEvent
// says so, and its Token is negative, below every token of the nodes. It
// excludes only the clients that fell back to the same store, not a client
// that still reaches a quorum: the degraded mode trades mutual exclusion
// for availability (docs/safety.md, section 7). Once the breaker has closed
// after it was taken, a degraded lock is not extended (ErrDegraded) and
// runs out; it is never silently moved to Redis.
//
// # Adaptive TTL
//
// WithAdaptiveTTL makes the TTL given to an obtain (and to Refresh) a base
// that the Client adjusts for each attempt and refresh, within [Min, Max]
// (the last refreshes before a WithMaxHold limit may go below Min): it is
// raised to cover the nodes' round-trip time (p95) and lowered while the
// name is contended, never above Max. A sampler reads INFO from every node
// and reports memory pressure (SampleEvent, WithLogger) without shortening
// any TTL. ObtainEvent and RefreshEvent carry the TTL and its reason. A
// shorter TTL does not weaken mutual exclusion: it only makes a lock whose
// refreshes fail lost sooner. See docs/adaptive-ttl.md.
//
// # Observing
//
// WithHook installs a Hook, whose one method receives every event: the
// attempts with each node's answer, waits, obtains, refreshes, releases,
// losses, the breaker's changes and the sampler's samples. Events of one
// lock carry its LockID. The redlockprom and redlockotel modules are hooks
// for Prometheus and OpenTelemetry. WithLogger logs what an operator must
// see.
//
// # Nodes
//
// Give each node's go-redis client ContextTimeoutEnabled: true, so that a
// frozen node releases its connection at the per-node timeout; see
// WithNodeTimeout. A node that times out three times in a row is skipped
// for one second (ErrNodeSkipped), then probed with a single request.
package redlock
