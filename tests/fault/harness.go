package fault

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/examples/fenced-storage/store"
	"github.com/redlock-go/redlock/internal/faultproxy"
	"github.com/redlock-go/redlock/internal/redistest"
)

const (
	lockName    = "fault:counter"
	nodeTimeout = 100 * time.Millisecond
)

// workload is what each client does, in a loop: obtain the lock, read the
// counter and the highest token from the store, sleep hold, write value+1
// with the lock's token, release.
type workload struct {
	ttl    time.Duration
	maxTTL time.Duration // WithMaxTTL: the restart guard's recovery window
	hold   time.Duration // between the read and the write
	bound  time.Duration // an attempt that has not obtained within bound fails
	// fenced false is the control: every write carries the same token, so
	// the store accepts everything, as a store without fencing would.
	fenced bool
	guard  bool // the restart guard; off is a control for restarts
	// gcPause makes every gcEvery-th operation of worker 0 stall for gcPause
	// between its read and its write, like a stop-the-world pause.
	gcEvery int
	gcPause time.Duration
	// holdFull makes worker 0 keep the lock for all the validity its own
	// clock grants it (the clock scenarios).
	holdFull bool
	// fastRetry makes waiting clients retry every 5 to 20 ms, so that one
	// is ready to take a lock a restarted majority forgot.
	fastRetry bool
	// auto obtains with WithAutoRefresh, and gives up its work when the
	// lock is lost (Err, Done), as a function run by Do would.
	auto bool
	// kind is the lock's kind (docs/lock-family.md), as the events name
	// it: plain (Client.Mutex), write (the writer of Client.RWMutex), or
	// reentrant (Client.Reentrant, each worker its own owner, re-entering
	// once while it holds the lock). The handle is chosen per worker
	// (workload.locker).
	kind string
	// readers is how many of the goroutine workers (the last ones) take
	// the shared lock (the reader of Client.RWMutex) instead: a reader
	// reads the counter with its token (ReadShared), keeps the lock for
	// hold, writes nothing and releases. The others take kind.
	readers int
	// permits > 0 makes each client take one permit of a semaphore of
	// that many (Client.Semaphore) instead of the lock, and hold it for
	// hold without touching the store: up to permits holders at once are
	// the semaphore's promise, and the checker counts the holders beyond
	// it.
	permits int
	// multi makes each goroutine worker obtain several names as one lock
	// (Client.All): lockName and multiNames[0] on every obtain,
	// multiNames[1] too on every other one, passed in an order that
	// varies with the worker and the iteration (multiOrder). It does the
	// fenced read-modify-write on the store with lockName's token and on
	// a second store (counter2) with multiNames[0]'s token.
	multi bool
	// leases, when set, is the degraded mode's shared lease store
	// (WithDegradedMode): every odd worker falls back to it while its
	// breaker is open, and reaches the nodes through the proxies; every
	// even worker reaches them directly, so a partition of the proxies
	// is partial: it cuts only the odd workers off.
	leases redlock.LeaseStore
}

// op is one successful acquisition, as the checker sees it. Times are Unix
// nanoseconds of the wall clock, shared by every process of the machine.
type op struct {
	Holder     string `json:"h"`
	Token      int64  `json:"t"`
	Obtained   int64  `json:"o"`
	End        int64  `json:"e"` // min(Release called, validity end in real time)
	Wrote      bool   `json:"w"`
	Accepted   bool   `json:"a"`
	Rejected   bool   `json:"r"`
	WriteStart int64  `json:"ws"`
	WriteEnd   int64  `json:"we"`
	Read       bool   `json:"rd"` // a shared (read) lock: it writes nothing
	// The second name of a multi-name hold (workload.multi), fenced on
	// the second store: its token, end of hold, and write.
	Token2      int64 `json:"t2,omitempty"`
	End2        int64 `json:"e2,omitempty"`
	Accepted2   bool  `json:"a2,omitempty"`
	WriteStart2 int64 `json:"ws2,omitempty"`
	WriteEnd2   int64 `json:"we2,omitempty"`
}

// attempt is one call of Obtain.
type attempt struct {
	OK      bool          `json:"ok"`
	Latency time.Duration `json:"l"`
}

