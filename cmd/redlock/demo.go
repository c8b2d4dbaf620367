package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/limits"
	"github.com/redlock-go/redlock/internal/redisproc"
)

type demoConfig struct {
	local     int // local nodes to start when no nodes are given
	external  []*nodeSpec
	extOpts   []redlock.Option
	timeout   time.Duration
	stock     int
	buyers    int
	instances int
	ttl       time.Duration
	wait      time.Duration
	faults    bool
	unsafe    bool
	inProcess bool
	think     time.Duration // the purchase's work between its read and its write
	segments  int           // >1: the stock split into segments, each under its own lock
	compare   bool          // run with one lock, then with segments, side by side
	maxTTL    time.Duration // the deployment's longest TTL (WithMaxTTL)
	guard     bool          // the demo's own nodes: the restart guard is on
	fenced    bool          // the stock is a fenced counter (package fence); false: plain reads and writes
	stall     bool          // the first purchase stalls between its read and its write, past its lock's TTL
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg demoConfig
	fs := newFlagSet("demo")
	var (
		nf nodeFlags
		gf guardFlags
	)
	nf.register(fs)
	gf.register(fs)
	fs.IntVar(&cfg.local, "local", 5, "without --nodes: how many local nodes to start")
	fs.IntVar(&cfg.stock, "stock", 100, "items for sale")
	fs.IntVar(&cfg.buyers, "buyers", 300, "concurrent buyers")
	fs.IntVar(&cfg.instances, "instances", 4, "simulated service instances, each with its own lock client")
	fs.DurationVar(&cfg.ttl, "ttl", 5*time.Second, "lock TTL")
	fs.DurationVar(&cfg.wait, "wait", 30*time.Second, "how long a buyer waits for the lock")
	fs.BoolVar(&cfg.faults, "faults", true, "kill one node and freeze another when half the stock is sold")
	fs.BoolVar(&cfg.unsafe, "unsafe", false, "sell without the lock, to see what the lock prevents")
	fs.BoolVar(&cfg.inProcess, "in-process", false, "use in-process Redis-compatible servers even when redis-server is installed")
	fs.DurationVar(&cfg.think, "think", 200*time.Microsecond, "how long a purchase works between reading the stock and writing it\n(its time under the lock)")
	fs.IntVar(&cfg.segments, "segments", 1, "split the stock into this many segments, each under its own lock\n(Client.Any takes a free one); 1 is one lock for the whole stock")
	fs.BoolVar(&cfg.fenced, "fence", true, "decrement the stock through package fence's fenced counter, which refuses\nthe write of a buyer whose lock has expired; false: a plain read and write")
	fs.BoolVar(&cfg.stall, "stall", false, "make the first purchase stall between its read and its write for 1.5 TTL,\npast its lock's validity (as a long GC pause would)")
	fs.BoolVar(&cfg.compare, "compare", false, "run the sale twice on the same nodes, with one lock and with --segments\nsegments (8 if --segments is 1), and print both side by side; injects no fault")
	help := helpText{
		usage: "demo [flags]",
		about: `A flash sale: buyers on several service instances race for limited stock,
each purchase a read-modify-write under one distributed lock.

With --segments N the stock is split into N segments of about stock/N items,
each under a lock of its own: a buyer takes whichever segment is free
(Client.Any) and moves on to another when its segment has run dry, so up to
N purchases run at once. --compare runs the same sale with one lock and with
N segments on the same nodes, one after the other, and prints throughput
and latency side by side, and per item sold the lock attempts, the
waiters' wake-ups and, on the demo's own nodes, the commands the nodes ran
(INFO commandstats: the scripts' inner commands and the stock's included)
and their CPU time: counts, unlike throughput, do not depend on the
machine's load. Each run ends when every buyer has bought, found
no stock, or waited --wait; buyers still waiting when the last item is sold
stop waiting and find no stock.

The stock lives on the first node, a hash per segment: each purchase reads
it with the lock's fencing token and decrements it with fence.Redis.Add,
which refuses a token older than one the stock has seen, and never goes
below zero. The report counts the stale writes refused. --stall makes the
first purchase stall past its lock's TTL between its read and its write:
another buyer takes the lock and sells meanwhile, and the stalled write is
refused; with --fence=false it is accepted and the sale oversells.

On the demo's own nodes (without --nodes), --max-ttl is --ttl unless given,
so that the restart guard keeps the fresh nodes out for one TTL;
--restart-guard is on or off (the nodes do not persist their writes, so
persistent does not apply), and off on in-process nodes, which cannot run
it. --unsafe takes no lock: it starts and waits for no node.

Exit status: 0 when every sale sold out without overselling; 1 when one did
not sell out (buyers waited --wait in vain) or oversold, with the reason on
stderr. With --unsafe, overselling, and stock the shop lost track of, are
what the run shows, not failures: it exits 0 when the sale ran to its end;
so is overselling with --stall --fence=false.`,
	}
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if nf.given() {
		specs, _, err := nf.resolve()
		if err != nil {
			say(stderr, "demo", "%v", err)
			return exitUsage
		}
		opts, err := gf.options()
		if err != nil {
			say(stderr, "demo", "%v", err)
			return exitUsage
		}
		if err := gf.checkTTL(cfg.ttl); err != nil {
			say(stderr, "demo", "%v", err)
			return exitUsage
		}
		// The demo does not own these nodes: it injects no fault.
		cfg.external, cfg.extOpts, cfg.timeout, cfg.faults = specs, opts, nf.timeout, false
		cfg.maxTTL = gf.maxTTL
	} else if err := cfg.ownGuard(gf, given); err != nil {
		say(stderr, "demo", "%v", err)
		return exitUsage
	}
	if cfg.unsafe {
		cfg.faults = false // no lock, so no node to fault
	}
	if cfg.compare {
		cfg.faults = false
		if cfg.segments == 1 {
			cfg.segments = 8
		}
	}
	if err := cfg.validate(); err != nil {
		say(stderr, "demo", "%v", err)
		return exitUsage
	}
	if err := demo(ctx, cfg, stdout); err != nil {
		say(stderr, "demo", "%v", err)
		return exitError
	}
	return exitOK
}

