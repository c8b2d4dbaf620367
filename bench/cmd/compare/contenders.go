package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	redlockgoredis "github.com/redlock-go/redlock/driver/goredis"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
)

// A contender is one way of taking a lock on a set of nodes, on one client
// configuration. Its workers are used by one goroutine each.
type contender struct {
	// name is the row's name: the library, then "/ctx" or "/defaults" for
	// the go-redis configuration it runs on, or "/rueidis" for a rueidis
	// client (rueidislock, on rueidis too, has no suffix).
	name string
	// lib is the library alone: floor, redlock, redsync, redislock or
	// rueidislock.
	lib string
	// config is the configuration the row runs, printed beside it: the
	// library's options, then the client's.
	config string
	// newWorker returns a worker for one goroutine and one lock key; nil
	// when the contender has no implementation for this many nodes.
	newWorker func(key string) worker
	close     func()
}

// worker locks one key for one goroutine.
type worker interface {
	// TryLock makes one attempt, without waiting.
	TryLock(ctx context.Context) error
	// Lock waits for the lock until it is obtained, the contender gives up,
	// or ctx ends.
	Lock(ctx context.Context) error
	// Unlock releases the lock obtained last.
	Unlock(ctx context.Context) error
}

var errNotObtained = errors.New("not obtained")

// A conf is one go-redis configuration. Every contender on go-redis runs
// on each, as a row of its own.
type conf string

const (
	// confCtx is what this module's README recommends:
	// ContextTimeoutEnabled, so that a context's deadline aborts a blocked
	// read, and no go-redis retries (the lock client retries itself).
	confCtx conf = "ctx"
	// confDefaults is go-redis's default options, which most services run:
	// ContextTimeoutEnabled false (a socket read or write ends at its
	// timeout, 5 s, whatever the context's deadline), MaxRetries 3.
	confDefaults conf = "defaults"
)

var confs = []conf{confCtx, confDefaults}

// text is how the configuration's rows print it.
func (c conf) text() string {
	if c == confCtx {
		return "go-redis ContextTimeoutEnabled, MaxRetries -1"
	}
	return "go-redis default options"
}

// rueidisText is how the rows on a rueidis client print its options.
const rueidisText = "rueidis default options (auto-pipelining), ForceSingleClient"

// redlockText is how redlock's rows print its options: the defaults,
// which keep the restart guard, fencing tokens and configuration records
// on, unless a test gave options.
func redlockText(opts []redlock.Option) string {
	if len(opts) > 0 {
		return fmt.Sprintf("redlock, %d options of a test", len(opts))
	}
	return "redlock defaults: restart guard on, fencing on, configuration records on"
}

func (c conf) options(addr string) *redis.Options {
	if c == confCtx {
		return &redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1}
	}
	return &redis.Options{Addr: addr}
}

func rowName(lib string, c conf) string { return lib + "/" + string(c) }

// newClients returns one go-redis client per address, with the options of
// configuration c.
func newClients(addrs []string, c conf) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(c.options(a))
	}
	return cs
}