// recorder collects ops and attempts from every client.
type recorder struct {
	mu       sync.Mutex
	ops      []op
	attempts []attempt
	holding  atomic.Int64 // clients between their read and their write
}

func (r *recorder) addOp(o op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) addAttempt(a attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

// sink receives a client's records: the recorder in process, stdout in a
// child process.
type sink interface {
	addOp(op)
	addAttempt(attempt)
	hold(delta int64)
}

func (r *recorder) hold(d int64) { r.holding.Add(d) }

// waitHolding waits (at most max) until some client is inside its
// read-modify-write, so that a fault strikes a lock in use.
func (r *recorder) waitHolding(ctx context.Context, max time.Duration) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	deadline := time.Now().Add(max)
	for r.holding.Load() == 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// clock is a client clock that runs at rate times real time from base.
type clock struct {
	base time.Time
	rate float64
}

func newClock(rate float64) *clock { return &clock{base: time.Now(), rate: rate} }

func (c *clock) now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.base)) * c.rate))
}

// real maps a time read on this clock back to real time.
func (c *clock) real(t time.Time) time.Time {
	return c.base.Add(time.Duration(float64(t.Sub(c.base)) / c.rate))
}

// goRedisOptions are the go-redis options of the suite's clients: the
// configuration docs/safety.md's checklist recommends (ContextTimeoutEnabled,
// and its optional MaxRetries: -1),
// with timeouts short enough that a dead node costs little.
func goRedisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           500 * time.Millisecond,
		WriteTimeout:          500 * time.Millisecond,
		MaxRetries:            -1,
	}
}

// storeClient returns a go-redis client for the store's node (no fault
// touches it).
func storeClient(addr string) *redis.Client { return redis.NewClient(goRedisOptions(addr)) }

// newLockClient returns a lock client on nodes of the suite's driver, one
// per address, with the options extra after the workload's, and a function
// that closes it and their clients.
func newLockClient(addrs []string, w workload, clk *clock, extra ...redlock.Option) (*redlock.Client, func(), error) {
	var nodes []driver.Node
	var closers []func()
	closeNodes := func() {
		for _, f := range closers {
			f()
		}
	}
	for _, a := range addrs {
		n, closeFn, err := suiteDriver.node(a)
		if err != nil {
			closeNodes()
			return nil, nil, err
		}
		nodes = append(nodes, n)
		closers = append(closers, closeFn)
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(nodeTimeout), redlock.WithMaxTTL(w.maxTTL)}
	if !w.guard {
		opts = append(opts, redlock.WithRestartGuard(redlock.GuardOff))
	}
	if w.fastRetry {
		opts = append(opts, redlock.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond))
	}
	if clk != nil {
		opts = append(opts, redlock.WithClock(clk.now))
	}
	if w.leases != nil {
		opts = append(opts, redlock.WithDegradedMode(w.leases), redlock.WithBreaker(2, 200*time.Millisecond))
	}
	c, err := redlock.NewFromNodes(nodes, append(opts, extra...)...)
	if err != nil {
		closeNodes()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); closeNodes() }, nil
}

// locker is the handle of lockName that worker id takes: a permit of the
// semaphore, or the lock of the workload's kind.
func (w workload) locker(c *redlock.Client, id string) redlock.Locker {
	switch {
	case w.permits > 0:
		return c.Semaphore(lockName, w.permits)
	case w.kind == "write":
		_, writer := c.RWMutex(lockName)
		return writer
	case w.kind == "read":
		reader, _ := c.RWMutex(lockName)
		return reader
	case w.kind == "reentrant":
		return c.Reentrant(lockName, id)
	}
	return c.Mutex(lockName)
}

