package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
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
and latency side by side. Each run ends when every buyer has bought, found
no stock, or waited --wait; buyers still waiting when the last item is sold
stop waiting and find no stock.

On the demo's own nodes (without --nodes), --max-ttl is --ttl unless given,
so that the restart guard keeps the fresh nodes out for one TTL;
--restart-guard is on or off (the nodes do not persist their writes, so
persistent does not apply), and off on in-process nodes, which cannot run
it. --unsafe takes no lock: it starts and waits for no node.

Exit status: 0 when every sale sold out without overselling; 1 when one did
not sell out (buyers waited --wait in vain) or oversold, with the reason on
stderr. With --unsafe, overselling, and stock the shop lost track of, are
what the run shows, not failures: it exits 0 when the sale ran to its end.`,
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
	case c.faults && c.external == nil && c.local < c.faultNodes():
		return fmt.Errorf("--local %d: --faults needs at least %d nodes, so that the nodes it kills or freezes leave a quorum; use --local %d or --faults=false",
			c.local, c.faultNodes(), c.faultNodes())
	}
	return nil
}

// shop is the shared resource: stock read and written in two steps, as a
// service would with a database row per segment (one segment when the sale
// has one lock). Only the lock keeps two buyers from selling the same last
// item of a segment.
type shop struct {
	mu       sync.Mutex // makes each step atomic, not the read-modify-write
	stock    []int      // per segment
	sold     int
	lastSale time.Time
}

// newShop splits stock into segments as evenly as it goes.
func newShop(stock, segments int) *shop {
	s := &shop{stock: make([]int, segments)}
	for i := range s.stock {
		s.stock[i] = stock / segments
		if i < stock%segments {
			s.stock[i]++
		}
	}
	return s
}

func (s *shop) read(seg int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock[seg]
}

func (s *shop) write(seg, stock int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock[seg] = stock
	s.sold++
	s.lastSale = time.Now()
}

// left is the stock left over all segments.
func (s *shop) left() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.stock {
		n += v
	}
	return n
}

func demo(ctx context.Context, cfg demoConfig, out io.Writer) error {
	if cfg.unsafe {
		fmt.Fprintln(out, "With --unsafe the sale takes no lock: the demo starts, uses and waits for no node.")
		r, err := sale(ctx, cfg, cfg.segments, nil, nil, out)
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

	// Each instance has its own Redis connections and lock client, as
	// separate services would.
	instances := make([]*redlock.Client, cfg.instances)
	for i := range instances {
		if cfg.external != nil {
			conns := openAll(cfg.external, cfg.timeout)
			defer closeAll(conns)
			c, err := redlock.New(clients(conns), cfg.extOpts...)
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
		opts := []redlock.Option{redlock.WithMaxTTL(cfg.maxTTL)}
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
		r, err := sale(ctx, cfg, cfg.segments, instances, servers, out)
		if err != nil {
			return err
		}
		return r.report(ctx, cfg, out)
	}
	return compare(ctx, cfg, instances, servers, out)
}

// report prints what one sale measured, and returns its verdict.
func (r saleResult) report(ctx context.Context, cfg demoConfig, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nsold\t%d of %d\n", r.sold, cfg.stock)
	fmt.Fprintf(tw, "oversold\t%d\n", r.oversold)
	fmt.Fprintf(tw, "stock left\t%d\n", r.left)
	fmt.Fprintf(tw, "sold out\t%d buyers found no stock\n", r.soldOut)
	fmt.Fprintf(tw, "failed\t%d buyers did not obtain the lock within %v\n", r.failed, cfg.wait)
	fmt.Fprintf(tw, "duration\t%v\n", r.elapsed.Round(time.Millisecond))
	if len(r.lat) > 0 {
		fmt.Fprintf(tw, "acquire latency\tp50 %v  p99 %v  max %v\n",
			pct(r.lat, 0.50), pct(r.lat, 0.99), r.lat[len(r.lat)-1].Round(time.Microsecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cfg.unsafe && r.oversold > 0 {
		fmt.Fprintf(out, "\nWithout the lock, buyers sold %d items that were already sold.\n", r.oversold)
	}
	return r.verdict(ctx, cfg, "the sale")
}

// compare runs the same sale with one lock and with segments, on the same
// nodes and instances, one after the other, and prints both side by side.
func compare(ctx context.Context, cfg demoConfig, instances []*redlock.Client, servers []demoNode, out io.Writer) error {
	one, err := sale(ctx, cfg, 1, instances, servers, out)
	if err != nil {
		return err
	}
	seg, err := sale(ctx, cfg, cfg.segments, instances, servers, out)
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
	case cfg.unsafe:
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
func sale(ctx context.Context, cfg demoConfig, segments int, instances []*redlock.Client, servers []demoNode, out io.Writer) (saleResult, error) {
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

	// The sale closes when the last item is sold: buyers still waiting for
	// a lock stop waiting, and find no stock.
	open, closeSale := context.WithCancelCause(ctx)
	defer closeSale(nil)
	var (
		sh       = newShop(cfg.stock, segments)
		soldOut  atomic.Int64
		failed   atomic.Int64
		faulted  atomic.Bool
		faultMsg = make(chan string, 1)
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
	// buy makes one purchase from segment seg, and reports false when the
	// segment has run dry.
	buy := func(seg int) bool {
		stock := sh.read(seg)
		if stock <= 0 {
			return false
		}
		time.Sleep(cfg.think) // the service thinks
		sh.write(seg, stock-1)
		left := sh.left()
		if left <= cfg.stock/2 {
			injectFaults()
		}
		if left <= 0 {
			closeSale(errSoldOut)
		}
		return true
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
				if !buy(rand.IntN(segments)) {
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
				bought := buy(seg)
				if !bought {
					dry(lock.Name())
				}
				_ = lock.Release(ctx)
				if bought || segments == 1 {
					if !bought {
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
	r.sold, r.left = sh.sold, sh.left()
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