func closeClients(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

func randomValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ---- raw floor ----

// unlockScript is the classic compare-and-delete.
var unlockScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// newFloor is no library: SET NX PX, then the compare-and-delete script. On
// several nodes, each request goes to every node in parallel and each phase
// returns as soon as a quorum said yes (what a Redlock cycle cannot beat);
// the stragglers finish in the background, bounded by nodeTimeout.
// With go-redis's default options the floor's deadlines bound its waits
// for a pooled connection and its retries but not its reads, which end at
// go-redis's ReadTimeout.
func newFloor(clients []*redis.Client, c conf, ttl, nodeTimeout time.Duration) *contender {
	return &contender{
		name:   rowName("floor", c),
		lib:    "floor",
		config: fmt.Sprintf("no library: SET NX PX, compare-and-delete; %s", c.text()),
		newWorker: func(key string) worker {
			if len(clients) == 1 {
				return &floorOne{c: clients[0], key: key, ttl: ttl}
			}
			return &floorFan{cs: clients, quorum: len(clients)/2 + 1, key: key, ttl: ttl, timeout: nodeTimeout}
		},
		close: func() {},
	}
}

type floorOne struct {
	c     *redis.Client
	key   string
	ttl   time.Duration
	value string
}

func (f *floorOne) TryLock(ctx context.Context) error {
	f.value = randomValue()
	ok, err := f.c.SetNX(ctx, f.key, f.value, f.ttl).Result()
	if err != nil {
		return err
	}
	if !ok {
		return errNotObtained
	}
	return nil
}

func (f *floorOne) Lock(ctx context.Context) error { return f.TryLock(ctx) }

func (f *floorOne) Unlock(ctx context.Context) error {
	n, err := unlockScript.Run(ctx, f.c, []string{f.key}, f.value).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("floor: key %s not ours at unlock", f.key)
	}
	return nil
}

// floorFan is the raw fan-out. One goroutine per node runs that node's SET
// and then, once the cycle releases, its delete, so that a delete never
// overtakes a late SET of the same cycle.
type floorFan struct {
	cs      []*redis.Client
	quorum  int
	key     string
	ttl     time.Duration
	timeout time.Duration

	cur *fanCycle
}

type fanCycle struct {
	acq, del chan bool
	release  chan struct{}
	delCtx   *phase // set before release is closed
}

// phase is a deadline shared by the requests of one phase; the last of
// them cancels it.
type phase struct {
	ctx    context.Context
	cancel context.CancelFunc
	left   atomic.Int32
}

func newPhase(timeout time.Duration, n int) *phase {
	p := &phase{}
	p.ctx, p.cancel = context.WithTimeout(context.Background(), timeout)
	p.left.Store(int32(n))
	return p
}

func (p *phase) done() {
	if p.left.Add(-1) == 0 {
		p.cancel()
	}
}

func (f *floorFan) TryLock(ctx context.Context) error {
	n := len(f.cs)
	cy := &fanCycle{acq: make(chan bool, n), del: make(chan bool, n), release: make(chan struct{})}
	f.cur = cy
	value := randomValue()
	acq := newPhase(f.timeout, n)
	for _, c := range f.cs {
		go func() {
			ok, err := c.SetNX(acq.ctx, f.key, value, f.ttl).Result()
			acq.done()
			ok = ok && err == nil
			cy.acq <- ok
			<-cy.release
			p := cy.delCtx
			if ok {
				d, err := unlockScript.Run(p.ctx, c, []string{f.key}, value).Int64()
				ok = err == nil && d == 1
			}
			p.done()
			cy.del <- ok
		}()
	}
	if yes := f.count(cy.acq); yes < f.quorum {
		_ = f.Unlock(ctx)
		return errNotObtained
	}
	return nil
}

func (f *floorFan) Lock(ctx context.Context) error { return f.TryLock(ctx) }

func (f *floorFan) Unlock(ctx context.Context) error {
	cy := f.cur
	n := len(f.cs)
	cy.delCtx = newPhase(f.timeout, n)
	close(cy.release)
	if yes := f.count(cy.del); yes < f.quorum {
		return fmt.Errorf("floor: unlock confirmed by %d nodes", yes)
	}
	return nil
}

// count reads the nodes' answers of one phase until a quorum agreed or can
// no longer agree, and returns how many agreed.
func (f *floorFan) count(answers <-chan bool) int {
	n := len(f.cs)
	yes := 0
	for i := range n {
		if <-answers {
			yes++
		}
		if yes >= f.quorum || yes+(n-1-i) < f.quorum {
			break
		}
	}
	return yes
}

// ---- this library ----