// runWorker runs the workload until ctx ends. clk is the client's clock
// (nil: real time); worker0 enables the workload's per-worker knobs.
func runWorker(ctx context.Context, id string, c *redlock.Client, st *store.Store, w workload, clk *clock, worker0 bool, out sink) {
	toReal := func(t time.Time) time.Time { return t }
	if clk != nil {
		toReal = clk.real
	}
	h := w.locker(c, id)
	var opts []redlock.ObtainOption
	if w.auto {
		opts = append(opts, redlock.WithAutoRefresh())
	}
	for n := 1; ctx.Err() == nil; n++ {
		start := time.Now()
		octx, cancel := context.WithTimeout(ctx, w.bound)
		l, err := h.Obtain(octx, w.ttl, opts...)
		var inner *redlock.Lock
		if err == nil && w.kind == "reentrant" {
			// Re-enter once: the owner's second hold. The first hold
			// stays the one the work checks and fences with.
			inner, _ = h.TryObtain(octx, w.ttl)
		}
		cancel()
		if ctx.Err() != nil {
			if inner != nil {
				release(inner)
			}
			if l != nil {
				release(l)
			}
			return // the run ended during the attempt: not counted
		}
		out.addAttempt(attempt{OK: err == nil, Latency: time.Since(start)})
		if err != nil {
			continue
		}
		o := op{Holder: id, Token: l.Token(), Obtained: time.Now().UnixNano(), Read: w.kind == "read"}
		val := &validity{l: l}
		val.see()
		out.hold(1)
		if o.Read {
			o.Rejected = readHold(st, l, w)
		} else {
			o.WriteStart, o.WriteEnd, o.Wrote, o.Accepted, o.Rejected = rmw(ctx, st, l, val, w, clk, worker0, n)
		}
		out.hold(-1)
		val.see()
		releaseAt := time.Now()
		o.End = min(releaseAt.UnixNano(), toReal(val.last).UnixNano())
		if inner != nil {
			release(inner)
		}
		release(l)
		out.addOp(o)
		if w.readers > 0 && !o.Read {
			// A writer beside readers rests one hold between its holds:
			// with writer preference, one that re-acquires at once keeps
			// the readers out of a short run (after a crash of the
			// majority, the recovery window leaves a second or two), and
			// the run then has no mix of reads and writes to check.
			select {
			case <-ctx.Done():
			case <-time.After(w.hold):
			}
		}
	}
}

// multiNames are the names a multi-name worker obtains besides lockName.
var multiNames = []string{"fault:multi:b", "fault:multi:c"}

// multiOrder is the names of worker's n-th multi-name obtain: lockName and
// multiNames[0], in opposite orders for even and odd workers (and swapped
// every other pair of iterations), and on every other obtain multiNames[1]
// too, at a place that varies: so workers pass overlapping sets of names
// in opposite orders at the same time. (Client.All sorts them: the order
// given must not matter.)
func multiOrder(worker, n int) []string {
	names := []string{lockName, multiNames[0]}
	if (worker+n/2)%2 == 1 {
		slices.Reverse(names)
	}
	if n%2 == 1 {
		names = slices.Insert(names, (worker+n)%3, multiNames[1])
	}
	return names
}