// ownGuard sets the restart guard of the demo's own nodes from the flags:
// the longest TTL is --max-ttl when given, else the sale's --ttl, so that
// the guard keeps the fresh nodes out for one TTL. The nodes do not persist
// their writes, so --restart-guard persistent does not apply; in-process
// nodes cannot run the guard (no INFO server), so it is off there, and
// asking for it is an error.
func (c *demoConfig) ownGuard(gf guardFlags, given map[string]bool) error {
	if _, err := gf.options(); err != nil {
		return err
	}
	c.maxTTL = c.ttl
	if given["max-ttl"] {
		if err := gf.checkTTL(c.ttl); err != nil {
			return err
		}
		c.maxTTL = gf.maxTTL
	}
	switch gf.mode {
	case guardPersistent:
		return usagef("--restart-guard %s: the demo's own nodes do not persist every write (appendonly no); use on or off", gf.mode)
	case guardOn:
		c.guard = !inProcessNodes(c.inProcess)
		if !c.guard && given["restart-guard"] {
			return usagef("--restart-guard %s: in-process nodes cannot run the restart guard (no INFO server); use off", gf.mode)
		}
	default:
		c.guard = false
	}
	return nil
}

// faultNodes is how many own nodes --faults needs so that a quorum is left:
// 5 when it kills one and freezes another (5-2 is a quorum of 5, 4-2 is not
// one of 4), 3 when nodes cannot be frozen and it only kills one.
func (c demoConfig) faultNodes() int {
	if !inProcessNodes(c.inProcess) && redisproc.FreezeSupported() {
		return 5
	}
	return 3
}

