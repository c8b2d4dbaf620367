package redlock

import (
	"log/slog"
	"math"
	"time"

	"github.com/redlock-go/redlock/internal/script"
)

// Defaults of the options.
const (
	// DefaultPrefix is prepended to every lock name to form its Redis key.
	DefaultPrefix = "redlock:"
	// DefaultDriftFactor is the share of the TTL set aside for clock rate
	// drift between the client and the nodes.
	DefaultDriftFactor = 0.01
	// DefaultMinRetryDelay and DefaultMaxRetryDelay bound the wait between
	// two attempts of Obtain.
	DefaultMinRetryDelay = 10 * time.Millisecond
	DefaultMaxRetryDelay = 500 * time.Millisecond
	// DefaultMaxTTL is the longest TTL accepted unless WithMaxTTL says
	// otherwise, and so the recovery window of a restarted node.
	DefaultMaxTTL = time.Minute
	// EpochTrust is how long a node trusts its last check of its own
	// identity (run_id) before checking again with INFO. A deployment
	// whose failovers are detected faster than this (Sentinel's
	// down-after-milliseconds) is not protected against them.
	EpochTrust = 50 * time.Millisecond
	// MaxNodes is the most nodes a Client takes: a lock keeps one bit per
	// node. Redlock deployments have a handful (classically five).
	MaxNodes = 64
	// MinTTL is the shortest TTL accepted: below it the fixed 2 ms of the
	// drift allowance and a round trip leave no validity.
	MinTTL = 10 * time.Millisecond
	// hubTimeout bounds one SUBSCRIBE or UNSUBSCRIBE write of a waiter's
	// notification connection.
	hubTimeout = 2 * time.Second
	// minReleaseTimeout is the least time a release waits for a node.
	minReleaseTimeout = 100 * time.Millisecond
	// driftFixed is added to the drift allowance: the granularity of Redis
	// expiry (milliseconds) plus a margin.
	driftFixed = 2 * time.Millisecond
)

// Option configures a Client. Options are applied in order; the last one
// wins.
type Option interface {
	applyClient(*config)
}

// ObtainOption configures one call of Obtain, TryObtain or Do.
type ObtainOption interface {
	applyObtain(*obtainConfig)
}

// RetryOption configures how Obtain retries. Given to New it sets the
// Client's default; given to Obtain it overrides that default for one call.
type RetryOption interface {
	Option
	ObtainOption
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
	guard       byte // '1' on, 'p' trust persistence, '0' off
	ack         script.Ack
	hook        Hook
	logger      *slog.Logger
	adaptive    *AdaptiveTTL  // WithAdaptiveTTL; nil: off
	breaker     breakerConfig // WithBreaker, WithoutBreaker
	fallback    LeaseStore    // WithDegradedMode
}

type obtainConfig struct {
	kind     Kind   // the lock family's options
	owner    string // WithOwner
	wait     string // an exclusive obtain's writer mark (script.Hold.Wait)
	try      bool   // TryObtain: one attempt, whatever WithMaxAttempts says
	permits  int    // ObtainPermit's k
	kindErr  error  // conflicting family options
	id       uint64 // ObtainID of an observed obtain
	retry    retryConfig
	auto     bool
	interval time.Duration // 0: TTL/3
	maxHold  time.Duration // 0: unlimited
	fixedTTL bool          // WithFixedTTL
	// The TTL asked for, and the TTL and reason of the last attempt
	// (WithAdaptiveTTL), for the lock and the ObtainEvent.
	base      time.Duration
	ttl       time.Duration
	ttlReason TTLReason
}

func (o *obtainConfig) validate(ttl time.Duration) error {
	if err := o.validateKind(); err != nil {
		return err
	}
	if err := o.retry.validate(); err != nil {
		return err
	}
	if o.interval < 0 || (o.interval > 0 && o.interval >= ttl) {
		return invalid("refresh interval %v must be positive and below the TTL %v", o.interval, ttl)
	}
	if o.maxHold < 0 {
		return invalid("max hold %v is negative", o.maxHold)
	}
	return nil
}

type retryConfig struct {
	minDelay    time.Duration
	maxDelay    time.Duration
	maxAttempts int // 0: until the context ends
}

