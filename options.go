package redlock

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/script"
)

// Option configures a Client (New). Options are applied in order; the last
// one wins.
type Option interface {
	applyClient(*config)
}

type config struct {
	prefix      string
	drift       float64
	nodeTimeout time.Duration // 0: derived from the TTL
	maxInFlight int
	retry       retryConfig
	now         func() time.Time
	notifyOff   bool // wait on timers only (benchmark baseline)
	maxTTL      time.Duration
	guard       RestartGuard
	ack         script.Ack
	hook        Hook
	hookSet     bool // WithHook, even of nil
	logger      *slog.Logger
	adaptive    *AdaptiveTTL // WithAdaptiveTTL; nil: off
	breaker     breakerConfig
	fallback    LeaseStore    // WithDegradedMode
	fallbackSet bool          // WithDegradedMode, even of nil
	next        []driver.Node // WithNextNodes
	nextSet     bool
	noRecords   bool // WithConfigRecords(false)
}

type breakerConfig struct {
	off      bool
	failures int           // 0: defaultBreakerFailures
	cooldown time.Duration // 0: defaultBreakerCooldown
}

// Defaults of the circuit breaker (WithBreaker).
const (
	defaultBreakerFailures = 3
	defaultBreakerCooldown = time.Second
)

func defaultConfig() config {
	return config{
		prefix: limits.Prefix,
		drift:  limits.DriftFactor,
		retry: retryConfig{
			minDelay: limits.MinRetryDelay,
			maxDelay: limits.MaxRetryDelay,
		},
		now:    time.Now,
		maxTTL: limits.MaxTTL,
	}
}

func (c *config) validate() error {
	if c.drift < 0 || c.drift >= 0.5 || math.IsNaN(c.drift) {
		return invalid("drift factor %v is outside [0, 0.5)", c.drift)
	}
	if c.nodeTimeout < 0 {
		return invalid("node timeout %v is negative", c.nodeTimeout)
	}
	if c.maxInFlight < 0 {
		return invalid("max in flight %d is negative", c.maxInFlight)
	}
	if c.maxTTL < limits.MinTTL {
		return invalid("max TTL %v is below the minimum TTL %v", c.maxTTL, limits.MinTTL)
	}
	if c.maxTTL > limits.MaxMaxTTL {
		return invalid("max TTL %v is above %v, the longest recovery window a restarted node may be given (WithMaxTTL): keep a longer hold alive with refreshes instead", c.maxTTL, limits.MaxMaxTTL)
	}
	if c.guard < GuardOn || c.guard > GuardOff {
		return invalid("restart guard %d is not GuardOn, GuardTrustPersistence or GuardOff", c.guard)
	}
	if c.ack.Replicas < 0 || (c.ack.Replicas > 0 && c.ack.Timeout <= 0) {
		return invalid("replica ack of %d replicas within %v: need a positive timeout and no negative count", c.ack.Replicas, c.ack.Timeout)
	}
	if err := c.validateAdaptive(); err != nil {
		return err
	}
	if c.breaker.failures < 0 || c.breaker.cooldown < 0 {
		return invalid("circuit breaker of %d failures and a cooldown of %v: neither may be negative", c.breaker.failures, c.breaker.cooldown)
	}
	if c.fallback != nil && c.breaker.off {
		return invalid("WithDegradedMode needs the circuit breaker, which WithoutBreaker turns off")
	}
	if c.fallbackSet && (c.fallback == nil || isNilValue(c.fallback)) {
		return invalid("nil lease store (WithDegradedMode)")
	}
	if c.hookSet {
		if err := checkHook(c.hook); err != nil {
			return err
		}
	}
	if c.now == nil {
		return invalid("nil clock (WithClock)")
	}
	return c.retry.validate()
}

type clientOption func(*config)

func (f clientOption) applyClient(c *config) { f(c) }