func (c demoConfig) validate() error {
	switch {
	case c.external == nil && c.local < 1:
		return fmt.Errorf("--local %d: need at least one node", c.local)
	case c.stock < 1:
		return fmt.Errorf("--stock %d: need at least one item", c.stock)
	case c.buyers < 1:
		return fmt.Errorf("--buyers %d: need at least one buyer", c.buyers)
	case c.buyers < c.stock:
		return fmt.Errorf("--buyers %d: fewer buyers than items (--stock %d), the sale could not sell out", c.buyers, c.stock)
	case c.instances < 1:
		return fmt.Errorf("--instances %d: need at least one instance", c.instances)
	case c.ttl < limits.MinTTL:
		return fmt.Errorf("--ttl %v: below the minimum %v", c.ttl, limits.MinTTL)
	case c.think < 0:
		return fmt.Errorf("--think %v: must not be negative", c.think)
	case c.wait <= 0:
		return fmt.Errorf("--wait %v: must be positive", c.wait)
	case c.segments < 1 || c.segments > limits.MaxNames:
		return fmt.Errorf("--segments %d: must be between 1 and %d", c.segments, limits.MaxNames)
	case c.segments > c.stock:
		return fmt.Errorf("--segments %d: more segments than items (--stock %d)", c.segments, c.stock)
	case c.compare && c.unsafe:
		return fmt.Errorf("--compare and --unsafe: the comparison is of two safe designs")
	case c.stall && (c.unsafe || c.compare):
		return fmt.Errorf("--stall with --unsafe or --compare: a stall past the lock's TTL needs a lock, and one sale")
	case c.faults && c.external == nil && c.local < c.faultNodes():
		return fmt.Errorf("--local %d: --faults needs at least %d nodes, so that the nodes it kills or freezes leave a quorum; use --local %d or --faults=false",
			c.local, c.faultNodes(), c.faultNodes())
	}
	return nil
}

// shop is the shared resource: the stock per segment (one segment when the
// sale has one lock), read and written in two steps, as a service would.
// Under a lock it lives in Redis (db), a hash per segment: with fenced set,
// read with the lock's token and decremented with fence.Redis.Add, which
// refuses a stale token; otherwise read and written with plain HGET and
// HSET, so that only the lock keeps two buyers from selling the same last
// item. With --unsafe it lives in memory. stock mirrors the store's values
// as last seen, to know when the sale has sold out.
type shop struct {
	mu       sync.Mutex // makes each step atomic, not the read-modify-write
	stock    []int      // per segment
	sold     int
	refused  int // stale writes (or reads) the fenced stock refused
	lastSale time.Time
	db       redis.UniversalClient // nil: in memory
	fenced   *fence.Redis          // nil: plain reads and writes
}