// runMultiWorker is runWorker for workload.multi: each obtain is one
// Client.All of multiOrder's names, and the work is a fenced
// read-modify-write on st with lockName's token and on st2 with
// multiNames[0]'s, both read before the hold and written after it.
func runMultiWorker(ctx context.Context, worker int, c *redlock.Client, st, st2 *store.Store, w workload, out sink) {
	id := fmt.Sprintf("g%d", worker)
	for n := 1; ctx.Err() == nil; n++ {
		start := time.Now()
		octx, cancel := context.WithTimeout(ctx, w.bound)
		m, err := c.All(multiOrder(worker, n)...).Obtain(octx, w.ttl)
		cancel()
		if ctx.Err() != nil {
			if m != nil {
				release(m)
			}
			return // the run ended during the attempt: not counted
		}
		out.addAttempt(attempt{OK: err == nil, Latency: time.Since(start)})
		if err != nil {
			continue
		}
		var la, lb *redlock.Lock
		for _, l := range m.Parts() {
			switch l.Name() {
			case lockName:
				la = l
			case multiNames[0]:
				lb = l
			}
		}
		o := op{Holder: id, Token: la.Token(), Token2: lb.Token(), Obtained: time.Now().UnixNano()}
		va, vb := &validity{l: la}, &validity{l: lb}
		va.see()
		vb.see()
		out.hold(1)
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		ta, tb := o.Token, o.Token2
		if !w.fenced {
			ta, tb = 1, 1
		}
		// Both reads carry their token, then the hold, then both writes.
		va1, errA := st.ReadFenced(sctx, ta)
		vb1, errB := st2.ReadFenced(sctx, tb)
		if errors.Is(errA, store.ErrStale) {
			o.Wrote, o.Rejected = true, true
		}
		sleep(ctx, w.hold)
		if errA == nil {
			cur, _ := strconv.ParseInt(va1, 10, 64)
			ws := time.Now().UnixNano()
			err := st.Write(sctx, ta, strconv.FormatInt(cur+1, 10))
			o.WriteStart, o.WriteEnd, o.Wrote = ws, time.Now().UnixNano(), true
			o.Accepted, o.Rejected = err == nil, errors.Is(err, store.ErrStale)
		}
		if errB == nil {
			cur, _ := strconv.ParseInt(vb1, 10, 64)
			ws := time.Now().UnixNano()
			err := st2.Write(sctx, tb, strconv.FormatInt(cur+1, 10))
			o.WriteStart2, o.WriteEnd2, o.Accepted2 = ws, time.Now().UnixNano(), err == nil
		}
		scancel()
		out.hold(-1)
		va.see()
		vb.see()
		releaseAt := time.Now().UnixNano()
		o.End = min(releaseAt, va.last.UnixNano())
		o.End2 = min(releaseAt, vb.last.UnixNano())
		release(m)
		out.addOp(o)
	}
}

func release(l *redlock.Lock) {
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = l.Release(rctx)
	cancel()
}

// validity is the latest end of validity a lock was seen to have: an
// automatic refresh moves it on, a loss ends it.
type validity struct {
	l    *redlock.Lock
	last time.Time
}

func (v *validity) see() {
	if u := v.l.ValidUntil(); !u.IsZero() {
		v.last = u
	}
}

// holdAuto waits d while an automatically refreshed lock is held, noting
// its validity every 5 ms; it returns false when the lock was lost.
func holdAuto(l *redlock.Lock, val *validity, d time.Duration) bool {
	end := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		select {
		case <-l.Done():
			return false
		case <-tick.C:
			val.see()
		}
	}
	val.see()
	return l.Err() == nil
}

// rmw is the read-modify-write under the lock.
func rmw(ctx context.Context, st *store.Store, l *redlock.Lock, val *validity, w workload, clk *clock, worker0 bool, n int) (ws, we int64, wrote, accepted, rejected bool) {
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	token := l.Token()
	if !w.fenced {
		token = 1
	}
	if w.auto && l.Err() != nil {
		return 0, 0, false, false, false // lost: the work is abandoned
	}
	if w.permits > 0 {
		// A permit's work is holding it: the checker counts the
		// overlapping holders (beyondCapacity).
		start := time.Now().UnixNano()
		if w.auto {
			if !holdAuto(l, val, w.hold) {
				return 0, 0, false, false, false
			}
		} else {
			sleep(ctx, w.hold)
		}
		return start, time.Now().UnixNano(), true, false, false
	}
	// The read carries the token too: a holder that lost its lock cannot
	// then write after a newer holder has read (docs/fencing.md).
	v, err := st.ReadFenced(sctx, token)
	if errors.Is(err, store.ErrStale) {
		now := time.Now().UnixNano()
		return now, now, true, false, true
	}
	if err != nil {
		return 0, 0, false, false, false
	}
	cur, _ := strconv.ParseInt(v, 10, 64)
	wait := w.hold
	switch {
	case worker0 && w.gcEvery > 0 && n%w.gcEvery == 0:
		wait = w.gcPause
	case worker0 && w.holdFull && clk != nil:
		// Keep the lock until 5 ms before the end of the validity this
		// client's clock grants it.
		wait = time.Duration(float64(l.ValidUntil().Sub(clk.now())-5*time.Millisecond) / clk.rate)
	}
	if w.auto {
		if !holdAuto(l, val, wait) {
			return 0, 0, false, false, false
		}
	} else if wait > 0 {
		sleep(ctx, wait)
	}
	start := time.Now()
	err = st.Write(sctx, token, strconv.FormatInt(cur+1, 10))
	end := time.Now()
	switch {
	case err == nil:
		return start.UnixNano(), end.UnixNano(), true, true, false
	case errors.Is(err, store.ErrStale):
		return start.UnixNano(), end.UnixNano(), true, false, true
	default:
		return start.UnixNano(), end.UnixNano(), true, false, false
	}
}