func defaultConfig() config {
	return config{
		prefix: DefaultPrefix,
		drift:  DefaultDriftFactor,
		retry: retryConfig{
			minDelay: DefaultMinRetryDelay,
			maxDelay: DefaultMaxRetryDelay,
		},
		now:    time.Now,
		maxTTL: DefaultMaxTTL,
		guard:  '1',
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
	if c.maxTTL < MinTTL {
		return invalid("max TTL %v is below the minimum TTL %v", c.maxTTL, MinTTL)
	}
	if c.ack.Replicas < 0 || (c.ack.Replicas > 0 && c.ack.Timeout <= 0) {
		return invalid("replica ack of %d replicas within %v: need a positive timeout and no negative count", c.ack.Replicas, c.ack.Timeout)
	}
	if err := c.validateAdaptive(); err != nil {
		return err
	}
	if err := c.breaker.validate(); err != nil {
		return err
	}
	if c.fallback != nil && c.breaker.off {
		return invalid("WithDegradedMode needs the circuit breaker, which WithoutBreaker turns off")
	}
	return c.retry.validate()
}

func (r *retryConfig) validate() error {
	if r.minDelay <= 0 {
		return invalid("minimum retry delay %v must be positive", r.minDelay)
	}
	if r.maxDelay < r.minDelay {
		return invalid("maximum retry delay %v is below the minimum %v", r.maxDelay, r.minDelay)
	}
	if r.maxAttempts < 0 {
		return invalid("max attempts %d is negative", r.maxAttempts)
	}
	return nil
}

type clientOption func(*config)

func (f clientOption) applyClient(c *config) { f(c) }

type retryOption func(*retryConfig)

func (f retryOption) applyClient(c *config)       { f(&c.retry) }
func (f retryOption) applyObtain(c *obtainConfig) { f(&c.retry) }

// WithPrefix sets the prefix of every lock's Redis key. Default
// DefaultPrefix ("redlock:"). Every client of one deployment must use the
// same prefix, or they will not see each other's locks.
func WithPrefix(prefix string) Option {
	return clientOption(func(c *config) { c.prefix = prefix })
}

// WithDriftFactor sets the share of the TTL subtracted from a lock's
// validity to allow for clock rate drift between client and nodes (plus a
// fixed 2 ms). Default DefaultDriftFactor (0.01); must be in [0, 0.5).
func WithDriftFactor(f float64) Option {
	return clientOption(func(c *config) { c.drift = f })
}

// WithNodeTimeout sets how long one request to one node may take before the
// node counts as not agreeing. By default it is DefaultNodeTimeout(ttl) for
// each call's TTL. A value set here is used for every TTL as it is. Set it
// when the network is slower than loopback or a LAN.
//
// A go-redis client aborts a blocked read at a context deadline only when
// it was created with ContextTimeoutEnabled: true; set it on every node's
// client. Without it the client still returns within the timeout, but the
// request keeps a connection until the client's ReadTimeout.
func WithNodeTimeout(d time.Duration) Option {
	return clientOption(func(c *config) { c.nodeTimeout = d })
}

// WithMaxInFlight bounds the requests outstanding to one node; beyond it a
// request fails at once with ErrNodeOverloaded instead of queueing behind a
// slow node. Default 512.
func WithMaxInFlight(n int) Option {
	return clientOption(func(c *config) { c.maxInFlight = n })
}

// WithMaxTTL sets the longest TTL any client of the deployment uses: every
// Client of one deployment must be given the same value. A TTL above it is
// refused with ErrInvalid. It is the recovery window of the restart guard:
// a node whose Redis process changed (a restart, a promoted replica) takes
// no part in locking for this long, so that every lock it may have
// forgotten has expired. Default DefaultMaxTTL (1 minute).
func WithMaxTTL(d time.Duration) Option {
	return clientOption(func(c *config) { c.maxTTL = d })
}

// WithTrustedPersistence tells the restart guard that every node persists
// each write before answering (appendonly yes, appendfsync always): a node
// that restarted with its epoch record intact kept its locks too, and needs
// no recovery window. A node whose data is new (no record), or a promoted
// replica without one, still recovers. Check the nodes with "redlock doctor".
func WithTrustedPersistence() Option {
	return clientOption(func(c *config) { c.guard = 'p' })
}

// WithoutRestartGuard turns the restart and failover guard off: a node that
// restarted without its data, or a promoted replica, votes at once. This is
// unsafe unless every node persists every write before answering, nodes are
// never failed over, or an operator keeps a restarted node out of service
// for the longest TTL ("delayed restart"): a forgotten lock can then be
// given to a second holder. Fencing tokens stay monotonic only with the
// guard on.
func WithoutRestartGuard() Option {
	return clientOption(func(c *config) { c.guard = '0' })
}

// WithReplicaAck makes a node's yes count only when WAIT confirms, within
// timeout, that replicas of its replicas received the lock: for nodes that
// are Sentinel-managed masters, so that a failover cannot promote a replica
// that never saw the lock. A yes without the acknowledgement is released
// and reported per node as ErrNotReplicated. The per-node timeout is
// extended by timeout.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return clientOption(func(c *config) { c.ack = script.Ack{Replicas: replicas, Timeout: timeout} })
}

