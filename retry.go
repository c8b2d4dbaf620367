package redlock

import (
	"context"
	"math/rand/v2"
	"time"
)

// Retries, in one place: the waits between the passes of an obtain and
// between the rounds of a manual Refresh (the backoff), and when a failed
// automatic refresh is tried again. The two refresh rules differ on
// purpose, and stop at the same point:
//
//   - a manual Refresh (Lock.Refresh) retries a round that failed for want
//     of answers after the backoff (WithRetryDelay, or the Client's
//     WithBackoff), until a round wins, ctx ends, the strategy ends the
//     retries, or the lock passes its loss deadline: no wait outlasts it,
//     and the round after it ends the lock (retryRefresh, refresh.go);
//   - the keep-alive retries a failed automatic refresh a quarter of the
//     refresh interval later, at least a per-node timeout
//     (WithRefreshInterval; autoRetryAt); its schedule takes the earlier of
//     that time and the loss deadline, at which the lock is lost.

// backoff yields the waits between the passes of one obtain (and the
// rounds of a manual Refresh): exponential growth from the minimum, capped
// at the maximum, with jitter above the minimum so that waiters spread
// out.
type backoff struct {
	cfg retryConfig
	n   uint
}

func newBackoff(cfg retryConfig) backoff { return backoff{cfg: cfg} }

// next is the n-th wait (from 0): the caller's strategy's (WithBackoff),
// or uniform in [min, min(max, min·2ⁿ⁺¹)]. ok is false when the strategy
// ends the retries.
func (b *backoff) next() (d time.Duration, ok bool) {
	if f := b.cfg.strategy; f != nil {
		d = f(int(b.n))
		b.n++
		return d, d >= 0
	}
	lo, hi := b.cfg.minDelay, b.cfg.maxDelay
	if b.n < 32 {
		if c := lo << (b.n + 1); c > 0 && c < hi {
			hi = c
		}
		b.n++
	}
	if hi <= lo {
		return lo, true
	}
	return lo + rand.N(hi-lo+1), true
}

// autoRetryAt is when the keep-alive tries again an automatic refresh of
// a lock refreshed every interval that failed at now: a quarter of the
// interval later, at least a per-node timeout, while a refresh can still
// finish in time.
func autoRetryAt(now time.Time, interval, nodeTimeout time.Duration) time.Time {
	return now.Add(max(interval/4, nodeTimeout))
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}