// readHold is a reader's work under a shared lock: a shared read of the
// counter (ReadShared: refused only after a newer exclusive holder's
// operation, never because of another reader), then hold. It reports
// whether the store refused the read (the reader's lock was overtaken).
func readHold(st *store.Store, l *redlock.Lock, w workload) (rejected bool) {
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	token := l.Token()
	if !w.fenced {
		token = 1
	}
	_, err := st.ReadShared(sctx, token)
	if errors.Is(err, store.ErrStale) {
		return true
	}
	sleep(sctx, w.hold)
	return false
}

// sleep waits d; a pause in progress is finished even when ctx ends, as a
// paused process would, but never longer than d.
func sleep(_ context.Context, d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}

// env is one scenario's deployment: five lock nodes (each behind a fault
// proxy when asked) and one store node that no fault touches.
type env struct {
	t       *testing.T
	w       workload
	nodes   []*redistest.Server
	proxies []*faultproxy.Proxy
	addrs   []string // what the clients dial
	direct  []string // the nodes' own addresses, past the proxies
	storeDB *redis.Client
	store   *store.Store
	store2  *store.Store // the second name's record (workload.multi)
	rec     *recorder
	kids    []*child // client processes of the current run
	faults  atomic.Int64
	// sentinel, when set, is node 0: a master, a replica and three
	// sentinels, which clients reach through a failover client.
	sentinel *redistest.Sentinel
}

func newEnv(t *testing.T, w workload, proxied, sentinel bool) *env {
	t.Helper()
	e := &env{t: t, w: w, rec: &recorder{}}
	e.nodes = redistest.Start(t, 5)
	if sentinel {
		e.sentinel = redistest.StartSentinelT(t, "fault")
	}
	storeSrv := redistest.Start(t, 1)[0]
	e.storeDB = storeSrv.Client()
	t.Cleanup(func() { _ = e.storeDB.Close() })
	e.store = store.New(e.storeDB, "counter")
	e.store2 = store.New(e.storeDB, "counter2")
	for _, s := range e.nodes {
		e.direct = append(e.direct, s.Addr())
		if !proxied {
			e.addrs = append(e.addrs, s.Addr())
			continue
		}
		p, err := faultproxy.New(s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		e.proxies = append(e.proxies, p)
		e.addrs = append(e.addrs, p.Addr())
	}
	if e.sentinel != nil {
		e.addrs[0] = "sentinel:fault:" + strings.Join(e.sentinel.SentinelAddrs(), ",")
	}
	if w.guard {
		e.waitRecovered()
	}
	return e
}

// waitRecovered waits out the restart guard's first recovery window of the
// freshly started nodes.
func (e *env) waitRecovered() {
	c, closeFn, err := newLockClient(e.addrs, e.w, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer closeFn()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+2*e.w.maxTTL)
	defer cancel()
	l, err := c.Obtain(ctx, "fault:warmup", e.w.ttl)
	if err != nil {
		e.t.Fatalf("nodes did not leave their first recovery: %v", err)
	}
	release(l)
}

// run runs workers goroutine clients (clocks[i] is worker i's clock rate,
// 1 when missing) and the given children and injector for d, and returns
// the checked result.
func (e *env) run(name string, d time.Duration, workers int, rates []float64, children int, inject func(ctx context.Context, e *env)) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	var closers []func()
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	for i := range workers {
		var clk *clock
		if i < len(rates) && rates[i] != 1 {
			clk = newClock(rates[i])
		}
		addrs := e.addrs
		if e.w.leases != nil && i%2 == 0 {
			addrs = e.direct // reaches a quorum whatever the proxies do
		}
		c, closeFn, err := newLockClient(addrs, e.w, clk)
		if err != nil {
			e.t.Fatal(err)
		}
		closers = append(closers, closeFn)
		w := e.w
		if i >= workers-e.w.readers {
			w.kind = "read"
		}
		wg.Add(1)
		if w.multi {
			go func() {
				defer wg.Done()
				runMultiWorker(ctx, i, c, e.store, e.store2, w, e.rec)
			}()
			continue
		}
		go func() {
			defer wg.Done()
			runWorker(ctx, fmt.Sprintf("g%d", i), c, e.store, w, clk, i == 0, e.rec)
		}()
	}
	for i := range children {
		k, err := startChild(e, fmt.Sprintf("p%d", i), d)
		if err != nil {
			cancel()
			wg.Wait()
			e.t.Fatal(err)
		}
		e.kids = append(e.kids, k)
	}
	if inject != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inject(ctx, e)
		}()
	}
	wg.Wait()
	for _, k := range e.kids {
		if err := k.wait(); err != nil {
			e.t.Errorf("child %s: %v", k.id, err)
		}
	}
	return e.check(name)
}

