package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/keepalive"
	"github.com/redlock-go/redlock/internal/keys"
	"github.com/redlock-go/redlock/internal/notify"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/script"
)

// Client obtains locks on one Redis node (the single-instance lock) or on N
// independent nodes (Redlock, quorum N/2+1). It is safe for concurrent use.
//
// The Client does not own the Redis clients it is given: close them after
// Close.
type Client struct {
	nodes  []*quorum.Node
	quorum int
	cfg    config

	// bg owns the goroutines of requests that outlive the call that made
	// them: replies that arrive after a quorum decision, and their
	// clean-up. Close waits for them.
	bg sync.WaitGroup
	// workers start the requests' goroutines of the rounds, counted in
	// bg, and keep them for a while for the next round's requests.
	workers *quorum.Workers

	// hubs deliver release notifications, one per node; waits queues this
	// Client's waiters per lock (wait.go).
	hubs      []*notify.Hub
	waits     waits
	notifyOff bool

	nodeLog nodeLog        // rate limit of WithLogger's node lines
	guards  []script.Guard // each node's guard setting, encoded once
	// epochKey is the epoch record of a standalone node; cluster is set
	// when some node is a Redis Cluster (see Lock.keys). plainNode is the
	// first node that is not (-1 if none): every such node shares one
	// prepared script call per lock.
	epochKey  string
	cluster   bool
	plainNode int

	// sched runs the keep-alive: automatic refreshes and loss deadlines.
	sched *keepalive.Scheduler[*Lock]
	epoch time.Time // origin of the refresh grid

	// brk is the Client's circuit breaker (breaker.go).
	brk breaker

	// adapt picks TTLs (WithAdaptiveTTL); nil when off.
	adapt *adaptive

	// life is held for reading by every call that may start background
	// goroutines, and for writing by Close while it marks the Client
	// closed, so that no goroutine is added to bg while Close waits on it.
	life sync.RWMutex

	mu        sync.Mutex
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	held      map[*Lock]struct{}
}

// workerIdle is how long a request goroutine waits for the next request
// before it ends (quorum.Workers).
const workerIdle = 500 * time.Millisecond

// New returns a Client over the given nodes. Each node is an independent
// Redis deployment: a standalone server (redis.NewClient), a
// Sentinel-managed master (redis.NewFailoverClient) or a Redis Cluster
// (redis.NewClusterClient). One node gives the classic single-instance
// lock; five independent nodes the classic Redlock deployment.
//
// New does no I/O. It returns an error wrapping ErrInvalid when nodes is
// empty or has more than MaxNodes, holds a nil client or the same client (or address) twice, or when
// an option is out of range.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil option")
		}
		o.applyClient(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, invalid("no nodes given")
	}
	if len(nodes) > MaxNodes {
		return nil, invalid("%d nodes given; at most %d", len(nodes), MaxNodes)
	}
	c := &Client{
		nodes:  make([]*quorum.Node, len(nodes)),
		quorum: len(nodes)/2 + 1,
		cfg:    cfg,
		held:   make(map[*Lock]struct{}),

		plainNode: -1,

		closeDone: make(chan struct{}),
	}
	c.workers = quorum.NewWorkers(&c.bg, workerIdle)
	c.sched = keepalive.New(batchWindow, cfg.now, c.fire)
	c.notifyOff = cfg.notifyOff
	c.waits = waits{queues: make(map[string]*waitQueue), grace: make(map[string]time.Time)}
	c.epoch = time.Now() // only the grid's phase; not read through cfg.now
	c.epochKey = keys.Layout{Prefix: cfg.prefix}.NodeEpoch()
	addrs := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return nil, invalid("node %d is nil", i)
		}
		for j := range i {
			if nodes[j] == n {
				return nil, invalid("node %d is the same client as node %d", i, j)
			}
		}
		c.nodes[i] = quorum.NewNode(i, n, cfg.maxInFlight)
		sharded := c.nodes[i].Cluster
		c.cluster = c.cluster || sharded
		if !sharded && c.plainNode < 0 {
			c.plainNode = i
		}
		c.hubs = append(c.hubs, notify.NewHub(n, sharded, hubTimeout))
		if rc, ok := n.(*redis.Client); ok {
			// A failover client's Addr is a placeholder; only plain
			// clients name their server.
			if addr := rc.Options().Addr; addr != "FailoverClient" {
				if j, dup := addrs[addr]; dup {
					return nil, invalid("node %d has the same address %s as node %d", i, addr, j)
				}
				addrs[addr] = i
			}
		}
	}
	for i := range c.nodes {
		c.guards = append(c.guards, c.newGuard(i))
	}
	if cfg.adaptive != nil {
		c.adapt = newAdaptive(c)
	}
	return c, nil
}

