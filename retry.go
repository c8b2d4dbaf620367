package redlock

import (
	"math/rand/v2"
	"time"
)

// backoff yields the waits between attempts of one Obtain: exponential
// growth from the minimum, capped at the maximum, with jitter above the
// minimum so that waiters spread out.
type backoff struct {
	cfg retryConfig
	n   uint
}

func newBackoff(cfg retryConfig) backoff { return backoff{cfg: cfg} }

// next is the n-th wait (from 0): uniform in [min, min(max, min·2ⁿ⁺¹)].
func (b *backoff) next() time.Duration {
	lo, hi := b.cfg.minDelay, b.cfg.maxDelay
	if b.n < 32 {
		if c := lo << (b.n + 1); c > 0 && c < hi {
			hi = c
		}
		b.n++
	}
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}
