// Package lockclient is the robustness suite's one adapter to the redlock
// API: every call into package redlock made by tests/robust is in this
// file, so that a change of the library's API is a change of this file
// alone. It offers what the suite's clients need: a client on N nodes,
// obtaining one lock of a kind, its token and validity, its loss, and its
// release.
package lockclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// Kind is the kind of lock a client obtains.
type Kind string

const (
	Plain     Kind = "plain"     // the plain lock
	Write     Kind = "write"     // the writer of a read-write lock
	Read      Kind = "read"      // a reader of a read-write lock
	Reentrant Kind = "reentrant" // a reentrant lock, owned by the client's id
)

// Kinds are the kinds a client can obtain, for a seed to draw from.
var Kinds = []Kind{Plain, Write, Read, Reentrant}

// Config configures a Client.
type Config struct {
	NodeTimeout time.Duration
	MaxTTL      time.Duration // the restart guard's recovery window
	NoGuard     bool          // turn the restart guard off (a control)
	// Now, when set, replaces the client's clock for its validity
	// arithmetic (a clock offset or rate); it must carry a monotonic
	// reading.
	Now func() time.Time
	// FastRetry makes waiting clients retry every 5 to 20 ms.
	FastRetry bool
	// NoBreaker turns the circuit breaker off (WithoutBreaker).
	NoBreaker bool
}

// Client is one lock client on N nodes.
type Client struct {
	c *redlock.Client
}

// New returns a client on nodes. The caller owns nodes and closes them
// after Close.
func New(nodes []redis.UniversalClient, cfg Config) (*Client, error) {
	opts := []redlock.Option{redlock.WithNodeTimeout(cfg.NodeTimeout), redlock.WithMaxTTL(cfg.MaxTTL)}
	if cfg.NoGuard {
		opts = append(opts, redlock.WithRestartGuard(redlock.GuardOff))
	}
	if cfg.Now != nil {
		opts = append(opts, redlock.WithClock(cfg.Now))
	}
	if cfg.FastRetry {
		opts = append(opts, redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond))
	}
	if cfg.NoBreaker {
		opts = append(opts, redlock.WithoutBreaker())
	}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		return nil, err
	}
	return &Client{c: c}, nil
}

// Close stops the client's background work.
func (c *Client) Close() error { return c.c.Close() }

// Lock is one held lock.
type Lock struct {
	l     *redlock.Lock
	inner *redlock.Lock // a reentrant owner's second hold
}

// Obtain obtains name as kind with ttl, waiting until ctx ends; owner
// names the client (the reentrant lock's owner); auto keeps the lock
// refreshed until it is released or lost. A reentrant lock is entered
// twice: the second hold is released with the first.
func (c *Client) Obtain(ctx context.Context, name string, kind Kind, ttl time.Duration, owner string, auto bool) (*Lock, error) {
	var opts []redlock.ObtainOption
	if auto {
		opts = append(opts, redlock.WithAutoRefresh())
	}
	var h redlock.Locker
	switch kind {
	case Plain:
		h = c.c.Mutex(name)
	case Write:
		_, h = c.c.RWMutex(name)
	case Read:
		h, _ = c.c.RWMutex(name)
	case Reentrant:
		h = c.c.Reentrant(name, owner)
	default:
		return nil, fmt.Errorf("lockclient: unknown lock kind %q", kind)
	}
	l, err := h.Obtain(ctx, ttl, opts...)
	if err != nil {
		return nil, err
	}
	lk := &Lock{l: l}
	if kind == Reentrant {
		// The owner re-enters once; the first hold stays the one
		// that is checked and fenced with.
		lk.inner, _ = h.TryObtain(ctx, ttl)
	}
	return lk, nil
}

// Token is the lock's fencing token.
func (l *Lock) Token() int64 { return l.l.Token() }

// ValidUntil is the end of the lock's validity on the client's clock.
func (l *Lock) ValidUntil() time.Time { return l.l.ValidUntil() }

// Lost reports whether the lock is known lost (an automatically refreshed
// lock whose refresh failed, or one past its loss deadline).
func (l *Lock) Lost() bool { return l.l.Err() != nil }

// Done is closed when the lock is lost or released.
func (l *Lock) Done() <-chan struct{} { return l.l.Done() }

// Release releases the lock (and a reentrant owner's second hold),
// bounded by a second.
func (l *Lock) Release() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var err error
	if l.inner != nil {
		err = l.inner.Release(ctx)
	}
	return errors.Join(err, l.l.Release(ctx))
}