// newShop splits stock into segments as evenly as it goes, in db when not
// nil.
func newShop(ctx context.Context, stock, segments int, db redis.UniversalClient, fenced bool) (*shop, error) {
	s := &shop{stock: make([]int, segments), db: db}
	if db != nil && fenced {
		s.fenced = fence.NewRedis(db)
	}
	for i := range s.stock {
		s.stock[i] = stock / segments
		if i < stock%segments {
			s.stock[i]++
		}
		if db != nil {
			// A fresh record: the stock and no fence yet.
			if err := db.Del(ctx, stockKey(i)).Err(); err != nil {
				return nil, err
			}
			if err := db.HSet(ctx, stockKey(i), "value", s.stock[i]).Err(); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func stockKey(seg int) string { return fmt.Sprintf("sale:item-1:stock:%d", seg) }

// read returns segment seg's stock, for the holder of token. stale is true
// when the fenced stock refused the token.
func (s *shop) read(ctx context.Context, seg int, token int64) (stock int, stale bool, err error) {
	var v string
	switch {
	case s.db == nil:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.stock[seg], false, nil
	case s.fenced != nil:
		v, _, err = s.fenced.Get(ctx, stockKey(seg), fence.Token(token))
		if errors.Is(err, fence.ErrStale) {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			return 0, true, nil
		}
	default:
		v, err = s.db.HGet(ctx, stockKey(seg), "value").Result()
	}
	if err != nil {
		return 0, false, err
	}
	stock, err = strconv.Atoi(v)
	return stock, false, err
}

// write sells one item of segment seg, which read found at stock, for the
// holder of token: the fenced stock decrements it (refused for a stale
// token, or at zero), the others write stock-1. It reports whether the
// item was sold.
func (s *shop) write(ctx context.Context, seg int, token int64, stock int) (bool, error) {
	switch {
	case s.fenced != nil:
		n, err := s.fenced.Add(ctx, stockKey(seg), fence.Token(token), -1, 0)
		switch {
		case errors.Is(err, fence.ErrStale):
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			return false, nil
		case errors.Is(err, fence.ErrBound):
			s.mu.Lock()
			s.stock[seg] = 0
			s.mu.Unlock()
			return false, nil
		case err != nil:
			return false, err
		}
		stock = int(n) + 1
	case s.db != nil:
		if err := s.db.HSet(ctx, stockKey(seg), "value", stock-1).Err(); err != nil {
			return false, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock[seg] = stock - 1
	s.sold++
	s.lastSale = time.Now()
	return true, nil
}

// left is the stock left over all segments, as last seen.
func (s *shop) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.stock {
		n += v
	}
	return n
}

// settle reads the store's stock into the mirror, at the end of a sale.
func (s *shop) settle(ctx context.Context) error {
	if s.db == nil {
		return nil
	}
	for i := range s.stock {
		v, err := s.db.HGet(ctx, stockKey(i), "value").Int()
		if err != nil {
			return fmt.Errorf("read the stock: %w", err)
		}
		s.mu.Lock()
		s.stock[i] = v
		s.mu.Unlock()
	}
	return nil
}

func demo(ctx context.Context, cfg demoConfig, out io.Writer) error {
	if cfg.unsafe {
		fmt.Fprintln(out, "With --unsafe the sale takes no lock: the demo starts, uses and waits for no node.")
		r, err := sale(ctx, cfg, cfg.segments, nil, nil, nil, out)
		if err != nil {
			return err
		}
		return r.report(ctx, cfg, out)
	}
	var (
		servers []demoNode
		real    = true
		err     error
	)
	if cfg.external == nil {
		servers, real, err = startDemoNodes(cfg.local, cfg.inProcess)
		if err != nil {
			return err
		}
	}
	defer func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}()
	switch {
	case cfg.external != nil:
		fmt.Fprintf(out, "Using the %d given node%s (no fault is injected into nodes the demo does not own):\n", len(cfg.external), plural(len(cfg.external)))
		for i, n := range cfg.external {
			fmt.Fprintf(out, "  node %d: %s\n", i, n)
		}
	case real:
		fmt.Fprintf(out, "Started %d local node%s: real redis-server processes.\n", cfg.local, plural(cfg.local))
	default:
		fmt.Fprintf(out, "Started %d local node%s: in-process Redis-compatible servers (miniredis), since\n"+
			"redis-server is not installed (or --in-process was given). They cannot run the\n"+
			"restart guard (no INFO) or be frozen: the guard is off, no node is frozen, and\n"+
			"nodes get %v to answer (they run Lua slowly).\n", cfg.local, plural(cfg.local), inProcessTimeout(cfg.ttl))
	}
	for i, s := range servers {
		fmt.Fprintf(out, "  node %d: %s\n", i, s.Describe())
	}

	// The stock lives on the first node, which no fault touches.
	var db redis.UniversalClient
	if cfg.external != nil {
		conns := openAll(cfg.external[:1], cfg.timeout)
		defer closeAll(conns)
		db = clients(conns)[0]
	} else {
		rc := servers[0].Client()
		defer rc.Close()
		db = rc
	}

	// Each instance has its own Redis connections and lock client, as
	// separate services would.
	instances := make([]*redlock.Client, cfg.instances)
	counts := &countHook{}
	for i := range instances {
		if cfg.external != nil {
			conns := openAll(cfg.external, cfg.timeout)
			defer closeAll(conns)
			c, err := redlock.New(clients(conns), append(slices.Clone(cfg.extOpts), redlock.WithHook(counts))...)
			if err != nil {
				return err
			}
			defer c.Close()
			instances[i] = c
			continue
		}
		nodes := make([]redis.UniversalClient, len(servers))
		for j, s := range servers {
			rc := s.Client()
			defer rc.Close()
			nodes[j] = rc
		}
		// The restart guard is on unless the flags or in-process nodes say
		// otherwise (ownGuard).
		opts := []redlock.Option{redlock.WithMaxTTL(cfg.maxTTL), redlock.WithHook(counts)}
		if !cfg.guard {
			opts = append(opts, redlock.WithRestartGuard(redlock.GuardOff))
		}
		if !real {
			opts = append(opts, redlock.WithNodeTimeout(inProcessTimeout(cfg.ttl)))
		}
		c, err := redlock.New(nodes, opts...)
		if err != nil {
			return err
		}
		defer c.Close()
		instances[i] = c
	}

	// The nodes were just started: the guard keeps them out of locking
	// until every lock they could have forgotten has expired.
	switch {
	case cfg.external != nil:
	case cfg.guard:
		fmt.Fprintf(out, "\nThe nodes just started, so the restart guard keeps them out of locking for\nthe longest TTL (%v): no lock they might have forgotten can still be valid.\n", cfg.maxTTL)
	case real:
		fmt.Fprintln(out, "\nThe restart guard is off (--restart-guard=off): the fresh nodes vote at once.")
	}
	wctx, cancel := context.WithTimeout(ctx, 3*max(cfg.ttl, cfg.maxTTL)+10*time.Second)
	warm, err := instances[0].Obtain(wctx, "sale:warm-up", cfg.ttl)
	cancel()
	if err != nil {
		return fmt.Errorf("nodes did not leave their recovery window: %w", err)
	}
	_ = warm.Release(ctx)
	fmt.Fprintln(out, "Nodes ready.")

	if !cfg.compare {
		r, err := sale(ctx, cfg, cfg.segments, instances, servers, db, out)
		if err != nil {
			return err
		}
		return r.report(ctx, cfg, out)
	}
	return compare(ctx, cfg, instances, servers, db, counts, out)
}

// report prints what one sale measured, and returns its verdict.
func (r saleResult) report(ctx context.Context, cfg demoConfig, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nsold\t%d of %d\n", r.sold, cfg.stock)
	fmt.Fprintf(tw, "oversold\t%d\n", r.oversold)
	fmt.Fprintf(tw, "stock left\t%d\n", r.left)
	fmt.Fprintf(tw, "sold out\t%d buyers found no stock\n", r.soldOut)
	fmt.Fprintf(tw, "failed\t%d buyers did not obtain the lock within %v\n", r.failed, cfg.wait)
	switch {
	case cfg.unsafe:
	case cfg.fenced:
		fmt.Fprintf(tw, "stale refused\t%d stale writes refused by the fenced stock\n", r.refused)
	default:
		fmt.Fprintf(tw, "stale refused\tnot checked (--fence=false)\n")
	}
	fmt.Fprintf(tw, "duration\t%v\n", r.elapsed.Round(time.Millisecond))
	if len(r.lat) > 0 {
		fmt.Fprintf(tw, "acquire latency\tp50 %v  p99 %v  max %v\n",
			pct(r.lat, 0.50), pct(r.lat, 0.99), r.lat[len(r.lat)-1].Round(time.Microsecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case cfg.unsafe && r.oversold > 0:
		fmt.Fprintf(out, "\nWithout the lock, buyers sold %d items that were already sold.\n", r.oversold)
	case cfg.stall && !cfg.fenced && r.oversold > 0:
		fmt.Fprintf(out, "\nWithout the fence, the stalled buyer's stale write was accepted: %d items sold twice.\n", r.oversold)
	case cfg.stall && cfg.fenced && r.refused > 0:
		fmt.Fprintln(out, "\nThe fence refused the stalled buyer's stale write: nothing was sold twice.")
	}
	return r.verdict(ctx, cfg, "the sale")
}

// compare runs the same sale with one lock and with segments, on the same
// nodes and instances, one after the other, and prints both side by side.
func compare(ctx context.Context, cfg demoConfig, instances []*redlock.Client, servers []demoNode, db redis.UniversalClient, hook *countHook, out io.Writer) error {
	var stats []*redis.Client // the lock nodes, for INFO (none when not the demo's own)
	for _, s := range servers {
		rc := s.Client()
		defer rc.Close()
		stats = append(stats, rc)
	}
	counted := func(segments int) (saleResult, *saleCounts, error) {
		c := new(saleCounts)
		calls0, usec0, cpu0, ok0 := nodeStats(ctx, stats)
		hook.cur.Store(c)
		r, err := sale(ctx, cfg, segments, instances, servers, db, out)
		hook.cur.Store(nil)
		calls1, usec1, cpu1, ok1 := nodeStats(ctx, stats)
		if ok0 && ok1 && len(stats) > 0 {
			c.haveNodes = true
			c.nodeCmds, c.nodeUsec, c.nodeCPUus = calls1-calls0, usec1-usec0, cpu1-cpu0
		}
		return r, c, err
	}
	one, oneCounts, err := counted(1)
	if err != nil {
		return err
	}
	seg, segCounts, err := counted(cfg.segments)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\n\tone lock\t%d segments\n", cfg.segments)
	row := func(what string, f func(r saleResult) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", what, f(one), f(seg))
	}
	row("sold", func(r saleResult) string { return fmt.Sprintf("%d of %d", r.sold, cfg.stock) })
	row("oversold", func(r saleResult) string { return fmt.Sprint(r.oversold) })
	row("failed", func(r saleResult) string { return fmt.Sprintf("%d buyers", r.failed) })
	row("sold out after", func(r saleResult) string { return r.sellTime.Round(time.Millisecond).String() })
	row("throughput", func(r saleResult) string { return fmt.Sprintf("%.0f sales/s", r.throughput()) })
	row("acquire p50", func(r saleResult) string { return r.latency(0.50) })
	row("acquire p99", func(r saleResult) string { return r.latency(0.99) })
	row("acquire max", func(r saleResult) string { return r.latency(1) })
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printCounts(out, cfg.segments, oneCounts, segCounts, one.sold, seg.sold); err != nil {
		return err
	}
	if one.throughput() > 0 {
		fmt.Fprintf(out, "\n%d segments sold %.1f times as fast as one lock.\n", cfg.segments, seg.throughput()/one.throughput())
	}
	return errors.Join(one.verdict(ctx, cfg, "the sale with one lock"),
		seg.verdict(ctx, cfg, fmt.Sprintf("the sale with %d segments", cfg.segments)))
}

// verdict is nil when the sale did what it shows: under the lock, sold
// every item and not one more; without it (--unsafe), ran to its end,
// whatever it oversold or lost track of (concurrent read-modify-writes
// overwrite each other's sales: "stock left" can stay above 0 after more
// than the stock was sold). Otherwise it says what went wrong, and why.
func (r saleResult) verdict(ctx context.Context, cfg demoConfig, what string) error {
	switch {
	case ctx.Err() != nil && r.left > 0:
		return fmt.Errorf("%s was interrupted: sold %d of %d", what, r.sold, cfg.stock)
	case cfg.unsafe, cfg.stall && !cfg.fenced:
		return nil
	case r.oversold > 0:
		return fmt.Errorf("%s oversold %d items under the lock", what, r.oversold)
	case r.left > 0 && r.failed > 0:
		return fmt.Errorf("%s did not sell out: sold %d of %d, %d buyers did not obtain the lock within --wait %v",
			what, r.sold, cfg.stock, r.failed, cfg.wait)
	case r.left > 0:
		return fmt.Errorf("%s did not sell out: sold %d of %d, %d items left", what, r.sold, cfg.stock, r.left)
	}
	return nil
}

// errSoldOut closes a sale: its last item is sold.
var errSoldOut = errors.New("sold out")

// saleResult is what one run of the sale measured.
type saleResult struct {
	sold, oversold, left int
	soldOut, failed      int64
	refused              int             // stale writes the fenced stock refused
	elapsed              time.Duration   // until every buyer was done
	sellTime             time.Duration   // until the last sale
	lat                  []time.Duration // every obtain that succeeded, sorted
}

// throughput is sales per second until the last sale.
func (r saleResult) throughput() float64 {
	if r.sellTime <= 0 {
		return 0
	}
	return float64(r.sold) / r.sellTime.Seconds()
}

// latency is the q-quantile of the acquire latencies, or "-".
func (r saleResult) latency(q float64) string {
	if len(r.lat) == 0 {
		return "-"
	}
	return pct(r.lat, q).String()
}

// sale runs one flash sale: cfg.buyers buyers on the instances race for
// cfg.stock items, split into segments segments, each segment under its own
// lock (one lock for the whole stock when segments is 1). Buyers of a
// segmented sale take any segment that may still have stock (Client.Any) and
// try another when theirs has run dry. Faults are injected as cfg says,
// into servers.
func sale(ctx context.Context, cfg demoConfig, segments int, instances []*redlock.Client, servers []demoNode, db redis.UniversalClient, out io.Writer) (saleResult, error) {
	var (
		names = make([]string, segments)
		index = make(map[string]int, segments)
	)
	for i := range names {
		names[i] = fmt.Sprintf("sale:item-1:segment-%d", i)
		index[names[i]] = i
	}
	mode := "each purchase under the lock \"sale:item-1\""
	switch {
	case cfg.unsafe:
		mode = "WITHOUT a lock (--unsafe)"
	case segments > 1:
		mode = fmt.Sprintf("the stock in %d segments, each purchase under its segment's lock (\"sale:item-1:segment-N\", Client.Any)", segments)
	}
	ttl := fmt.Sprintf(" (TTL %v)", cfg.ttl)
	if cfg.unsafe {
		ttl = ""
	}
	fmt.Fprintf(out, "\nFlash sale: %d items, %d buyers on %d service instances, %s%s.\n",
		cfg.stock, cfg.buyers, cfg.instances, mode, ttl)
	switch {
	case cfg.unsafe:
	case cfg.fenced:
		fmt.Fprintln(out, "The stock is a fenced counter (package fence): a write with a stale token is refused.")
	default:
		fmt.Fprintln(out, "The stock is read and written WITHOUT the fence (--fence=false).")
	}
	sh, err := newShop(ctx, cfg.stock, segments, db, cfg.fenced)
	if err != nil {
		return saleResult{}, fmt.Errorf("set up the stock: %w", err)
	}

	// The sale closes when the last item is sold: buyers still waiting for
	// a lock stop waiting, and find no stock.
	open, closeSale := context.WithCancelCause(ctx)
	defer closeSale(nil)
	var (
		soldOut  atomic.Int64
		failed   atomic.Int64
		faulted  atomic.Bool
		faultMsg = make(chan string, 1)
		stalled  atomic.Bool
		stallMsg = make(chan string, 1)
		storeErr = make(chan error, 1)
		latMu    sync.Mutex
		lat      []time.Duration
		liveMu   sync.Mutex
		live     = slices.Clone(names) // segments that may still have stock
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	injectFaults := func() {
		if !cfg.faults || !faulted.CompareAndSwap(false, true) {
			return
		}
		freeze := servers[len(servers)-2]
		msg := fmt.Sprintf("half the stock sold: killed node %d and froze node %d (SIGSTOP)", len(servers)-1, len(servers)-2)
		if !freeze.CanFreeze() {
			msg = fmt.Sprintf("half the stock sold: killed node %d (%s)", len(servers)-1, freeze.NoFreeze())
		}
		if err := servers[len(servers)-1].Kill(); err != nil {
			msg = fmt.Sprintf("could not kill node: %v", err)
		}
		if freeze.CanFreeze() {
			if err := freeze.Pause(); err != nil {
				msg = fmt.Sprintf("could not freeze node: %v", err)
			}
		}
		faultMsg <- msg
	}
	// buy makes one purchase from segment seg for the holder of token. It
	// reports whether it sold an item, and whether the segment has run dry;
	// neither when the fenced stock refused the token (or the store
	// failed: the sale then ends with its error).
	buy := func(seg int, token int64) (bought, dry bool) {
		stock, stale, err := sh.read(open, seg, token)
		if err != nil && open.Err() != nil {
			// The sale closed (sold out) while this buyer read: no
			// stock, not a failure of the store.
			return false, true
		}
		if err != nil {
			select {
			case storeErr <- err:
			default:
			}
			return false, false
		}
		if stale {
			return false, false
		}
		if stock <= 0 {
			return false, true
		}
		stall := cfg.stall && stalled.CompareAndSwap(false, true)
		if stall {
			// Past the lock's validity: another buyer obtains it and
			// sells meanwhile.
			time.Sleep(cfg.ttl + cfg.ttl/2)
		} else {
			time.Sleep(cfg.think) // the service thinks
		}
		// The write is not cut short by the end of the sale: a stalled
		// buyer that wakes up writes, whatever happened meanwhile.
		bought, err = sh.write(context.WithoutCancel(open), seg, token, stock)
		if stall {
			outcome := "accepted: it sold an item another buyer may have sold meanwhile"
			switch {
			case err != nil:
				outcome = "not done: " + err.Error()
			case !bought:
				outcome = "refused by the fenced stock (a newer token had read or written it)"
			}
			stallMsg <- fmt.Sprintf("a buyer (token %d) stalled for %v between reading the stock (%d) and writing it;\n  its lock expired meanwhile, and its write was %s", token, cfg.ttl+cfg.ttl/2, stock, outcome)
		}
		if err != nil {
			select {
			case storeErr <- err:
			default:
			}
			return false, false
		}
		if !bought {
			return false, false
		}
		left := sh.left()
		if left <= cfg.stock/2 {
			injectFaults()
		}
		if left <= 0 {
			closeSale(errSoldOut)
		}
		return true, false
	}
	liveNames := func() []string {
		liveMu.Lock()
		defer liveMu.Unlock()
		return slices.Clone(live)
	}
	dry := func(name string) {
		liveMu.Lock()
		defer liveMu.Unlock()
		live = slices.DeleteFunc(live, func(n string) bool { return n == name })
	}
	obtain := func(ctx context.Context, c *redlock.Client, names []string) (*redlock.Lock, error) {
		if segments == 1 {
			return c.Obtain(ctx, "sale:item-1", cfg.ttl)
		}
		return c.Any(names...).Obtain(ctx, cfg.ttl)
	}
	began := time.Now()
	for b := range cfg.buyers {
		var c *redlock.Client // none with --unsafe
		if len(instances) > 0 {
			c = instances[b%len(instances)]
		}
		wg.Go(func() {
			<-start
			if cfg.unsafe {
				if _, dry := buy(rand.IntN(segments), 0); dry {
					soldOut.Add(1)
				}
				return
			}
			wctx, cancel := context.WithTimeout(open, cfg.wait)
			defer cancel()
			for {
				names := liveNames()
				if len(names) == 0 {
					soldOut.Add(1)
					return
				}
				t0 := time.Now()
				lock, err := obtain(wctx, c, names)
				if err != nil {
					if context.Cause(wctx) == errSoldOut {
						soldOut.Add(1)
					} else {
						failed.Add(1)
					}
					return
				}
				latMu.Lock()
				lat = append(lat, time.Since(t0))
				latMu.Unlock()
				seg := index[lock.Name()]
				bought, ranDry := buy(seg, lock.Token())
				if ranDry {
					dry(lock.Name())
				}
				_ = lock.Release(ctx)
				if bought || !ranDry || segments == 1 {
					if ranDry {
						soldOut.Add(1)
					}
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	r := saleResult{elapsed: time.Since(began), soldOut: soldOut.Load(), failed: failed.Load(), lat: lat}
	if cfg.faults && faulted.Load() {
		fmt.Fprintf(out, "  %s\n", <-faultMsg)
		_ = servers[len(servers)-2].Resume()
	}
	if stalled.Load() {
		fmt.Fprintf(out, "  %s\n", <-stallMsg)
	}
	select {
	case err := <-storeErr:
		return saleResult{}, fmt.Errorf("the stock's store: %w", err)
	default:
	}
	if err := sh.settle(ctx); err != nil {
		return saleResult{}, err
	}
	r.sold, r.left, r.refused = sh.sold, sh.left(), sh.refused
	r.oversold = max(0, r.sold-cfg.stock)
	if r.sold > 0 {
		r.sellTime = sh.lastSale.Sub(began)
	}
	slices.Sort(r.lat)
	return r, nil
}

// pct is the q-quantile of sorted durations.
func pct(sorted []time.Duration, q float64) time.Duration {
	i := int(q * float64(len(sorted)-1))
	return sorted[i].Round(time.Microsecond)
}

// inProcessTimeout is the per-node timeout on in-process servers, which run
// Lua far slower than redis-server: the timeout derived from the TTL (50 ms
// for 1 s) is too short for them under hundreds of buyers. Half the TTL, at
// most a second, still leaves the lock validity to work in (a timeout at or
// above the validity is refused).
func inProcessTimeout(ttl time.Duration) time.Duration { return min(time.Second, ttl/2) }
