package redlock

import (
	"context"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
)

// Client obtains locks on one Redis node (the single-instance lock) or on N
// independent nodes (Redlock, quorum N/2+1). Its handles (Mutex, Reentrant,
// RWMutex, Semaphore, All, Any) name the locks; Obtain, TryObtain and Do are
// the plain lock's shorthand. It is safe for concurrent use.
//
// The Client does not own the Redis clients it is given: close them after
// Close.
type Client struct {
	e engine
}

// New returns a Client over the given nodes, each a go-redis client (the
// go-redis driver, package driver/goredis). Each node is an independent
// Redis deployment: a standalone server (redis.NewClient), a
// Sentinel-managed master (redis.NewFailoverClient) or a Redis Cluster
// (redis.NewClusterClient). One node gives the classic single-instance
// lock; five independent nodes the classic Redlock deployment. Give each
// node's client ContextTimeoutEnabled: true (see WithNodeTimeout). For the
// clients of other libraries (rueidis, redigo), see NewFromNodes.
//
// A node that refuses connections (a closed port, a stopped server) is
// reported per node with the refusal; until it accepts again, each request
// dials it once outside go-redis's pool and fails at once if refused, so
// that go-redis, which logs each failed series of dials through its
// process-wide logger (redis.SetLogger), logs it once per outage. For
// this New adds a dial hook to each *redis.Client it is given (package
// driver/goredis), once for the client's life: Clients made on the same
// go-redis clients share it, and a refusal marks the client for at most
// a second after it was seen, or until a connection is accepted.
//
// New does no I/O. It returns an error wrapping ErrInvalid when nodes is
// empty or has more than 64, holds a nil client (or a typed nil, such as
// a nil *redis.Client) or the same client (or address) twice, or when an
// option is out of range or nil where it needs a value (WithClock,
// WithHook, WithDegradedMode, WithBackoff). One server under two
// addresses (127.0.0.1 and localhost, a DNS alias) is seen at the Client's
// first contact with its nodes: its first obtain reads each node's run_id
// (INFO server; without configuration records, in its acquire's
// pipeline), and when two nodes share one, that obtain and every later
// one fail with an error wrapping ErrInvalid that names both nodes and the
// run_id (docs/safety.md, assumption 1).
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	conns := make([]driver.Node, len(nodes))
	for i, n := range nodes {
		node := goredis.New(n)
		if node == nil {
			return nil, invalid("node %d is a nil client (%T)", i, n)
		}
		for j := range i {
			if reflect.TypeOf(nodes[j]) == reflect.TypeOf(n) && reflect.TypeOf(n).Comparable() && nodes[j] == n {
				return nil, invalid("node %d is the same client as node %d", i, j)
			}
		}
		conns[i] = node
	}
	return NewFromNodes(conns, opts...)
}

