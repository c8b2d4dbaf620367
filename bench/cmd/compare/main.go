// Command compare measures this module's lock against go-redsync/redsync,
// bsm/redislock and redis/rueidis's rueidislock, and against a raw floor
// with no library, on the same local redis-server nodes.
//
//	go run ./cmd/compare -d 3s -passes 5 -out results
//
// Every contender on go-redis (floor, redlock, redsync, redislock) runs on
// two client configurations, each a row of its own: "/ctx" with
// ContextTimeoutEnabled and no go-redis retries, as docs/safety.md's
// checklist recommends (the retries as an option),
// and "/defaults" with go-redis's default options. rueidislock runs on its
// own rueidis client, on one node only.
//
// Cases run interleaved (every contender of a scenario once per pass, the
// order rotated between passes) and are reported as ratios to the raw floor
// on the same go-redis configuration in the same pass, because a shared
// machine drifts from minute to minute.
// It writes results.json, tables.md and the SVG charts to -out.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redisproc"
)

type config struct {
	d           time.Duration
	passes      int
	ttl         time.Duration
	nodeTimeout time.Duration
	frozenMax   time.Duration
	frozenMaxN  uint64
	readyMax    time.Duration
	only        *regexp.Regexp
	out         string
	log         io.Writer
}

func main() { os.Exit(mainCode()) }

func mainCode() int {
	var (
		cfg        config
		only       string
		cpuprofile string
		memprofile string
		replot     string
	)
	flag.DurationVar(&cfg.d, "d", 3*time.Second, "duration of each case")
	flag.IntVar(&cfg.passes, "passes", 5, "interleaved passes over the contenders of each scenario")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "lock TTL (redsync keeps its default expiry, 8 s)")
	flag.DurationVar(&cfg.nodeTimeout, "floor-node-timeout", time.Second, "per-node timeout of the raw fan-out: long, so that the floor does not fail under load")
	flag.DurationVar(&errorPause, "error-pause", errorPause, "pause after a failed attempt in uncontended cases")
	flag.DurationVar(&cfg.frozenMax, "frozen-max", 40*time.Second, "bound of a contender's run with a frozen node")
	flag.Uint64Var(&cfg.frozenMaxN, "frozen-max-cycles", 2, "bound on the cycles of a contender whose cycle takes seconds with a frozen node (redsync)")
	flag.DurationVar(&cfg.readyMax, "ready-max", 2*time.Minute, "how long to wait for new nodes to be accepted by redlock's restart guard")
	flag.BoolVar(&noPipelineRow, "nopipe-row", false, "add a row of redlock on go-redis's defaults with the driver's auto-pipelining off (redlock-nopipe/defaults): an A/B of auto-pipelining, in no target")
	flag.StringVar(&only, "only", "", "run only the cases whose scenario/contender matches this regexp")
	flag.StringVar(&cfg.out, "out", ".", "directory for results.json, tables.md and the charts")
	flag.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&memprofile, "memprofile", "", "write an allocation profile (every allocation sampled) to this file")
	flag.StringVar(&replot, "replot", "", "measure nothing: rewrite tables.md and the charts in -out from this results.json")
	flag.Parse()
	re, err := regexp.Compile(only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare: -only:", err)
		return 2
	}
	cfg.only = re
	cfg.log = os.Stderr
	if replot != "" {
		if err := replotFrom(replot, cfg.out); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			return 1
		}
		return 0
	}

	// A closed pipe on stdout or stderr (| head) must not kill the process
	// before it has stopped its servers.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			return 2
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if memprofile != "" {
		runtime.MemProfileRate = 1
		defer func() {
			f, err := os.Create(memprofile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "compare:", err)
			}
		}()
	}
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, cfg config) error {
	servers, err := redisproc.StartServers(5, redisproc.Options{})
	if err != nil {
		return err
	}
	defer redisproc.StopAll(servers)
	addrs := redisproc.Addrs(servers)
	for _, s := range servers {
		serverPids = append(serverPids, s.Pid())
	}

	sets := map[int][]*contender{}
	var all []*redis.Client
	defer func() {
		for _, set := range sets {
			for _, c := range set {
				c.close()
			}
		}
		closeClients(all)
	}()
	for _, n := range []int{1, 5} {
		set, err := newSet(addrs[:n], cfg.ttl, cfg.nodeTimeout, &all)
		sets[n] = set
		if err != nil {
			return err
		}
	}

	b := &bench{cfg: cfg, ctx: ctx, redis: redisVersion(ctx, addrs[0]), loadStart: loadAverage()}
	b.logf("Go %s, %d CPUs, Redis %s, load average %s", runtime.Version(), runtime.NumCPU(), b.redis, b.loadStart)
	for _, n := range []int{1, 5} {
		for _, c := range sets[n] {
			b.logf("n=%d %-18s %s", n, c.name, c.config)
		}
	}
	if b.wantRedlock() {
		if err := b.waitNodes(addrs); err != nil {
			return err
		}
	}
	for _, sc := range scenarios {
		if ctx.Err() != nil {
			break
		}
		b.scenario(sc, sets[sc.nodes])
	}
	if ctx.Err() == nil {
		b.frozen(sets[5], servers[4])
	}
	if err := b.write(); err != nil {
		return err
	}
	return ctx.Err()
}