// TryObtain makes one attempt to obtain the lock named key for ttl, at
// once, even while other goroutines of this Client wait for it, whatever
// WithMaxAttempts says. It
// returns an error wrapping ErrNotObtained (inside a *QuorumError) when the
// lock is held by another owner or no quorum agreed in time, ErrClosed after
// Close, and ErrInvalid for an empty key or a TTL below MinTTL. When ctx
// ends first, the error also matches ctx's error.
//
// The caller must Release the returned lock.
func (c *Client) TryObtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.obtain(ctx, key, ttl, obtainConfig{retry: c.cfg.retry, try: true}, opts)
}

// Obtain obtains the lock named key for ttl, retrying until it succeeds,
// ctx ends or the maximum number of attempts (WithMaxAttempts) is used up.
// An attempt is one acquire round on every node. The first is made at once,
// or, while other goroutines of this Client wait for the lock, when this
// call's turn comes (unless it is the only one: WithMaxAttempts(1)).
// Before each later attempt Obtain waits with exponential backoff and
// jitter (WithRetryDelay), never past the holder's remaining TTL, and less
// when the lock is released: a release notification, or the key found gone
// when the waiter has just subscribed to them, ends the wait. So
// WithMaxAttempts(n) gives n attempts with n−1 waits between them. Errors
// are those of TryObtain; when ctx ends, the error matches both
// ErrNotObtained and ctx's error.
//
// The caller must Release the returned lock.
func (c *Client) Obtain(ctx context.Context, key string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.obtain(ctx, key, ttl, obtainConfig{retry: c.cfg.retry}, opts)
}

func (c *Client) obtain(ctx context.Context, key string, ttl time.Duration, o obtainConfig, opts []ObtainOption) (*Lock, error) {
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("nil obtain option")
		}
		opt.applyObtain(&o)
	}
	if o.try {
		o.retry.maxAttempts = 1
	}
	rkey, err := c.redisKey(key)
	if err != nil {
		return nil, err
	}
	ttl, err = c.cfg.checkTTL(ttl)
	if err != nil {
		return nil, err
	}
	if err := o.validate(ttl); err != nil {
		return nil, err
	}
	if err := c.checkAdaptiveInterval(&o); err != nil {
		return nil, err
	}
	if o.exclusive() {
		o.wait = newValue()
	}
	if !c.observed() {
		l, _, err := c.obtainLoop(ctx, key, rkey, ttl, &o)
		c.gaveUp(rkey, ttl, &o, err)
		return l, err
	}
	start := time.Now()
	o.id = obtainIDs.Add(1)
	l, attempts, err := c.obtainLoop(ctx, key, rkey, ttl, &o)
	c.gaveUp(rkey, ttl, &o, err)
	if h := c.cfg.hook; h != nil {
		ev := ObtainEvent{Key: key, Kind: o.kind, ObtainID: o.id, Attempts: attempts, Elapsed: time.Since(start), Err: err,
			TTL: o.ttl, TTLReason: o.ttlReason}
		if l != nil {
			ev.Token = l.token
		}
		h.Obtain(ctx, ev)
	}
	return l, err
}

