package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
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
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg demoConfig
	fs := newFlagSet("demo", stderr)
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
	help := helpText{
		usage: "demo [flags]",
		about: `A flash sale: buyers on several service instances race for limited stock,
each purchase a read-modify-write under one distributed lock.`,
	}
	if code, ok := parseFlags(fs, help, args, stdout, stderr); !ok {
		return code
	}
	if nf.given() {
		specs, _, err := nf.resolve()
		if err != nil {
			fmt.Fprintf(stderr, "redlock demo: %v\n", err)
			return exitUsage
		}
		opts, err := gf.options()
		if err != nil {
			fmt.Fprintf(stderr, "redlock demo: %v\n", err)
			return exitUsage
		}
		if err := gf.checkTTL(cfg.ttl); err != nil {
			fmt.Fprintf(stderr, "redlock demo: %v\n", err)
			return exitUsage
		}
		// The demo does not own these nodes: it injects no fault.
		cfg.external, cfg.extOpts, cfg.timeout, cfg.faults = specs, opts, nf.timeout, false
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "redlock demo: %v\n", err)
		return exitUsage
	}
	if err := demo(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "redlock demo: %v\n", err)
		return exitError
	}
	return exitOK
}

func (c demoConfig) validate() error {
	switch {
	case c.external == nil && c.local < 1:
		return fmt.Errorf("--local %d: need at least one node", c.local)
	case c.stock < 1:
		return fmt.Errorf("--stock %d: need at least one item", c.stock)
	case c.buyers < 1:
		return fmt.Errorf("--buyers %d: need at least one buyer", c.buyers)
	case c.instances < 1:
		return fmt.Errorf("--instances %d: need at least one instance", c.instances)
	case c.ttl < redlock.MinTTL:
		return fmt.Errorf("--ttl %v: below the minimum %v", c.ttl, redlock.MinTTL)
	case c.wait <= 0:
		return fmt.Errorf("--wait %v: must be positive", c.wait)
	case c.faults && c.external == nil && c.local < 3:
		return fmt.Errorf("--faults needs at least 3 nodes (one killed and one frozen must leave a quorum); use --faults=false")
	}
	return nil
}

// shop is the shared resource: stock read and written in two steps, as a
// service would with a database row. Only the lock keeps two buyers from
// selling the same last item.
type shop struct {
	mu    sync.Mutex // makes each step atomic, not the read-modify-write
	stock int
	sold  int
}

func (s *shop) read() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock
}

func (s *shop) write(stock int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock = stock
	s.sold++
}

func demo(ctx context.Context, cfg demoConfig, out io.Writer) error {
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
		fmt.Fprintf(out, "Using the %d given nodes (no fault is injected into nodes the demo does not own):\n", len(cfg.external))
		for i, n := range cfg.external {
			fmt.Fprintf(out, "  node %d: %s\n", i, n)
		}
	case real:
		fmt.Fprintf(out, "Started %d local nodes: real redis-server processes.\n", cfg.local)
	default:
		fmt.Fprintf(out, "Started %d local nodes: in-process Redis-compatible servers (miniredis), since\n"+
			"redis-server is not installed (or --in-process was given). They cannot run the\n"+
			"restart guard (no INFO) or be frozen: the guard is off, no node is frozen, and\n"+
			"nodes get %v to answer (they run Lua slowly).\n", cfg.local, inProcessTimeout(cfg.ttl))
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
		// The restart guard is on, as in production, with the demo's TTL as
		// the deployment's longest.
		opts := []redlock.Option{redlock.WithMaxTTL(cfg.ttl)}
		if !real {
			opts = append(opts, redlock.WithoutRestartGuard(), redlock.WithNodeTimeout(inProcessTimeout(cfg.ttl)))
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
	if real && cfg.external == nil {
		fmt.Fprintf(out, "\nThe nodes just started, so the restart guard keeps them out of locking for\nthe longest TTL (%v): no lock they might have forgotten can still be valid.\n", cfg.ttl)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*cfg.ttl+10*time.Second)
	warm, err := instances[0].Obtain(wctx, "sale:warm-up", cfg.ttl)
	cancel()
	if err != nil {
		return fmt.Errorf("nodes did not leave their recovery window: %w", err)
	}
	_ = warm.Release(ctx)
	fmt.Fprintln(out, "Nodes ready.")

	mode := "each purchase under the lock \"sale:item-1\""
	if cfg.unsafe {
		mode = "WITHOUT a lock (--unsafe)"
	}
	fmt.Fprintf(out, "\nFlash sale: %d items, %d buyers on %d service instances, %s (TTL %v).\n",
		cfg.stock, cfg.buyers, cfg.instances, mode, cfg.ttl)

	var (
		sh       = &shop{stock: cfg.stock}
		soldOut  atomic.Int64
		failed   atomic.Int64
		faulted  atomic.Bool
		faultMsg = make(chan string, 1)
		latMu    sync.Mutex
		lat      []time.Duration
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
	buy := func() {
		stock := sh.read()
		if stock <= 0 {
			soldOut.Add(1)
			return
		}
		time.Sleep(200 * time.Microsecond) // the service thinks
		sh.write(stock - 1)
		if sh.read() <= cfg.stock/2 {
			injectFaults()
		}
	}
	began := time.Now()
	for b := range cfg.buyers {
		c := instances[b%len(instances)]
		wg.Go(func() {
			<-start
			if cfg.unsafe {
				buy()
				return
			}
			wctx, cancel := context.WithTimeout(ctx, cfg.wait)
			defer cancel()
			t0 := time.Now()
			lock, err := c.Obtain(wctx, "sale:item-1", cfg.ttl)
			if err != nil {
				failed.Add(1)
				return
			}
			latMu.Lock()
			lat = append(lat, time.Since(t0))
			latMu.Unlock()
			buy()
			_ = lock.Release(ctx)
		})
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	if cfg.faults && faulted.Load() {
		fmt.Fprintf(out, "  %s\n", <-faultMsg)
		_ = servers[len(servers)-2].Resume()
	}

	sold := sh.sold
	oversold := max(0, sold-cfg.stock)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nsold\t%d of %d\n", sold, cfg.stock)
	fmt.Fprintf(tw, "oversold\t%d\n", oversold)
	fmt.Fprintf(tw, "stock left\t%d\n", sh.read())
	fmt.Fprintf(tw, "sold out\t%d buyers found no stock\n", soldOut.Load())
	fmt.Fprintf(tw, "failed\t%d buyers did not obtain the lock within %v\n", failed.Load(), cfg.wait)
	fmt.Fprintf(tw, "duration\t%v\n", elapsed.Round(time.Millisecond))
	if len(lat) > 0 {
		slices.Sort(lat)
		fmt.Fprintf(tw, "acquire latency\tp50 %v  p99 %v  max %v\n",
			pct(lat, 0.50), pct(lat, 0.99), lat[len(lat)-1].Round(time.Microsecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !cfg.unsafe && oversold > 0 {
		return fmt.Errorf("oversold %d items under the lock", oversold)
	}
	return nil
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