// newSet returns the contenders on the nodes at addrs, and appends the
// go-redis clients it made to *all; on an error, the contenders made so far.
// Each contender has its own clients, so that one's connection pools and
// subscriptions do not serve another. Every contender on go-redis runs on
// each configuration of confs, as a row of its own; redlock also runs on a
// rueidis client (its rueidis driver), and so does the floor on one node;
// redislock and rueidislock run on one node only. redlockOpts are for tests.
func newSet(addrs []string, ttl, nodeTimeout time.Duration, all *[]*redis.Client, redlockOpts ...redlock.Option) ([]*contender, error) {
	var set []*contender
	for _, cf := range confs {
		clients := func() []*redis.Client {
			cs := newClients(addrs, cf)
			*all = append(*all, cs...)
			return cs
		}
		set = append(set, newFloor(clients(), cf, ttl, nodeTimeout))
		rl, err := newRedlock(clients(), cf, ttl, redlockOpts...)
		if err != nil {
			return set, err
		}
		set = append(set, rl, newRedsync(clients(), cf))
		if noPipelineRow && cf == confDefaults {
			np, err := newRedlockNoPipeline(clients(), ttl, redlockOpts...)
			if err != nil {
				return set, err
			}
			set = append(set, np)
		}
		if len(addrs) == 1 {
			set = append(set, newRedislock(clients()[0], cf, ttl))
		}
	}
	if len(addrs) == 1 {
		fl, err := newFloorRueidis(addrs[0], ttl)
		if err != nil {
			return set, err
		}
		set = append(set, fl)
	}
	rr, err := newRedlockRueidis(addrs, ttl, redlockOpts...)
	if err != nil {
		return set, err
	}
	set = append(set, rr)
	if len(addrs) == 1 {
		rl, err := newRueidislock(addrs[0], ttl)
		if err != nil {
			return set, err
		}
		set = append(set, rl)
	}
	return set, nil
}

func (b *bench) wantRedlock() bool {
	for _, cf := range append(slices.Clone(confs), confRueidis) {
		name := rowName("redlock", cf)
		for _, sc := range scenarios {
			if b.want(sc.name, name) {
				return true
			}
		}
		if b.want("healthy n=5", name) || b.want("frozen 1 of 5", name) {
			return true
		}
	}
	return false
}