// gaveUp cleans up after an obtain that ended with err: an exclusive
// obtain of the family that did not get the lock withdraws the writer mark
// its refusals may have left, at once, so that readers do not wait for the
// mark's TTL behind a writer that is gone. The TTL still bounds the mark of
// a writer that crashed.
func (c *Client) gaveUp(key string, ttl time.Duration, o *obtainConfig, err error) {
	if err != nil && o.exclusive() && !errors.Is(err, ErrInvalid) {
		c.withdraw(key, o.wait, c.cfg.nodeTimeoutFor(ttl))
	}
}

// obtainLoop makes attempts until one succeeds, ctx ends or the attempts
// are used up. The first attempt is made at once (unless a grace period or
// local waiters say otherwise); then the caller queues behind this Client's
// other waiters for the lock, and its turn waits on release notifications,
// the holder's TTL and a backoff (see wait.go). Every attempt but the
// caller's first follows such a wait: those are the attempts that
// WithMaxAttempts counts, and the only ones there are.
func (c *Client) obtainLoop(ctx context.Context, name, key string, ttl time.Duration, o *obtainConfig) (*Lock, int, error) {
	backoff := newBackoff(o.retry)
	attempts := 0
	refusals := 0  // attempts refused by the open breaker, without a round
	var last error // the last attempt's error, reported when ctx ends
	try := func() (*Lock, time.Duration, error) {
		if ctx.Err() != nil {
			if last == nil {
				last = ErrNotObtained
			}
			return nil, -1, last
		}
		if o.retry.maxAttempts == 0 && !c.degradable(o) {
			// The circuit breaker is open: wait for it to close. (With
			// WithMaxAttempts, each refusal uses up an attempt instead.)
			if werr := c.waitBreaker(ctx); werr != nil {
				last = werr
				return nil, -1, werr
			}
		}
		attempts++
		o.base = ttl
		o.ttl, o.ttlReason = c.ttlFor(key, ttl, o.fixedTTL)
		l, holderTTL, err := c.attempt(ctx, name, key, o.ttl, o)
		if err != nil {
			last = err
			if refusedByBreaker(err) {
				attempts-- // no acquire round was made
				refusals++
			}
		}
		return l, holderTTL, err
	}
	done := func(err error) bool {
		return err == nil || err == ErrClosed || ctx.Err() != nil ||
			(o.retry.maxAttempts > 0 && attempts+refusals >= o.retry.maxAttempts) ||
			errors.Is(err, ErrWrongKind) || errors.Is(err, ErrPermitCount) // waiting would not help
	}
	fail := func(err error) error {
		if err != nil && err != ErrClosed && ctx.Err() != nil {
			return errors.Join(err, ctxErr(ctx))
		}
		return err
	}

	// Fast path: nobody here waits for this lock, or the call makes a
	// single attempt, which has no turn to wait for.
	var (
		lock      *Lock
		holderTTL time.Duration
		err       error
	)
	queued, join := c.waits.queued, c.waits.join
	if o.kind == Reentrant {
		// A re-entry must never wait behind anyone: the head of the
		// name's queue may be waiting for this owner's own lock. An
		// owner's obtains queue among themselves only, and the head of
		// such a queue re-enters at once while the owner holds the lock.
		group := ownerGroup(key, o.owner)
		queued = func(string) bool { return c.waits.anyQueued(group) }
		join = func(string) (*waitQueue, *member) { return c.waits.joinAny(group, []string{key}) }
	}
	if !c.notifyOff && o.retry.maxAttempts != 1 && queued(key) {
		err = ErrNotObtained
	} else {
		if until := c.waits.graceUntil(key, c.cfg.now); !until.IsZero() {
			if serr := sleep(ctx, until.Sub(c.cfg.now())); serr != nil {
				return nil, attempts, errors.Join(ErrNotObtained, serr)
			}
		}
		lock, holderTTL, err = try()
		if done(err) {
			return lock, attempts, fail(err)
		}
	}

	var wake <-chan struct{}
	if !c.notifyOff {
		q, m := join(key)
		defer func() {
			if c.waits.leave(q, m) {
				c.unsubscribe(q)
			}
		}()
		if werr := c.waitTurn(ctx, name, o.id, m); werr != nil {
			return nil, attempts, errors.Join(err, werr)
		}
		// The head subscribes before its next attempt: from the nodes'
		// confirmation on, every release wakes it.
		c.subscribe(ctx, q, c.cfg.nodeTimeoutFor(ttl))
		wake = q.wake.C
		select {
		case <-wake: // meant for an earlier head
		default:
		}
		if attempts == 0 {
			// Queued before any attempt: make the first now.
			lock, holderTTL, err = try()
			if done(err) {
				return lock, attempts, fail(err)
			}
		} else {
			// A release since the caller's attempt may have come before
			// the subscription, or while an earlier head had the queue's
			// wake-ups: no notification of it will come. Look for it
			// instead of attempting again, so that the next attempt, the
			// one WithMaxAttempts counts, still follows a wait.
			holderTTL = c.lookForRelease(ctx, key, ttl, o.permits, q.wake, holderTTL)
		}
	}
	for {
		if werr := c.waitRelease(ctx, name, o.id, wake, backoff.next(), holderTTL); werr != nil {
			return nil, attempts, errors.Join(err, werr)
		}
		select {
		case <-wake: // came since the wait ended: this attempt covers it
		default:
		}
		lock, holderTTL, err = try()
		if done(err) {
			return lock, attempts, fail(err)
		}
	}
}