// newRedlock uses redlock with its default options unless opts are given
// (the harness gives none; its test turns the restart guard off).
func newRedlock(clients []*redis.Client, cf conf, ttl time.Duration, opts ...redlock.Option) (*contender, error) {
	nodes := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		nodes[i] = c
	}
	c, err := redlock.New(nodes, opts...)
	return redlockContender(rowName("redlock", cf), "redlock", redlockText(opts)+"; "+cf.text(), c, ttl), err
}

// redlockContender is the contender of a redlock Client (nil when c is).
func redlockContender(name, lib, config string, c *redlock.Client, ttl time.Duration) *contender {
	if c == nil {
		return nil
	}
	return &contender{
		name:      name,
		lib:       lib,
		config:    config,
		newWorker: func(key string) worker { return &redlockWorker{c: c, key: key, ttl: ttl} },
		close:     func() { _ = c.Close() },
	}
}

// noPipelineRow adds newRedlockNoPipeline's row (flag -nopipe-row).
var noPipelineRow bool

// newRedlockNoPipeline is newRedlock on go-redis's default options with
// the driver's auto-pipelining off (goredis.WithAutoPipelining(false)):
// each request on its own, as before auto-pipelining. Its row,
// redlock-nopipe/defaults, is an A/B of auto-pipelining and in no target.
func newRedlockNoPipeline(clients []*redis.Client, ttl time.Duration, opts ...redlock.Option) (*contender, error) {
	nodes := make([]driver.Node, len(clients))
	for i, c := range clients {
		nodes[i] = redlockgoredis.New(c, redlockgoredis.WithAutoPipelining(false))
	}
	c, err := redlock.NewFromNodes(nodes, opts...)
	return redlockContender(rowName("redlock-nopipe", confDefaults), "redlock-nopipe",
		redlockText(opts)+"; goredis.WithAutoPipelining(false); "+confDefaults.text(), c, ttl), err
}

type redlockWorker struct {
	c    *redlock.Client
	key  string
	ttl  time.Duration
	lock *redlock.Lock
}

func (w *redlockWorker) TryLock(ctx context.Context) error {
	l, err := w.c.TryObtain(ctx, w.key, w.ttl)
	w.lock = l
	return err
}

func (w *redlockWorker) Lock(ctx context.Context) error {
	l, err := w.c.Obtain(ctx, w.key, w.ttl)
	w.lock = l
	return err
}

func (w *redlockWorker) Unlock(ctx context.Context) error { return w.lock.Release(ctx) }

// ---- go-redsync/redsync ----

// newRedsync uses redsync with its default options (expiry 8 s, 32 tries
// 50–250 ms apart, per-node acquire timeout 5% of the expiry, no fail-fast).
// The per-node timeout is a context deadline: with go-redis's default
// options it bounds a request's wait for a connection and its retries, but
// not a blocked read.
func newRedsync(clients []*redis.Client, cf conf) *contender {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	rs := redsync.New(pools...)
	return &contender{
		name:      rowName("redsync", cf),
		lib:       "redsync",
		config:    "redsync defaults: expiry 8 s, 32 tries 50–250 ms apart; " + cf.text(),
		newWorker: func(key string) worker { return &redsyncWorker{m: rs.NewMutex(key)} },
		close:     func() {},
	}
}

type redsyncWorker struct{ m *redsync.Mutex }

func (w *redsyncWorker) TryLock(ctx context.Context) error { return w.m.TryLockContext(ctx) }
func (w *redsyncWorker) Lock(ctx context.Context) error    { return w.m.LockContext(ctx) }

func (w *redsyncWorker) Unlock(ctx context.Context) error {
	ok, err := w.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock not confirmed by a quorum")
	}
	return err
}

// ---- bsm/redislock ----

// newRedislock locks on the one node of client: redislock is a
// single-instance lock, so it has no 5-node rows.
func newRedislock(client *redis.Client, cf conf, ttl time.Duration) *contender {
	c := redislock.New(client)
	return &contender{
		name:      rowName("redislock", cf),
		lib:       "redislock",
		config:    "redislock: no retry uncontended, ExponentialBackoff(16 ms, 512 ms) contended; " + cf.text(),
		newWorker: func(key string) worker { return &redislockWorker{c: c, key: key, ttl: ttl} },
		close:     func() {},
	}
}