// NewFromNodes returns a Client over nodes of any driver (package driver):
// go-redis (driver/goredis), rueidis (the module driver/rueidis), redigo
// (the module driver/redigo), or a driver of the caller's own. Nodes of
// different drivers may be mixed. Everything New says of nodes holds here.
//
// NewFromNodes does no I/O, and calls each node's Notifier once; Close
// closes those notifiers, not the nodes or their clients. It returns an
// error wrapping ErrInvalid when nodes is empty or has more than 64, holds
// a nil node, the same node twice or two nodes whose Info names the same
// server, or when an option is out of range.
func NewFromNodes(nodes []driver.Node, opts ...Option) (*Client, error) {
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
	if cfg.hook != nil {
		cfg.hook = &guardedHook{h: cfg.hook, logger: cfg.logger, now: cfg.now}
	}
	for i, n := range nodes {
		if n == nil || isNilValue(n) {
			return nil, invalid("node %d is nil", i)
		}
		for j := range i {
			if sameNode(nodes[j], n) {
				return nil, invalid("node %d is the same node as node %d", i, j)
			}
		}
	}
	c := &Client{}
	if err := c.e.init(nodes, cfg, c.e.fire); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases every lock still held through this Client, stops its
// background work and waits for it. Calls after Close return ErrClosed. It
// does not close the Redis clients. Close is idempotent and returns nil.
func (c *Client) Close() error {
	c.e.life.Lock()
	held, first := c.e.reg.close()
	c.e.life.Unlock()
	if !first {
		<-c.e.reg.done
		return nil
	}
	// The scheduler starts refresh goroutines: stop it first. Release
	// starts no goroutine once a lock is released, and every held lock is
	// released here before bg.Wait.
	c.e.sched.Stop()
	c.e.brk.stop()
	c.e.sampler.loop.stop()
	c.e.rec.loop.stop()
	releaseAll(held)
	for _, h := range c.e.waits.hubs {
		h.Close()
	}
	c.e.workers.Stop()
	c.e.bg.Wait()
	close(c.e.reg.done)
	return nil
}

// BreakerState returns the state of the Client's circuit breaker (see
// WithBreaker): "closed" (a quorum of nodes is reachable), "open" (obtains
// are refused, wait, or fall back to the degraded mode), or "half_open" (a
// probe is under way). It is "closed" when the breaker is off.
func (c *Client) BreakerState() BreakerState { return breakerLabel(c.e.brk.state.State()) }

// Locker is a handle on a lock: a name (or names) and a kind, made by the
// Client's Mutex, Reentrant, RWMutex, Semaphore, All and Any. Making one
// does no I/O; each call of its methods obtains a new *Lock. Handles are
// safe for concurrent use.
//
// Obtain obtains the lock for ttl, retrying until it succeeds, ctx ends or
// the attempts of WithMaxAttempts are used up. An attempt is one acquire
// round on every node. The first is made at once, or, while other
// goroutines of this Client wait for the lock, when this call's turn comes.
// Before each later attempt Obtain waits with exponential backoff and
// jitter (WithRetryDelay), never past the holder's remaining TTL, and less
// when the lock is released: a release notification ends the wait. It
// returns an error wrapping ErrNotObtained (a *QuorumError that says why,
// node by node: errors.Is matches ErrHeld when another owner holds it)
// when the attempts are used up, joined with ctx's error when ctx ends
// (an attempt that ctx cut short adds nothing: the error says why the last
// whole attempt failed);
// ErrClosed after Close; ErrInvalid for a bad name, TTL, option or handle
// before any I/O, or for one server given as two nodes (see New); and at
// once, without waiting, an error matching ErrWrongKind when the name is
// in use by a lock of another kind. While
// the circuit breaker is open it waits for it to close (see WithBreaker).
// The caller must Release the returned lock.
//
// TryObtain makes one attempt at once, even while other goroutines of this
// Client wait for the lock, whatever WithMaxAttempts says. Its errors are
// Obtain's; the breaker's refusal matches ErrBreakerOpen. Release returns
// once a quorum deleted the key, and on a starved machine the requests of
// an earlier lock of the name to the other nodes can land later still, so
// a TryObtain right after a Release may rarely meet those keys and fail
// with ErrHeld, where Obtain would wait for their deletion.
//
// Do obtains the lock like Obtain, keeps it alive with automatic refresh,
// runs fn, and releases the lock. fn's context is cancelled with cause
// ErrLost (see context.Cause) the moment the lock can no longer be
// guaranteed; fn must then stop touching what the lock protects. Do returns
// Obtain's error when the lock was not obtained (fn did not run), and
// otherwise fn's error, joined with an error wrapping ErrLost when the lock
// was lost while fn ran.
type Locker interface {
	Obtain(ctx context.Context, ttl time.Duration, opts ...ObtainOption) (*Lock, error)
	TryObtain(ctx context.Context, ttl time.Duration, opts ...ObtainOption) (*Lock, error)
	Do(ctx context.Context, ttl time.Duration, fn func(context.Context) error, opts ...ObtainOption) error
}

// handle is every Locker: its names and the spec of its kind (a reader's
// or writer's mode, an owner, a number of permits); err, when set, is what
// its maker got wrong, which every obtain returns.
type handle struct {
	c     *Client
	one   [1]string // the name of a handle of one name: names points here
	names []string
	spec
	err error
	all bool // Client.All: every name, as one lock
}

func (c *Client) handle(sp spec, err error, names ...string) *handle {
	h := &handle{c: c, spec: sp, err: err}
	if len(names) == 1 {
		h.one[0] = names[0]
		h.names = h.one[:]
	} else {
		h.names = names
	}
	return h
}

// Mutex returns the handle of the plain lock named name: one exclusive
// holder at a time, the cheapest cycle. While the circuit breaker is open,
// a plain lock may fall back to the degraded mode (WithDegradedMode).
func (c *Client) Mutex(name string) Locker {
	return c.handle(plainSpec, nil, name)
}

// Reentrant returns the handle of the reentrant lock named name, held by
// owner: an obtain with the same owner while the lock is held succeeds at
// once, through any Client, keeps the lock's fencing token (see
// docs/lock-family.md for when it cannot) and counts one more hold, and it
// never waits behind other goroutines of its Client that wait for the lock
// (an owner's obtains queue only behind the same owner's). Each hold is a
// *Lock of its own, with its own validity, refresh and Release; the lock is
// free once every hold is released or expired. Another owner, a reader or
// a writer of the same name is refused as usual. Two first obtains of one
// owner that run at once, neither holding yet, may get different tokens:
// obtain once before starting the work that re-enters.
//
// Two holds with one owner are one owner: use an owner unique to the job
// that holds the lock (a request or run ID), never a constant shared by
// processes that must exclude each other. The owner is stored in Redis in
// clear. An empty owner makes every obtain fail with ErrInvalid.
func (c *Client) Reentrant(name, owner string) Locker {
	sp, err := reentrantSpec(owner)
	return c.handle(sp, err, name)
}

// RWMutex returns the handles of the read-write lock named name, like
// io.Pipe returns its two ends: any number of readers hold it at once while
// no writer does, and a writer holds it alone. A writer waits until no
// reader and no other writer holds the name, and readers that come while it
// waits wait behind it; a writer that gives up withdraws at once. A
// reader's fencing token is greater than that of every writer before it
// and smaller than that of every writer after it; readers are not ordered
// among themselves. A reentrant lock of the same name contends with them
// as a writer (docs/lock-family.md).
func (c *Client) RWMutex(name string) (reader, writer Locker) {
	return c.handle(readerSpec, nil, name), c.handle(writerSpec, nil, name)
}

// Semaphore returns the handle of the semaphore named name with k permits:
// each lock obtained is one permit, and at most k permits of a name are
// valid at any moment, across every Client that uses the same nodes and
// prefix. A permit whose holder crashed is taken back by the nodes when its
// TTL runs out. Its token is greater than that of every permit of the name
// granted before the obtain began (permits obtained at the same time may
// share one; see docs/safety.md, "Semaphores").
//
// On n independent nodes each permit needs floor(n·k/(k+1)) + 1 of them: a
// majority for k = 1, but all five of five nodes once k ≥ 4, so that one
// node down refuses every permit. That is the availability a semaphore
// costs. One node (standalone, Sentinel or Cluster) serves any k.
//
// k must be 1 to 1024 (else every obtain fails with ErrInvalid), and the
// same for every user of the name while any permit is live: another k is
// refused with ErrWrongKind, without waiting.
func (c *Client) Semaphore(name string, k int) Locker {
	sp, err := permitSpec(k)
	return c.handle(sp, err, name)
}

// All returns the handle of the plain locks named names, obtained as one
// lock: all or nothing. An obtain sorts the names (bytewise) and obtains
// them one after the other in that order, waiting for each (until ctx ends
// or the attempts of WithMaxAttempts, counted per name, are used up) while
// it holds the ones before it, which it keeps alive by automatic refresh.
// Because every multi-name obtain takes its names in the same order, and a
// single-name waiter holds nothing, no two obtains can wait for each other
// in a cycle (docs/lock-family.md, "Multi-name locks"). Once all are
// obtained, the lock keeps automatic refresh only if WithAutoRefresh is
// given (Do gives it).
//
// The lock has no Name or Token of its own: Lock.Parts returns one lock per
// name, each an ordinary plain lock with its own fencing token, which
// contends with Mutex on the same name. On any failure the obtain releases
// every lock it obtained and returns an error that names the name that
// failed and wraps the reason (ErrNotObtained, ErrClosed, ctx's error, or
// ErrLost when a lock already held was lost while waiting). Every obtain
// fails with ErrInvalid, before any I/O, for no names, more than 1024, an
// invalid name or a name given twice.
func (c *Client) All(names ...string) Locker {
	h := c.handle(plainSpec, nil, names...)
	h.all = true
	return h
}

// Any returns the handle of a segmented lock: the plain locks named names,
// of which an obtain takes whichever is free, for a hot resource split into
// segments that each have a name (the stock of a flash sale in ten
// segments). An obtain makes a pass over the names in a random order,
// trying each once, and returns the first it obtains; when every name is
// held, it waits on all of them at once and makes a new pass when any is
// released. WithMaxAttempts counts passes; TryObtain makes one pass. The
// lock is an ordinary plain lock on the name it got: Lock.Name says which.
// Segments that run dry are the application's business: pass only the
// names that still have stock. Every obtain fails with ErrInvalid, before
// any I/O, for no names, more than 1024, an invalid name or a name given
// twice.
func (c *Client) Any(names ...string) Locker {
	return c.handle(plainSpec, nil, names...)
}

func (h *handle) Obtain(ctx context.Context, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return h.obtain(ctx, ttl, opts, false)
}

func (h *handle) TryObtain(ctx context.Context, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return h.obtain(ctx, ttl, opts, true)
}

func (h *handle) Do(ctx context.Context, ttl time.Duration, fn func(context.Context) error, opts ...ObtainOption) error {
	if fn == nil {
		return invalid("nil function")
	}
	l, err := h.obtain(ctx, ttl, append(opts[:len(opts):len(opts)], WithAutoRefresh()), false)
	if err != nil {
		return err
	}
	return runHeld(ctx, l, fn)
}

func (h *handle) obtain(ctx context.Context, ttl time.Duration, opts []ObtainOption, try bool) (*Lock, error) {
	if h.err != nil {
		return nil, h.err
	}
	if ctx == nil {
		return nil, errNilContext
	}
	e := &h.c.e
	if h.all {
		return e.obtainAll(ctx, h.names, ttl, opts, try)
	}
	r := request{names: h.names, spec: &h.spec}
	if err := e.prepare(&r, ttl, opts, try); err != nil {
		return nil, err
	}
	return e.obtain(ctx, &r)
}

// Obtain obtains the plain lock named name for ttl: the shorthand of
// c.Mutex(name).Obtain(ctx, ttl, opts...). See Locker.
func (c *Client) Obtain(ctx context.Context, name string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.plain(ctx, name, ttl, opts, false)
}

// TryObtain makes one attempt to obtain the plain lock named name for ttl:
// the shorthand of c.Mutex(name).TryObtain(ctx, ttl, opts...). See Locker.
func (c *Client) TryObtain(ctx context.Context, name string, ttl time.Duration, opts ...ObtainOption) (*Lock, error) {
	return c.plain(ctx, name, ttl, opts, true)
}

// Do obtains the plain lock named name, keeps it alive while fn runs, and
// releases it: the shorthand of c.Mutex(name).Do(ctx, ttl, fn, opts...).
// See Locker.
func (c *Client) Do(ctx context.Context, name string, ttl time.Duration, fn func(context.Context) error, opts ...ObtainOption) error {
	if fn == nil {
		return invalid("nil function")
	}
	l, err := c.plain(ctx, name, ttl, append(opts[:len(opts):len(opts)], WithAutoRefresh()), false)
	if err != nil {
		return err
	}
	return runHeld(ctx, l, fn)
}

// plain obtains the plain lock named name, as a Mutex handle would, without
// making one.
func (c *Client) plain(ctx context.Context, name string, ttl time.Duration, opts []ObtainOption, try bool) (*Lock, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	r := request{spec: &plainSpec}
	r.one[0] = name
	r.names = r.one[:]
	if err := c.e.prepare(&r, ttl, opts, try); err != nil {
		return nil, err
	}
	return c.e.obtain(ctx, &r)
}