// waitRelease waits for the first of: a release notification, the
// holder's remaining TTL (plus a millisecond: Redis reports 0 in a key's
// last millisecond), the backoff delay, or the end of ctx.
func (c *Client) waitRelease(ctx context.Context, name string, id uint64, wake <-chan struct{}, delay, holderTTL time.Duration) error {
	_, err := c.waitReleaseWhy(ctx, name, id, wake, delay, holderTTL)
	return err
}

// waitReleaseWhy is waitRelease, and says what ended the wait.
func (c *Client) waitReleaseWhy(ctx context.Context, name string, id uint64, wake <-chan struct{}, delay, holderTTL time.Duration) (WakeReason, error) {
	if holderTTL >= 0 {
		delay = min(delay, holderTTL+time.Millisecond)
	}
	start := time.Now()
	t := time.NewTimer(delay)
	defer t.Stop()
	reason, err := WokenByTimer, error(nil)
	select {
	case <-wake:
		reason = WokenByRelease
	case <-t.C:
	case <-ctx.Done():
		reason, err = WokenByContext, ctxErr(ctx)
	}
	c.waited(ctx, name, id, start, reason)
	return reason, err
}

// waited reports a wait of an obtain that began at start to the hook.
func (c *Client) waited(ctx context.Context, name string, id uint64, start time.Time, reason WakeReason) {
	if h := c.cfg.hook; h != nil {
		h.Wait(ctx, WaitEvent{Key: name, ObtainID: id, Waited: time.Since(start), WokenBy: reason})
	}
}