// WithRetryDelay sets the bounds of the wait between two attempts of
// Obtain. The n-th wait (from 0) is drawn uniformly from
// [min, min(max, min·2ⁿ⁺¹)], and never outlasts the holder's remaining TTL
// reported by the nodes; a release of the lock ends it early (see Obtain).
// Defaults DefaultMinRetryDelay (10 ms) and DefaultMaxRetryDelay (500 ms).
func WithRetryDelay(min, max time.Duration) RetryOption {
	return retryOption(func(r *retryConfig) { r.minDelay, r.maxDelay = min, max })
}

// WithMaxAttempts limits Obtain to n attempts, each one acquire round on
// every node: the first, and n−1 more, each after a wait of the retry delay
// (WithRetryDelay) that a release of the lock cuts short. It counts every
// acquire round the call makes: the hook reports each as an AttemptEvent,
// and ObtainEvent.Attempts is their number. An attempt refused at once by
// the open circuit breaker (ErrBreakerOpen, see WithBreaker) makes no
// round but uses up an attempt too, so that Obtain ends. 0, the
// default, retries until the context ends. TryObtain, TryObtainPermit,
// TryObtainAll and TryObtainAny make one attempt (one pass) whatever it says.
func WithMaxAttempts(n int) RetryOption {
	return retryOption(func(r *retryConfig) { r.maxAttempts = n })
}

type obtainOption func(*obtainConfig)

func (f obtainOption) applyObtain(c *obtainConfig) { f(c) }

// WithAutoRefresh keeps the lock alive until it is released or lost: the
// Client refreshes it every TTL/3 (see WithRefreshInterval), batching the
// refreshes of all its locks into one pipeline per node. When no refresh
// can be confirmed by a quorum before the lock's validity ends, the lock is
// lost: Done is closed and Err returns ErrLost.
func WithAutoRefresh() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.auto = true })
}

// WithRefreshInterval sets how often an auto-refreshed lock is refreshed.
// Default TTL/3; it must be below the TTL. A failed refresh is retried after
// a quarter of the interval (at least the per-node timeout).
func WithRefreshInterval(d time.Duration) ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.interval = d })
}

// WithMaxHold caps the total time an auto-refreshed lock is held: refreshes
// do not extend it past obtain + d, after which it runs out and is lost with
// an error saying so. Default 0: unlimited.
func WithMaxHold(d time.Duration) ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.maxHold = d })
}

// withoutNotify makes waiters poll on timers only, as libraries without
// notifications do; the baseline of the contention benchmarks.
func withoutNotify() Option {
	return clientOption(func(c *config) { c.notifyOff = true })
}

// withRestartGuard turns the guard back on; for tests, whose helper turns
// it off for freshly started servers.
func withRestartGuard() Option {
	return clientOption(func(c *config) { c.guard = '1' })
}

// WithClock replaces time.Now for the validity arithmetic of this Client:
// for tests that run a client whose clock runs fast or slow (the fault
// suite does). The times it returns must carry a monotonic reading (derive
// them from time.Now). Production code has no reason to use it.
func WithClock(now func() time.Time) Option {
	return clientOption(func(c *config) { c.now = now })
}

// nodeTimeoutFor is the per-node timeout for one call with this TTL.
func (c *config) nodeTimeoutFor(ttl time.Duration) time.Duration {
	t := c.nodeTimeout
	if t <= 0 {
		t = DefaultNodeTimeout(ttl)
	}
	return t + c.ack.Timeout
}

// DefaultNodeTimeout is the per-node timeout of a call with this TTL when
// WithNodeTimeout is not given: TTL/20 (500 ms for a 10 s TTL), at least
// 10 ms but never more than TTL/4, and at most 1 s.
//
// Rounds are parallel and decide as soon as a quorum agrees, so a dead or
// frozen node does not slow a round that the others can decide, and after
// three timeouts in a row the node is skipped for a second. The timeout
// only bounds a round that needs the slow node; set generously, it keeps a
// loaded machine's queueing (a full connection pool, a GC pause) from
// counting as a failed node. Safety never depends on it: a lock's validity
// is checked when the round is decided.
func DefaultNodeTimeout(ttl time.Duration) time.Duration {
	t := min(ttl/20, time.Second)
	if t < 10*time.Millisecond {
		t = min(10*time.Millisecond, ttl/4)
	}
	return t
}

// validity is how long a lock stays valid after the round that sets or
// extends its keys for ttl was sent: the TTL less the clock drift
// allowance.
func (c *config) validity(ttl time.Duration) time.Duration {
	return ttl - DriftAllowance(ttl, c.drift)
}