// WithPrefix sets the prefix of every lock's Redis key. Default "redlock:".
// Every client of one deployment must use the same prefix, or they will
// not see each other's locks.
//
// The prefix is joined to the name with no separator: the lock named N is
// the key {PN}. Two deployments on the same nodes therefore share keys
// when one's prefix begins with the other's: prefixes "a" and "ab" both
// lock {abc}, for the names "bc" and "c", and so do "app:" and "app:jobs:"
// for "jobs:x" and "x". They then exclude each other, or see ErrWrongKind.
// Give deployments that share nodes prefixes none of which begins with
// another, such as distinct words each ending in ':' ("billing:",
// "search:"). The key layout stays as it is, so that Clients of different
// versions lock the same keys, and New does not refuse any prefix: the
// clash is between two deployments, which one Client cannot see
// (docs/safety.md, section 3).
func WithPrefix(prefix string) Option {
	return clientOption(func(c *config) { c.prefix = prefix })
}

// WithDriftFactor sets the share of the TTL subtracted from a lock's
// validity to allow for clock rate drift between client and nodes (plus a
// fixed 2 ms). Default 0.01; must be in [0, 0.5).
func WithDriftFactor(f float64) Option {
	return clientOption(func(c *config) { c.drift = f })
}

// WithNodeTimeout sets how long one request to one node may take before the
// node counts as not agreeing. By default it is derived from each call's
// TTL: TTL/20 (500 ms for a 10 s TTL), at least 10 ms but never more than
// TTL/4, and at most 1 s. A value set here is used for every TTL as it is.
// Set it when the network is slower than loopback or a LAN.
//
// Rounds are parallel and decide as soon as a quorum agrees, so a dead or
// frozen node does not slow a round that the others can decide, and after
// three timeouts in a row the node is skipped for a second. Safety never
// depends on the timeout: a lock's validity is checked when its round is
// decided.
//
// A go-redis client aborts a blocked read at a context deadline only when
// it was created with ContextTimeoutEnabled: true; set it on every node's
// client. Without it the request still ends within the timeout for the
// lock, but keeps a connection until the client's ReadTimeout.
//
// A node that refuses connections is reported as refusing them (an error
// that errors.Is syscall.ECONNREFUSED), and then at once, after one dial
// outside go-redis (package driver/goredis). go-redis learns of the first refusal
// only after its series of dials (DialerRetries, 5, DialerRetryTimeout,
// 100 ms, apart): with a timeout shorter than that series, the first
// request after the node went down reads as a timeout. DialerRetries: 1
// in the client's options shortens the series.
func WithNodeTimeout(d time.Duration) Option {
	return clientOption(func(c *config) { c.nodeTimeout = d })
}

// WithMaxInFlight bounds the requests outstanding to one node; beyond it a
// request fails at once with ErrNodeSkipped instead of queueing behind a
// slow node. Default 512.
func WithMaxInFlight(n int) Option {
	return clientOption(func(c *config) { c.maxInFlight = n })
}

// WithMaxTTL sets the longest TTL any client of the deployment uses: every
// Client of one deployment must be given the same value. A TTL above it is
// refused with ErrInvalid. It is the recovery window of the restart guard:
// a node whose Redis process changed (a restart, a promoted replica) takes
// no part in locking for this long, so that every lock it may have
// forgotten has expired. Default 1 minute; at most 1 hour, and New returns
// an error wrapping ErrInvalid above it. The bound is there because the
// window is a node's outage: a rolling restart keeps each node out of
// locking for the max TTL, and a lock that must be held longer than an
// hour is kept alive by refreshes (WithAutoRefresh, Do) with a short TTL,
// which also hands the name over sooner when its holder crashes.
//
// Clients that disagree: each node's epoch record keeps the largest max
// TTL that any guarded Client of the prefix has sent since the node's
// epoch began (its last restart or failover), and a node recovers until
// the epoch's start plus that largest value, for every Client. So one
// Client with a larger max TTL lengthens the recovery of every node whose
// epoch began less than that long ago, at its first obtain there, even a
// node that was voting, and the other Clients then get ErrNodeRecovering
// for up to its value. The record never lowers the value by itself until
// the node's next restart (on a standalone or Sentinel-managed node the
// record does not expire). "redlock doctor" fails a node whose recovery
// window is longer than its --max-ttl and names the way out;
// docs/fencing.md ("A recovery window longer than the max TTL") gives the
// command that lowers the record and the condition under which that is
// safe.
func WithMaxTTL(d time.Duration) Option {
	return clientOption(func(c *config) { c.maxTTL = d })
}