// attempt is one Redlock acquire round. On failure it returns the shortest
// remaining TTL that a node reported for the current holder (-1 if none).
func (c *Client) attempt(ctx context.Context, name, key string, ttl time.Duration, o *obtainConfig) (*Lock, time.Duration, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.isClosed() {
		return nil, -1, ErrClosed
	}
	timeout := c.cfg.nodeTimeoutFor(ttl)
	closings := c.brk.closings.Load()
	if berr := c.gate(ctx, timeout); berr != nil {
		if c.degradable(o) {
			return c.attemptDegraded(ctx, name, key, ttl, timeout, o, closings)
		}
		return nil, -1, berr
	}
	l := c.newLock(name, key, ttl, timeout, o)
	start := c.cfg.now()
	validUntil := start.Add(c.cfg.validity(ttl))
	// The call of every node that is not a Redis Cluster: their keys and
	// guard are the same (the first such node's, if any).
	var plain script.Call
	if i := c.plainNode; i >= 0 {
		plain = l.acquireCall(i, ttl)
	}
	round := quorum.Round[script.Acquired]{
		Nodes:   c.nodes,
		Quorum:  l.quorum,
		Timeout: timeout,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (script.Acquired, error) {
			call := plain
			if n.Cluster {
				call = l.acquireCall(n.Index, ttl)
			}
			a, err := call.Acquire(ctx, n.Client, c.cfg.ack)
			return a, kindError(err)
		},
		Agree:      script.Acquired.OK,
		Enough:     l.enoughVotes(),
		ValidUntil: validUntil,
		Settle: func(n *quorum.Node, a script.Acquired, err error, won, late bool) {
			// A failed attempt must not leave our key behind: release
			// where the node took it (replicated or not), or may have (no
			// definite answer). A won lock's late yes joins it, unless the
			// lock's release has begun and may have passed this node.
			if !won && (a.Status == script.Taken || ambiguous(err)) {
				l.releaseNode(n, timeout)
				return
			}
			l.settleAcquire(n, refreshed(a), err, late)
		},
	}
	res := round.Run(ctx, c.workers)
	if c.adapt != nil {
		observeRTT(c.adapt, res.Replies, timeout)
		if !res.Won && acquireRefused(res.Replies) {
			c.adapt.refused(key, time.Now())
		}
	}
	if !res.Won {
		qe := quorumError(c, l.quorum, "obtain", res, ErrNotObtained, disagreeAcquire)
		qe.Expired = res.Agreed >= l.quorum
		if c.observed() {
			c.attempted(ctx, l, o.id, start, res, false, qe, 0)
		}
		return nil, retryAfter(res.Replies), qe
	}
	l.obtained(start, validUntil, func(i int) bool { return res.Replies[i].Yes })
	if res.Pending != 0 {
		l.expectLate(res.Pending)
	}
	token, second, err := c.fence(ctx, l, res.Replies, validUntil)
	if c.observed() {
		c.attempted(ctx, l, o.id, start, res, second, err, token)
	}
	if err != nil {
		// The quorum holds our key but cannot be shown to hold a counter
		// as high as the token: give the lock back.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, -1, err
	}
	l.token = token // l is not shared yet
	if o.auto {
		l.keepAlive(start, o.interval, o.maxHold)
	}
	c.mu.Lock()
	c.held[l] = struct{}{}
	c.mu.Unlock()
	l.schedule()
	return l, 0, nil
}

// refreshed maps an acquire reply to the refresh result it is equivalent to
// for clean-up: our key was set, or not.
func refreshed(a script.Acquired) script.RefreshResult {
	if a.Status == script.Taken {
		return script.Extended
	}
	return script.NotOwner
}

// disagreeAcquire is the per-node reason of an acquire's no.
func disagreeAcquire(a script.Acquired) error {
	switch {
	case a.Status == script.Recovering:
		return &RecoveringError{Remaining: a.Recovering}
	case a.Unreplicated:
		return ErrNotReplicated
	}
	return ErrHeld
}

// retryAfter is the soonest a failed attempt's nodes said things may change:
// the shortest remaining TTL of the holder, or of a node's recovery (-1 if
// no node said).
func retryAfter(replies []quorum.Reply[script.Acquired]) time.Duration {
	after := time.Duration(-1)
	for _, r := range replies {
		if r.Err != nil {
			continue
		}
		d := time.Duration(-1)
		switch r.Val.Status {
		case script.Held:
			d = r.Val.HolderTTL
		case script.Recovering:
			d = r.Val.Recovering
		}
		if d >= 0 && (after < 0 || d < after) {
			after = d
		}
	}
	return after
}

// fence makes the lock's fencing token safe to hand out: the token is the
// highest counter among the yes-votes, and a quorum of nodes must hold a
// counter no lower than it, so that any later quorum (which shares a node
// with this one) issues a higher token. When fewer than a quorum of the
// yes-votes already equal the token, a second round raises the counters,
// and must reach a quorum before the lock's validity ends. A lock of the
// family has its own rule (familyToken).
func (c *Client) fence(ctx context.Context, l *Lock, replies []quorum.Reply[script.Acquired], validUntil time.Time) (token int64, second bool, err error) {
	if l.hold != nil && l.kind != Permit {
		return c.familyToken(ctx, l, replies, validUntil)
	}
	for _, r := range replies {
		if r.Yes && r.Val.Token > token {
			token = r.Val.Token
		}
	}
	equal := 0
	for _, r := range replies {
		if r.Yes && r.Val.Token == token {
			equal++
		}
	}
	if equal >= l.quorum {
		return token, false, nil
	}
	return token, true, c.raise(ctx, l, replies, token, validUntil)
}