// every calls strike every period until ctx ends, each time once a client
// holds the lock; strike must heal before it returns.
func every(ctx context.Context, e *env, period time.Duration, strike func()) {
	t := time.NewTimer(period / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.rec.waitHolding(ctx, period)
		if ctx.Err() != nil {
			return
		}
		strike()
		e.faults.Add(1)
		t.Reset(period)
	}
}

// result is one scenario's checked outcome: a row of docs/fault-testing.md.
type result struct {
	name          string
	attempts, ops int
	faults        int64
	overlaps      int
	staleAccepted int
	staleRejected int64
	acked         int64
	final         int64
	lost          int64
	abandoned     int // acquisitions whose work was given up: the lock was lost first
	// With readers: pairs of read holds that overlapped (allowed, and
	// what shows that readers share), and pairs of conflicting holds (not
	// both reads) where the one that ended before the other was obtained
	// has the higher or equal token (docs/lock-family.md, "Fencing
	// tokens").
	sharedOverlaps  int
	tokenInversions int
	reads           int // read holds among the ops
	// second is the same checks for the second name of a multi-name hold
	// (workload.multi), on its own store; zero otherwise.
	second struct {
		overlaps, staleAccepted int
		staleRejected           int64
		acked, final, lost      int64
	}
	availability float64
	p50, p99     time.Duration
}