// RestartGuard is the mode of the restart and failover guard (see
// WithRestartGuard).
type RestartGuard int

const (
	// GuardOn, the default: a node whose Redis process changed (a restart,
	// a promoted replica) takes no part in locking for the maximum TTL
	// (WithMaxTTL; the largest that any Client has sent to the node since,
	// when they disagree), so that every lock it may have forgotten has
	// expired.
	GuardOn RestartGuard = iota
	// GuardTrustPersistence trusts that every node persists each write
	// before answering (appendonly yes, appendfsync always): a node that
	// restarted with its epoch record intact kept its locks too, and needs
	// no recovery window. A node whose data is new (no record), or a
	// promoted replica without one, still recovers. Check the nodes with
	// "redlock doctor".
	GuardTrustPersistence
	// GuardOff turns the guard off: a node that restarted without its
	// data, or a promoted replica, votes at once. This is unsafe unless
	// every node persists every write before answering, nodes are never
	// failed over, or an operator keeps a restarted node out of service
	// for the longest TTL ("delayed restart"): a forgotten lock can then
	// be given to a second holder. Fencing tokens stay monotonic only with
	// the guard on.
	GuardOff
)

// WithRestartGuard sets the mode of the restart and failover guard, which
// the nodes enforce in the acquire scripts (docs/fencing.md). Default
// GuardOn.
func WithRestartGuard(g RestartGuard) Option {
	return clientOption(func(c *config) { c.guard = g })
}

// WithReplicaAck makes a node's yes count only when WAIT confirms, within
// timeout, that replicas of its replicas received the lock: for nodes that
// are Sentinel-managed masters or Redis Clusters, so that a failover cannot
// promote a replica that never saw the lock. WAIT runs on the connection
// that ran the acquire script, right after it; on a Redis Cluster, that is
// a connection to the master of the lock's slot, and replicas counts that
// master's replicas (the go-redis and rueidis drivers; the redigo driver
// has no Cluster support). A yes without the acknowledgement is released
// and reported per node as ErrNotReplicated. The per-node timeout is
// extended by timeout.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return clientOption(func(c *config) { c.ack = script.Ack{Replicas: replicas, Timeout: timeout} })
}

// WithHook installs a hook (JoinHooks installs several). Default none. A
// nil hook, a typed nil, or a nil hook inside JoinHooks is refused by New
// with ErrInvalid. A hook's panic never stops the Client (see Hook).
func WithHook(h Hook) Option {
	return clientOption(func(c *config) { c.hook, c.hookSet = h, true })
}

// WithLogger logs what an operator must see: a lock lost, a node skipped
// after repeated timeouts, a node recovering after a restart, the circuit
// breaker's changes, a lock obtained in degraded mode, a node under memory
// pressure, a hook that panicked (see Hook). Each node's condition is
// logged at most once a minute. Default none (as is a nil l): the Client
// logs nothing.
func WithLogger(l *slog.Logger) Option {
	return clientOption(func(c *config) { c.logger = l })
}

// WithBreaker sets the Client's circuit breaker (on by default with 3
// failures and a 1 s cooldown): a node counts as unreachable after
// failures requests in a row without a reply, and when fewer than a quorum
// of nodes are reachable the breaker opens. While it is open, TryObtain
// fails at once with an error matching ErrBreakerOpen that names each
// unreachable node, Obtain and Do wait for it to close (their context, or
// WithMaxAttempts, bounds the wait), and every cooldown a PING to every
// node (the half-open probe) closes it once a quorum answers. Refreshes and
// releases are never refused by it. Zero values keep the defaults.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return clientOption(func(c *config) {
		c.breaker = breakerConfig{failures: failures, cooldown: cooldown}
	})
}

// WithoutBreaker turns the Client's circuit breaker off: every obtain asks
// the nodes, whatever their recent failures (each node's own skip after
// three timeouts in a row stays). WithDegradedMode needs the breaker.
func WithoutBreaker() Option {
	return clientOption(func(c *config) { c.breaker.off = true })
}