// raise is the second round of an acquire: it raises the lock's counter to
// token on every node (and records it as the owner's, for a lock of the
// family), and is won when a quorum of the first round's yes-voters
// confirmed before validUntil.
func (c *Client) raise(ctx context.Context, l *Lock, replies []quorum.Reply[script.Acquired], token int64, validUntil time.Time) error {
	// Only a node that voted yes in the first round counts: it holds our
	// key until validUntil, so any later acquire votes there after the
	// raise. Any other node may already have voted for a concurrent
	// acquirer whose round is still open, which would then be granted
	// after us with a lower token (docs/fencing.md, Lemma 2). The raise
	// still goes to every node, so that the counters converge.
	owner := ""
	if l.hold != nil {
		owner = l.hold.Owner
	}
	round := quorum.Round[bool]{
		Nodes:   c.nodes,
		Quorum:  l.quorum,
		Timeout: l.nodeTimeout,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			if l.hold != nil {
				return replies[n.Index].Yes, script.Seal(ctx, n.Client, l.keys(n.Index), token, owner, c.guard(n.Index))
			}
			return replies[n.Index].Yes, script.Fence(ctx, n.Client, l.fence, token, c.guard(n.Index))
		},
		Agree:      func(counts bool) bool { return counts },
		ValidUntil: validUntil,
	}
	res := round.Run(ctx, c.workers)
	if !res.Won {
		qe := quorumError(c, l.quorum, "obtain (fencing token)", res, ErrNotObtained, func(bool) error { return nil })
		qe.Expired = res.Agreed >= l.quorum
		return qe
	}
	return nil
}

// attempted reports an attempt to the hook and the logger.
func (c *Client) attempted(ctx context.Context, l *Lock, id uint64, start time.Time, res quorum.Result[script.Acquired], second bool, err error, token int64) {
	nodes := nodeResults(c, res, disagreeAcquire)
	c.logNodes(ctx, nodes)
	if h := c.cfg.hook; h != nil {
		h.Attempt(ctx, AttemptEvent{
			Key: l.name, Kind: l.kind, ObtainID: id, Obtained: err == nil && res.Won, Elapsed: c.cfg.now().Sub(start),
			Nodes: nodes, Token: token, SecondRound: second, Err: err,
		})
	}
}

// guard is the epoch guard's setting for node i, prepared by New.
func (c *Client) guard(i int) script.Guard { return c.guards[i] }

// newGuard is the epoch guard's setting for node i.
func (c *Client) newGuard(i int) script.Guard {
	g := script.Guard{
		MaxTTL:   c.cfg.maxTTL,
		Delta:    EpochTrust,
		Mode:     c.cfg.guard,
		FenceTTL: max(time.Hour, 10*c.cfg.maxTTL),
	}
	if c.nodes[i].Cluster {
		// One record per lock: let the records of idle locks go. A
		// missing record is safe (see epoch.lua).
		g.RecordTTL = max(24*time.Hour, 10*c.cfg.maxTTL)
	}
	return g.Prepared()
}

// releaseNode deletes the lock's key (its hold, for the family) on one
// node; used for clean-up, its outcome only matters to the node's health.
func (l *Lock) releaseNode(n *quorum.Node, timeout time.Duration) {
	c := l.c
	round := quorum.Round[bool]{
		Nodes:   []*quorum.Node{n},
		Quorum:  1,
		Timeout: timeout,
		Force:   true,
		Now:     c.cfg.now,
		Call: func(ctx context.Context, n *quorum.Node) (bool, error) {
			r, err := l.releaseCall(false, false).Release(ctx, n.Client)
			return r.Deleted, err
		},
		Agree: func(ok bool) bool { return ok },
	}
	round.Run(context.Background(), c.workers)
}

