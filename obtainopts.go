package redlock

import "time"

// The options of one obtain (ObtainOption) and of its retries
// (RetryOption, also a Client's default); the retries themselves are in
// retry.go.

// ObtainOption configures one obtain: a call of Obtain, TryObtain or Do on
// any handle, or on the Client.
type ObtainOption interface {
	applyObtain(*obtainConfig)
}

// RetryOption configures how an obtain retries. Given to New it sets the
// Client's default; given to an obtain it overrides that default for the
// call.
type RetryOption interface {
	Option
	ObtainOption
}

type obtainConfig struct {
	retry    retryConfig
	auto     bool
	interval time.Duration // 0: TTL/3
	maxHold  time.Duration // 0: unlimited
	fixedTTL bool          // WithFixedTTL
}

type retryConfig struct {
	minDelay    time.Duration
	maxDelay    time.Duration
	maxAttempts int // 0: until the context ends
	// strategy, when set (WithBackoff), gives the waits instead of
	// minDelay and maxDelay.
	strategy   func(n int) time.Duration
	nilBackoff bool // WithBackoff(nil)
}

func (r *retryConfig) validate() error {
	if r.nilBackoff {
		return invalid("nil backoff function (WithBackoff)")
	}
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

func (o *obtainConfig) validate(ttl time.Duration, a *AdaptiveTTL) error {
	if err := o.retry.validate(); err != nil {
		return err
	}
	if o.interval < 0 || (o.interval > 0 && o.interval >= ttl) {
		return invalid("refresh interval %v must be positive and below the TTL %v", o.interval, ttl)
	}
	if a != nil && !o.fixedTTL && o.interval > 0 && o.interval >= a.Min {
		return invalid("refresh interval %v must be below the adaptive TTL's Min %v", o.interval, a.Min)
	}
	if o.maxHold < 0 {
		return invalid("max hold %v is negative", o.maxHold)
	}
	return nil
}

type obtainOption func(*obtainConfig)

func (f obtainOption) applyObtain(c *obtainConfig) { f(c) }

type retryOption func(*retryConfig)

func (f retryOption) applyClient(c *config)       { f(&c.retry) }
func (f retryOption) applyObtain(c *obtainConfig) { f(&c.retry) }

// WithRetryDelay sets the bounds of the wait between two attempts of an
// obtain. The n-th wait (from 0) is drawn uniformly from
// [min, min(max, min·2ⁿ⁺¹)], and never outlasts the holder's remaining TTL
// reported by the nodes; a release of the lock ends it early. Defaults
// 10 ms and 500 ms.
func WithRetryDelay(min, max time.Duration) RetryOption {
	return retryOption(func(r *retryConfig) { r.minDelay, r.maxDelay = min, max })
}

// WithMaxAttempts limits Obtain to n attempts, each one acquire round on
// every node (for Client.Any, one pass over its names): the first, and
// n−1 more, each after a wait of the retry delay (WithRetryDelay) that a
// release of the lock cuts short. The hook reports each attempt as an
// AttemptEvent, and ObtainEvent.Attempts is their number. An attempt
// refused at once by the open circuit breaker (ErrBreakerOpen) makes no
// round but uses up an attempt too. 0, the default, retries until the
// context ends. TryObtain makes one attempt whatever it says.
func WithMaxAttempts(n int) RetryOption {
	return retryOption(func(r *retryConfig) { r.maxAttempts = n })
}

// WithBackoff replaces the retry delay (WithRetryDelay) with a strategy of
// the caller's own: next(n) is the wait before the obtain's attempt n+2,
// after n+1 attempts (n from 0), and a negative wait ends the obtain as if
// its attempts were used up. A release notification still ends a wait
// early, and no wait outlasts the holder's remaining TTL. Given to New, it
// also spaces the rounds of a manual Refresh of the Client's locks (given
// to an obtain, it does not), and a negative wait ends that Refresh with
// its last round's error. next is called on the obtaining (or refreshing)
// goroutine, once per wait; it may be called from several goroutines at
// once when several obtains or refreshes run at once.
func WithBackoff(next func(n int) time.Duration) RetryOption {
	return retryOption(func(r *retryConfig) { r.strategy, r.nilBackoff = next, next == nil })
}

// WithAutoRefresh keeps the lock alive until it is released or lost: the
// Client refreshes it every TTL/3 (see WithRefreshInterval), batching the
// refreshes of all its locks into one pipeline per node. When no refresh
// can be confirmed by a quorum before the lock's validity ends, the lock is
// lost: Done is closed and Err returns ErrLost. Do turns it on.
func WithAutoRefresh() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.auto = true })
}

// WithRefreshInterval sets how often an auto-refreshed lock is refreshed.
// Default TTL/3; it must be below the TTL (and below AdaptiveTTL.Min with
// WithAdaptiveTTL). A failed refresh is retried after a quarter of the
// interval (at least the per-node timeout).
func WithRefreshInterval(d time.Duration) ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.interval = d })
}

// WithMaxHold caps the total time an auto-refreshed lock is held: refreshes
// do not extend it past obtain + d, after which it runs out and is lost with
// an error saying so. Default 0: unlimited.
func WithMaxHold(d time.Duration) ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.maxHold = d })
}

// WithFixedTTL makes one obtain, and the lock's refreshes, use the TTL as
// given on a Client with WithAdaptiveTTL. Without WithAdaptiveTTL it changes
// nothing.
func WithFixedTTL() ObtainOption {
	return obtainOption(func(o *obtainConfig) { o.fixedTTL = true })
}