// WithDegradedMode installs store as the fallback of the circuit breaker:
// while the breaker is open (fewer than a quorum of nodes reachable; see
// WithBreaker), the obtains of plain locks (Client.Mutex, and the Client's
// own Obtain, TryObtain and Do) take a lease in store instead of failing or
// waiting, and return a degraded lock (Lock.Degraded; Do's function sees it
// with IsDegraded). Without this option, which is the default, no lock is
// ever degraded. The other kinds of lock wait or fail as without it.
//
// The degraded mode trades safety for availability, and docs/safety.md
// (section 7) says exactly what is left: a degraded lock excludes only the
// other clients that fell back to the same store, not a client that still
// reaches a quorum of the nodes. Its token is negative, below every token
// of the nodes.
//
// A degraded lock is refreshed (manually, or by WithAutoRefresh and Do) in
// the store until the breaker first closes after it was taken. From then
// on, even if the breaker opens again, it is not extended any more, nor
// moved to Redis: its refreshes fail with ErrDegraded, it runs out at its
// validity and is then lost (its Err wraps ErrLost and ErrDegraded), and
// its owner obtains the lock again, on the nodes.
//
// A nil store (or a typed nil) is refused by New with ErrInvalid.
func WithDegradedMode(store LeaseStore) Option {
	return clientOption(func(c *config) { c.fallback, c.fallbackSet = store, true })
}

// WithClock replaces time.Now for every reading of the time by this
// Client: the validity arithmetic, the durations its events report, the
// adaptive TTL's windows and the circuit breaker's next probe (its timers
// and waits still run on the machine's time). For tests that run a client
// whose clock runs fast or slow (the fault suite does). The times it returns must carry a monotonic reading (derive
// them from time.Now). Production code has no reason to use it. A nil now
// is refused by New with ErrInvalid.
func WithClock(now func() time.Time) Option {
	return clientOption(func(c *config) { c.now = now })
}

// withoutNotify makes waiters poll on timers only, as libraries without
// notifications do; the baseline of the contention benchmarks.
func withoutNotify() Option {
	return clientOption(func(c *config) { c.notifyOff = true })
}

// nodeTimeoutFor is the per-node timeout for one call with this TTL.
func (c *config) nodeTimeoutFor(ttl time.Duration) time.Duration {
	t := c.nodeTimeout
	if t <= 0 {
		t = limits.NodeTimeout(ttl)
	}
	return t + c.ack.Timeout
}

// validity is how long a lock stays valid after the round that sets or
// extends its keys for ttl was sent: the TTL less the clock drift
// allowance.
func (c *config) validity(ttl time.Duration) time.Duration {
	return ttl - limits.DriftAllowance(ttl, c.drift)
}

// checkTTL returns the TTL of an acquire or refresh in whole milliseconds
// (Redis counts no less), or an error wrapping ErrInvalid: below the
// minimum of 10 ms, above the deployment's maximum, or with no validity left
// after one per-node timeout, so that the lock would be lost as soon as
// obtained.
func (c *config) checkTTL(ttl time.Duration) (time.Duration, error) {
	if ttl < limits.MinTTL {
		return 0, invalid("TTL %v is below the minimum %v", ttl, limits.MinTTL)
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

// checkHook refuses a nil hook, or a nil one inside JoinHooks.
func checkHook(h Hook) error {
	if j, ok := h.(joined); ok {
		for i, x := range j {
			if err := checkHook(x); err != nil {
				return invalid("nil hook %d in JoinHooks", i)
			}
		}
		return nil
	}
	if h == nil || isNilValue(h) {
		return invalid("nil hook (WithHook)")
	}
	return nil
}

// observed is true when anything watches the Client: its hook or its
// logger.
func (c *config) observed() bool { return c.hook != nil || c.logger != nil }

// emit passes an event to the hook, if any.
func (c *config) emit(ctx context.Context, ev Event) {
	if h := c.hook; h != nil {
		h.Observe(ctx, ev)
	}
}