func (e *env) check(name string) result {
	e.t.Helper()
	e.rec.mu.Lock()
	ops := slices.Clone(e.rec.ops)
	atts := slices.Clone(e.rec.attempts)
	e.rec.mu.Unlock()
	r := result{name: name, attempts: len(atts), ops: len(ops), faults: e.faults.Load()}

	r.overlaps, r.sharedOverlaps, r.tokenInversions = conflicts(ops, e.w.readers > 0)
	if e.w.permits > 0 {
		r.overlaps = beyondCapacity(ops, e.w.permits)
	}
	for _, o := range ops {
		if !o.Wrote && !o.Read {
			r.abandoned++
		}
	}
	r.staleAccepted, r.acked = staleAccepted(ops)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.final, r.lost, r.staleRejected = e.readStore(ctx, e.store, r.acked)
	if e.w.multi {
		// The second name: its own holds, tokens and record.
		ops2 := make([]op, len(ops))
		for i, o := range ops {
			ops2[i] = op{Token: o.Token2, Obtained: o.Obtained, End: o.End2,
				Accepted: o.Accepted2, WriteStart: o.WriteStart2, WriteEnd: o.WriteEnd2}
		}
		s := &r.second
		s.overlaps, _, _ = conflicts(ops2, false)
		s.staleAccepted, s.acked = staleAccepted(ops2)
		s.final, s.lost, s.staleRejected = e.readStore(ctx, e.store2, s.acked)
	}
	var lat []time.Duration
	ok := 0
	for _, a := range atts {
		if a.OK {
			ok++
			lat = append(lat, a.Latency)
		}
	}
	if len(atts) > 0 {
		r.availability = float64(ok) / float64(len(atts))
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	e.t.Logf("%s", r.row())
	if e.w.readers > 0 {
		for _, o := range ops {
			if o.Read {
				r.reads++
			}
		}
		e.t.Logf("%d of %d acquisitions were read holds; %d pairs of read holds overlapped; %d token inversions between conflicting holds",
			r.reads, r.ops, r.sharedOverlaps, r.tokenInversions)
	}
	if e.w.multi {
		s := r.second
		e.t.Logf("second name %s: %d overlaps, %d stale accepted, %d stale rejected, %d lost (%d acked, final %d)",
			multiNames[0], s.overlaps, s.staleAccepted, s.staleRejected, s.lost, s.acked, s.final)
	}
	if e.w.auto {
		e.t.Logf("%d of %d acquisitions abandoned: the lock was lost before the write", r.abandoned, r.ops)
	}
	if *flagReport != "" {
		f, err := os.OpenFile(*flagReport, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = fmt.Fprintln(f, r.row())
			_ = f.Close()
		}
	}
	return r
}

// staleAccepted counts the accepted writes whose token is below that of a
// write accepted before they started, and the accepted writes.
func staleAccepted(ops []op) (stale int, acked int64) {
	var acc []op
	for _, o := range ops {
		if o.Accepted {
			acc = append(acc, o)
		}
	}
	for _, w := range acc {
		for _, x := range acc {
			if x.WriteEnd < w.WriteStart && x.Token > w.Token {
				stale++
				break
			}
		}
	}
	return stale, int64(len(acc))
}

// readStore returns st's final counter, its count of lost updates and its
// count of rejected stale operations. An update is lost when two accepted
// writes wrote the same value (two holders read the same counter): the
// final counter is then below the store's count of accepted writes. The
// count is the store's, not the clients' acknowledgements: a write whose
// reply a client never saw (a pause or a lost reply past the write's
// timeout) was still accepted, and counts.
func (e *env) readStore(ctx context.Context, st *store.Store, acked int64) (final, lost, rejected int64) {
	v, _, err := st.Read(ctx)
	if err != nil {
		e.t.Fatalf("read the store: %v", err)
	}
	final, _ = strconv.ParseInt(v, 10, 64)
	accepted, rejected, err := st.Stats(ctx)
	if err != nil {
		e.t.Fatalf("store stats: %v", err)
	}
	if accepted != acked {
		e.t.Logf("store accepted %d writes, clients saw %d acknowledged", accepted, acked)
	}
	return final, accepted - final, rejected
}

// conflicts sorts ops by the time they were obtained and counts the pairs
// whose [obtained, end] intervals intersect: overlaps, unless both are read
// holds (readers share the lock: shared). With tokens, it also counts the
// pairs of conflicting holds (not both reads) where the one that ended
// before the other was obtained has the higher or equal token.
func conflicts(ops []op, tokens bool) (overlaps, shared, inversions int) {
	slices.SortFunc(ops, func(a, b op) int { return int(a.Obtained - b.Obtained) })
	for i := range ops {
		for j := i + 1; j < len(ops) && ops[j].Obtained < ops[i].End; j++ {
			if ops[i].Read && ops[j].Read {
				shared++
			} else {
				overlaps++
			}
		}
	}
	if tokens {
		for i, a := range ops {
			for _, b := range ops[i+1:] {
				if !(a.Read && b.Read) && a.End < b.Obtained && a.Token >= b.Token {
					inversions++
				}
			}
		}
	}
	return overlaps, shared, inversions
}

// beyondCapacity counts, for a semaphore of k permits, the acquisitions
// that began while k others were still valid: each is a holder beyond the
// semaphore's capacity. ops are sorted by Obtained. (For k = 1 it counts
// each acquisition that overlaps an earlier one once, where the lock's
// count above counts each overlapping pair.)
func beyondCapacity(ops []op, k int) int {
	n := 0
	for i := range ops {
		live := 0
		for j := range i {
			if ops[j].End > ops[i].Obtained {
				live++
			}
		}
		if live >= k {
			n++
		}
	}
	return n
}

func (r result) row() string {
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d (%d acked, final %d) | %.1f%% | %v | %v |",
		r.name, r.attempts, r.faults, r.overlaps, r.staleAccepted, r.staleRejected, r.lost, r.acked, r.final,
		100*r.availability, r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond))
}