// waitNodes waits until redlock takes a lock on each node alone. With a
// restart guard, a node takes part in locking only once it has been up for
// the longest TTL of the deployment (a minute by default), as a long-running
// production node has.
func (b *bench) waitNodes(addrs []string) error {
	start := time.Now()
	for _, a := range addrs {
		cs := newClients([]string{a}, confCtx)
		c, err := newRedlock(cs, confCtx, b.cfg.ttl)
		if err != nil {
			return err
		}
		w := c.newWorker("bench:ready")
		for {
			err = w.TryLock(b.ctx)
			if err == nil {
				err = w.Unlock(b.ctx)
			}
			if err == nil || b.ctx.Err() != nil || time.Since(start) > b.cfg.readyMax {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		c.close()
		closeClients(cs)
		if err != nil {
			return fmt.Errorf("node %s not ready for redlock after %v: %w", a, time.Since(start).Round(time.Second), err)
		}
	}
	if d := time.Since(start); d > time.Second {
		b.logf("waited %v for the nodes to be accepted by redlock (restart guard)", d.Round(time.Second))
	}
	return nil
}

type kind int

const (
	serial kind = iota
	parallel
	contended
)

type scenario struct {
	name       string
	nodes      int
	kind       kind
	goroutines int
}

var scenarios = []scenario{
	{"serial n=1", 1, serial, 1},
	{"serial n=5", 5, serial, 1},
	{"parallel64 n=1", 1, parallel, 64},
	{"parallel64 n=5", 5, parallel, 64},
	{"contended8 n=1", 1, contended, 8},
	{"contended64 n=1", 1, contended, 64},
	{"contended8 n=5", 5, contended, 8},
	{"contended64 n=5", 5, contended, 64},
}

type bench struct {
	cfg     config
	ctx     context.Context
	results []result
	// redis is the nodes' redis_version, and loadStart the load average
	// when the run began.
	redis, loadStart string
}

func (b *bench) want(scenario, contender string) bool {
	return b.cfg.only.MatchString(scenario + "/" + contender)
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.cfg.log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (b *bench) add(r result) {
	b.results = append(b.results, r)
	extra := ""
	if r.Handovers > 0 || r.MinShare > 0 {
		extra = fmt.Sprintf(" handovers/s=%.0f min-share=%.2f", float64(r.Handovers)/r.Seconds, r.MinShare)
	}
	b.logf("%-16s %-18s pass %d: %9.0f/s p50 %8.1fµs p99 %9.1fµs allocs %6.1f cpu %6.1fµs server %6.1fµs errors %d%s",
		r.Scenario, r.Contender, r.Pass, r.rate(), r.P50us, r.P99us, r.Allocs, r.CPUus, r.SrvCPUus, r.Errors, extra)
	if r.FirstErr != "" {
		b.logf("  first error: %s", r.FirstErr)
	}
}

func keyOf(contender, scenario string, pass, g int) string {
	return fmt.Sprintf("bench:%s:%s:p%d:g%d", contender, scenario, pass, g)
}

func workers(c *contender, key func(g int) string, n int) []worker {
	ws := make([]worker, n)
	for g := range ws {
		ws[g] = c.newWorker(key(g))
	}
	return ws
}

// rotate returns set with its first pass%len elements moved to the end.
func rotate(set []*contender, pass int) []*contender {
	k := pass % len(set)
	return append(append([]*contender(nil), set[k:]...), set[:k]...)
}

func (b *bench) scenario(sc scenario, set []*contender) {
	warm := min(b.cfg.d/10, 300*time.Millisecond)
	for pass := range b.cfg.passes {
		for _, c := range rotate(set, pass) {
			if b.ctx.Err() != nil || !b.want(sc.name, c.name) {
				continue
			}
			key := func(g int) string { return keyOf(c.name, sc.name, pass, g) }
			warmKey := func(g int) string { return keyOf(c.name, sc.name+":warm", pass, g) }
			var r result
			switch {
			case sc.kind == serial || (sc.kind == contended && c.lib == "floor"):
				// The floor of a contended scenario is the serial
				// cycle on the same nodes: one holder at a time is
				// the most a contended lock can hand out.
				runCycles(workers(c, warmKey, 1), limits{d: warm})
				r = runCycles(workers(c, key, 1), limits{d: b.cfg.d})
			case sc.kind == parallel:
				runCycles(workers(c, warmKey, sc.goroutines), limits{d: warm})
				r = runCycles(workers(c, key, sc.goroutines), limits{d: b.cfg.d})
			default:
				same := func(int) string { return key(0) }
				runCycles(workers(c, warmKey, 1), limits{d: warm})
				r = runContended(workers(c, same, sc.goroutines), b.cfg.d)
			}
			r.Scenario, r.Contender, r.Config, r.Pass = sc.name, c.name, c.config, pass
			b.add(r)
			settle()
		}
	}
}

// settle lets the background work of a case (late replies, clean-up)
// finish before the next case is measured.
func settle() { time.Sleep(100 * time.Millisecond) }

// frozen measures the serial 5-node cycle with one node frozen by SIGSTOP,
// each contender's right after its healthy cycle of the same pass. The node
// is frozen for one contender at a time and thawed and flushed after it:
// a frozen node's kernel keeps accepting connections until its accept
// queue is full, so a contender that met a node frozen for another before
// it would meet dial timeouts where the first met read timeouts. The order
// is rotated between passes. A contender whose frozen cycle takes seconds
// (redsync, on either configuration, waits for the frozen node) runs in
// the first pass only, for at most -frozen-max-cycles cycles.
func (b *bench) frozen(set []*contender, node *redisproc.Server) {
	const healthy, frozen = "healthy n=5", "frozen 1 of 5"
	for pass := range b.cfg.passes {
		var run []*contender
		for _, c := range rotate(set, pass) {
			if (c.lib != "redsync" || pass == 0) && (b.want(frozen, c.name) || b.want(healthy, c.name)) {
				run = append(run, c)
			}
		}
		if len(run) == 0 {
			return
		}
		for _, c := range run {
			if b.ctx.Err() != nil {
				return
			}
			key := func(g int) string { return keyOf(c.name, healthy, pass, g) }
			runCycles(workers(c, func(g int) string { return key(g) + ":warm" }, 1), limits{d: min(b.cfg.d/10, 300*time.Millisecond)})
			r := runCycles(workers(c, key, 1), limits{d: b.cfg.d})
			r.Scenario, r.Contender, r.Config, r.Pass = healthy, c.name, c.config, pass
			b.add(r)
			settle()

			if err := node.Pause(); err != nil {
				b.logf("freeze: %v", err)
				return
			}
			b.logf("froze node %s", node.Addr())
			lim := limits{d: b.cfg.d}
			if c.lib == "redsync" {
				lim = limits{d: b.cfg.frozenMax, max: b.cfg.frozenMaxN}
			}
			r = runCycles(workers(c, func(g int) string { return keyOf(c.name, frozen, pass, g) }, 1), lim)
			r.Scenario, r.Contender, r.Config, r.Pass = frozen, c.name, c.config, pass
			b.add(r)
			if err := b.thaw(node); err != nil {
				b.logf("thaw: %v", err)
				return
			}
		}
	}
}

// thaw resumes a frozen node, drops what the requests queued while it was
// frozen set when it woke up, and waits for the contenders' breakers to
// close again (redlock probes a skipped node after a second).
func (b *bench) thaw(node *redisproc.Server) error {
	if err := node.Resume(); err != nil {
		return err
	}
	b.logf("thawed node %s", node.Addr())
	cl := newClients([]string{node.Addr()}, confCtx)[0]
	fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := cl.FlushAll(fctx).Err(); err != nil {
		b.logf("flush %s: %v", node.Addr(), err)
	}
	cancel()
	_ = cl.Close()
	time.Sleep(1500 * time.Millisecond)
	return nil
}

type results struct {
	Go    string   `json:"go"`
	CPUs  int      `json:"cpus"`
	Args  []string `json:"args"`
	Redis string   `json:"redis,omitempty"`
	// LoadStart and LoadEnd are /proc/loadavg's 1, 5 and 15 minute load
	// averages when the run began and when it ended.
	LoadStart string   `json:"load_start,omitempty"`
	LoadEnd   string   `json:"load_end,omitempty"`
	Results   []result `json:"results"`
}

// header is the run's facts, printed above its tables.
func (rs results) header() string {
	unknown := func(s string) string {
		if s == "" {
			return "not recorded"
		}
		return s
	}
	return fmt.Sprintf("Run: %s, %d CPUs, Redis %s, arguments `%s`; load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		rs.Go, rs.CPUs, unknown(rs.Redis), strings.Join(rs.Args, " "), unknown(rs.LoadStart), unknown(rs.LoadEnd))
}

// loadAverage is /proc/loadavg's first three fields, "" where there is
// none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return ""
}

// redisVersion is the redis_version of the node at addr, "" if it does
// not say.
func redisVersion(ctx context.Context, addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func replotFrom(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rs results
	if err := json.Unmarshal(b, &rs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i := range rs.Results {
		rs.Results[i].Contender = legacyName(rs.Results[i].Contender)
	}
	return writeReport(rs, out)
}

func writeReport(rs results, out string) error {
	s := summarize(rs.Results)
	md := rs.header() + s.markdown()
	fmt.Print(md)
	if err := os.WriteFile(filepath.Join(out, "tables.md"), []byte(md), 0o644); err != nil {
		return err
	}
	return s.charts(out)
}

func (b *bench) write() error {
	if len(b.results) == 0 {
		return errors.New("no case ran")
	}
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	rs := results{Go: runtime.Version(), CPUs: runtime.NumCPU(), Args: os.Args[1:], Redis: b.redis,
		LoadStart: b.loadStart, LoadEnd: loadAverage(), Results: b.results}
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.cfg.out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return writeReport(rs, b.cfg.out)
}