// quorumError describes a round that did not win. disagree gives the reason
// of a node that answered without error but did not agree.
func quorumError[T any](c *Client, need int, op string, res quorum.Result[T], sentinel error, disagree func(T) error) *QuorumError {
	qe := &QuorumError{Op: op, Need: need, Agreed: res.Agreed, sentinel: sentinel}
	for i, r := range res.Replies {
		if r.Yes {
			continue
		}
		err := r.Err
		if err == nil {
			err = disagree(r.Val)
		}
		qe.Nodes = append(qe.Nodes, &NodeError{Node: i, Addr: c.nodes[i].Addr, Err: err})
	}
	return qe
}

// Close releases every lock still held through this Client, stops its
// background work and waits for it. Calls after Close return ErrClosed. It
// does not close the Redis clients. Close is idempotent and returns nil.
func (c *Client) Close() error {
	c.life.Lock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.life.Unlock()
		<-c.closeDone
		return nil
	}
	c.closed = true
	held := make([]*Lock, 0, len(c.held))
	for l := range c.held {
		held = append(held, l)
	}
	c.mu.Unlock()
	c.life.Unlock()
	// The scheduler starts refresh goroutines: stop it first. Release
	// starts no goroutine once a lock is released, and every held lock is
	// released here before bg.Wait.
	c.sched.Stop()
	c.stopBreaker()
	if c.adapt != nil {
		c.adapt.stop()
	}
	releaseAll(held)
	for _, h := range c.hubs {
		h.Close()
	}
	c.workers.Stop()
	c.bg.Wait()
	close(c.closeDone)
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) forget(l *Lock) {
	c.mu.Lock()
	delete(c.held, l)
	c.mu.Unlock()
}

// redisKey is the Redis key of a lock name: the prefix and the name inside
// one hash tag, so that every key of a lock lands in one Cluster slot
// (internal/keys).
func (c *Client) redisKey(name string) (string, error) {
	key, err := keys.Layout{Prefix: c.cfg.prefix}.Lock(name)
	if err != nil {
		return "", invalid("%v", err)
	}
	return key, nil
}

// checkTTL returns the TTL of an acquire or refresh in whole milliseconds
// (Redis counts no less), or an error wrapping ErrInvalid: below MinTTL,
// above the deployment's maximum, or with no validity left after one
// per-node timeout, so that the lock would be lost as soon as obtained.
func (c *config) checkTTL(ttl time.Duration) (time.Duration, error) {
	if ttl < MinTTL {
		return 0, invalid("TTL %v is below the minimum %v", ttl, MinTTL)
	}
	ttl = ttl.Truncate(time.Millisecond)
	if ttl > c.maxTTL {
		return 0, invalid("TTL %v is above the deployment's maximum %v (WithMaxTTL)", ttl, c.maxTTL)
	}
	if t, v := c.nodeTimeoutFor(ttl), c.validity(ttl); t >= v {
		return 0, invalid("per-node timeout %v is not below the validity %v of TTL %v: the lock would be lost as soon as obtained (WithNodeTimeout, WithReplicaAck)", t, v, ttl)
	}
	return ttl, nil
}

// newValue returns 128 random bits, hex-encoded: the owner's secret.
func newValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// ambiguous reports whether a failed request may still have run on the
// node: anything but an error reply from Redis itself.
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	return !errors.As(err, &rerr)
}

// releaseAll releases locks in parallel, a bounded number at a time, so that
// Close with a frozen node takes a few node timeouts, not one per lock.
func releaseAll(locks []*Lock) {
	const parallel = 64
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, l := range locks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = l.Release(context.Background())
		})
	}
	wg.Wait()
}

// ctxErr is the error of an ended context: its Err, joined with its cause
// when the cause says more, so that errors.Is finds both.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}