type redislockWorker struct {
	c    *redislock.Client
	key  string
	ttl  time.Duration
	lock *redislock.Lock
}

func (w *redislockWorker) TryLock(ctx context.Context) error {
	l, err := w.c.Obtain(ctx, w.key, w.ttl, nil)
	w.lock = l
	return err
}

// Lock retries with redislock's exponential backoff, 16 ms (its
// recommended minimum) to 512 ms, until ctx ends.
func (w *redislockWorker) Lock(ctx context.Context) error {
	l, err := w.c.Obtain(ctx, w.key, w.ttl, &redislock.Options{
		RetryStrategy: redislock.ExponentialBackoff(16*time.Millisecond, 512*time.Millisecond),
	})
	w.lock = l
	return err
}

func (w *redislockWorker) Unlock(ctx context.Context) error { return w.lock.Release(ctx) }

// ---- redis/rueidis rueidislock ----

// newRueidislock locks on the one node at addr. rueidislock takes one
// rueidis client, that is one deployment; KeyMajority k makes it set 2k-1
// keys there, which on Redis Cluster may land on different shards, but it
// cannot take a lock across independent masters as Redlock does (rueidis
// refuses several addresses that are not a cluster). So it has no 5-node
// rows.
//
// KeyMajority 1 and NoLoopTracking are its README's setting for one Redis
// of version 7.0.5 or later; the other options are its defaults
// (TryNextAfter, the timeout of one key's request: 20 ms), and KeyValidity
// is the harness's TTL.
func newRueidislock(addr string, ttl time.Duration) (*contender, error) {
	return newRueidislockTry(addr, ttl, 0)
}

// newRueidislockTry is newRueidislock with TryNextAfter set to tryNext (0:
// its default). rueidislock's WithContext waits for a wake after a failed
// try, and a try whose request outlasts TryNextAfter fails even on a free
// key; no wake then comes if no other holder releases the name, and
// WithContext waits until its context ends
// (TestRueidislockWaitsAfterASlowTry). A loaded test machine outlasts 20 ms,
// so the harness's tests give it more.
func newRueidislockTry(addr string, ttl, tryNext time.Duration) (*contender, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption:   rueidis.ClientOption{InitAddress: []string{addr}},
		KeyMajority:    1,
		NoLoopTracking: true,
		KeyValidity:    ttl,
		TryNextAfter:   tryNext,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return &contender{
		name:      "rueidislock",
		lib:       "rueidislock",
		config:    rueidislockText(tryNext),
		newWorker: func(key string) worker { return &rueidislockWorker{l: l, name: key} },
		close:     l.Close,
	}, nil
}

// rueidislockWorker maps the worker's calls onto rueidislock's: TryLock is
// TryWithContext (one attempt that does not wait), Lock is WithContext
// (waits, retrying when an invalidation says the key changed), Unlock calls
// the cancel function they return. That cancel deletes the key with a
// compare-and-delete script and waits for it, but reports no error and
// takes no context, so Unlock always returns nil.
type rueidislockWorker struct {
	l      rueidislock.Locker
	name   string
	cancel context.CancelFunc
}

func (w *rueidislockWorker) TryLock(ctx context.Context) error {
	_, cancel, err := w.l.TryWithContext(ctx, w.name)
	if err != nil {
		return err
	}
	w.cancel = cancel
	return nil
}

func (w *rueidislockWorker) Lock(ctx context.Context) error {
	_, cancel, err := w.l.WithContext(ctx, w.name)
	if err != nil {
		return err
	}
	w.cancel = cancel
	return nil
}

func (w *rueidislockWorker) Unlock(context.Context) error {
	if w.cancel == nil {
		return errors.New("rueidislock: unlock without a lock")
	}
	w.cancel()
	w.cancel = nil
	return nil
}

// rueidislockText is how rueidislock's row prints its options.
func rueidislockText(tryNext time.Duration) string {
	t := "TryNextAfter 20 ms (default)"
	if tryNext > 0 {
		t = "TryNextAfter " + tryNext.String()
	}
	return "rueidislock: KeyMajority 1, NoLoopTracking, " + t + "; its own rueidis client, default options"
}

// ---- on a rueidis client ----

// confRueidis names the rows of the contenders on a rueidis client
// (github.com/redis/rueidis) with its default options, which pipeline the
// requests of concurrent goroutines automatically: redlock through its
// rueidis driver, and the floor. It is not a go-redis configuration.
const confRueidis conf = "rueidis"

// newRueidisClients returns one rueidis client per address, as the rueidis
// driver's documentation configures a standalone node: rueidis's defaults
// and ForceSingleClient.
func newRueidisClients(addrs []string) ([]rueidis.Client, error) {
	cs := make([]rueidis.Client, 0, len(addrs))
	for _, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, ForceSingleClient: true})
		if err != nil {
			closeRueidis(cs)
			return nil, fmt.Errorf("rueidis %s: %w", a, err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeRueidis(cs []rueidis.Client) {
	for _, c := range cs {
		c.Close()
	}
}

// newRedlockRueidis is redlock with its default options on the rueidis
// driver (NewFromNodes).
func newRedlockRueidis(addrs []string, ttl time.Duration, opts ...redlock.Option) (*contender, error) {
	cs, err := newRueidisClients(addrs)
	if err != nil {
		return nil, err
	}
	nodes := make([]driver.Node, len(cs))
	for i, c := range cs {
		nodes[i] = rueidisdriver.New(c)
	}
	c, err := redlock.NewFromNodes(nodes, opts...)
	if err != nil {
		closeRueidis(cs)
		return nil, err
	}
	return &contender{
		name:      rowName("redlock", confRueidis),
		lib:       "redlock",
		config:    redlockText(opts) + "; " + rueidisText,
		newWorker: func(key string) worker { return &redlockWorker{c: c, key: key, ttl: ttl} },
		close:     func() { _ = c.Close(); closeRueidis(cs) },
	}, nil
}

// rueidisUnlock is the floor's compare-and-delete on rueidis (EVALSHA,
// falling back to EVAL).
var rueidisUnlock = rueidis.NewLuaScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// newFloorRueidis is the floor on one node on a rueidis client: SET NX PX,
// then the compare-and-delete script. It has no 5-node rows.
func newFloorRueidis(addr string, ttl time.Duration) (*contender, error) {
	cs, err := newRueidisClients([]string{addr})
	if err != nil {
		return nil, err
	}
	return &contender{
		name:      rowName("floor", confRueidis),
		lib:       "floor",
		config:    "no library: SET NX PX, compare-and-delete; " + rueidisText,
		newWorker: func(key string) worker { return &floorRueidis{c: cs[0], key: key, ttl: ttl} },
		close:     func() { closeRueidis(cs) },
	}, nil
}

type floorRueidis struct {
	c     rueidis.Client
	key   string
	ttl   time.Duration
	value string
}

func (f *floorRueidis) TryLock(ctx context.Context) error {
	f.value = randomValue()
	err := f.c.Do(ctx, f.c.B().Set().Key(f.key).Value(f.value).Nx().Px(f.ttl).Build()).Error()
	if rueidis.IsRedisNil(err) {
		return errNotObtained
	}
	return err
}

func (f *floorRueidis) Lock(ctx context.Context) error { return f.TryLock(ctx) }

func (f *floorRueidis) Unlock(ctx context.Context) error {
	n, err := rueidisUnlock.Exec(ctx, f.c, []string{f.key}, []string{f.value}).AsInt64()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("floor: key %s not ours at unlock", f.key)
	}
	return nil
}
