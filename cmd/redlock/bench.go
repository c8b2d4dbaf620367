package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redisproc"
)

var benchHelp = helpText{
	usage: "bench [flags]",
	about: `Measures lock throughput and latency in three scenarios, each for --duration:
  uncontended  one worker obtains and releases its own lock, again and again
  parallel     --parallel workers, each on its own lock
  contended    --parallel workers compete for one lock
It prints a table of throughput and latency percentiles (a progress bar when
stdout is a terminal), or with --json one JSON object (latencies in
nanoseconds; null for a scenario that obtained no lock), and, with --svg,
writes a chart of acquire latency by percentile.

Without nodes (--nodes or REDLOCK_NODES) it starts --embedded local
redis-server processes, with the restart guard off unless --restart-guard
is given (fresh nodes would otherwise recover for --max-ttl first). Against
real nodes it writes keys under --prefix; run it on a test deployment.`,
}

// defaultBenchTTL is bench's --ttl unless --max-ttl is shorter.
const defaultBenchTTL = 10 * time.Second

type benchConfig struct {
	duration  time.Duration
	ttl       time.Duration
	parallel  int
	embedded  int
	svg       string
	scenarios string
	prefix    string
	json      bool
}

type scenario struct {
	name    string
	workers int
	shared  bool // every worker on one lock
}

type benchResult struct {
	scenario
	ops      int
	errors   int
	firstErr error
	elapsed  time.Duration
	acquire  []time.Duration // sorted
	release  []time.Duration // sorted
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newInvocation("bench", stdout, stderr)
	fs := cmd.fs
	var (
		cfg benchConfig
		nf  nodeFlags
		gf  guardFlags
	)
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each scenario runs")
	fs.DurationVar(&cfg.ttl, "ttl", defaultBenchTTL, ttlUsage("lock TTL", defaultBenchTTL))
	fs.IntVar(&cfg.parallel, "parallel", 16, "workers in the parallel and contended scenarios")
	fs.IntVar(&cfg.embedded, "embedded", 3, "local redis-server nodes to start when no nodes are given")
	fs.StringVar(&cfg.svg, "svg", "", "write a latency chart (SVG) to this file")
	fs.StringVar(&cfg.scenarios, "scenarios", "uncontended,parallel,contended", "scenarios to run, comma-separated")
	fs.StringVar(&cfg.prefix, "prefix", "redlock-bench:", "prefix of the benchmark's Redis keys")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON instead of a table")
	nf.register(fs)
	gf.register(fs)
	if code, ok := cmd.parse(benchHelp, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return cmd.fail(exitUsage, "unexpected argument %q", fs.Arg(0))
	}
	gf.fitTTL(fs, &cfg.ttl, defaultBenchTTL)
	scenarios, err := cfg.validate(&gf)
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	// The chart's file is created before the benchmark runs, so that a
	// path that cannot be written fails at once, not after every scenario.
	var chart *chartFile
	if cfg.svg != "" {
		if chart, err = createChart(cfg.svg); err != nil {
			return cmd.fail(exitUsage, "--svg %s: %v", cfg.svg, err)
		}
		defer chart.discard()
	}

	var (
		specs []*nodeSpec
		where string
	)
	if nf.given() {
		specs, _, err = nf.resolve()
		if err != nil {
			return cmd.fail(exitUsage, "%v", err)
		}
		where = fmt.Sprintf("%d node%s from %s", len(specs), plural(len(specs)), nf.source())
	} else {
		servers, err := startEmbedded(cfg.embedded)
		defer func() {
			for _, s := range servers {
				_ = s.Stop()
			}
		}()
		if err != nil {
			return cmd.fail(exitError, "start embedded nodes: %v", err)
		}
		urls := redisproc.Addrs(servers)
		for i, a := range urls {
			urls[i] = "redis://" + a
		}
		if specs, err = parseNodes(strings.Join(urls, ",")); err != nil {
			return cmd.fail(exitError, "%v", err)
		}
		where = fmt.Sprintf("%d embedded redis-server node%s", len(servers), plural(len(servers)))
		if !explicit["restart-guard"] {
			gf.mode = guardOff
			where += " (restart guard off: they are fresh)"
		}
	}
	opts, err := gf.options()
	if err != nil {
		return cmd.fail(exitUsage, "%v", err)
	}
	c, done, code := cmd.connect(ctx, specs, nil, nf.timeout, append(opts, redlock.WithPrefix(cfg.prefix)))
	if c == nil {
		return code
	}
	defer done()

	if !cfg.json {
		say(cmd.stdout, "bench", "%s, TTL %v, %v per scenario", where, cfg.ttl, cfg.duration)
	}
	runID := randomID()
	tty := isTerminal(stdout) && !cfg.json
	var results []benchResult
	for _, sc := range scenarios {
		var bar *progressBar
		if tty {
			bar = startProgress(cmd.stdout, sc.name, cfg.duration)
		}
		r := runScenario(ctx, c, sc, cfg, runID, bar)
		bar.stop()
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	for i := range results {
		results[i].firstErr = explain(results[i].firstErr, cmd.labels)
	}
	if cfg.json {
		if !cmd.printJSON(benchReport(where, cfg, results, ctx.Err() != nil)) {
			return exitError
		}
	} else {
		printResults(cmd.stdout, results)
	}
	for _, r := range results {
		if r.firstErr != nil {
			cmd.say("%s: %d errors, the first: %v", r.name, r.errors, r.firstErr)
		}
	}
	if chart != nil {
		if err := chart.write(cfg, results); err != nil {
			return cmd.fail(exitError, "%v", err)
		}
		if !cfg.json {
			fmt.Fprintf(cmd.stdout, "latency chart written to %s\n", cfg.svg)
		}
	}
	if ctx.Err() != nil {
		return cmd.fail(exitError, "interrupted")
	}
	return exitOK
}

func (cfg *benchConfig) validate(gf *guardFlags) ([]scenario, error) {
	if err := positive("duration", cfg.duration); err != nil {
		return nil, err
	}
	if err := gf.checkTTL(cfg.ttl); err != nil {
		return nil, err
	}
	if cfg.parallel < 1 {
		return nil, usagef("--parallel %d: need at least one worker", cfg.parallel)
	}
	if cfg.embedded < 1 {
		return nil, usagef("--embedded %d: need at least one node", cfg.embedded)
	}
	var out []scenario
	for name := range strings.SplitSeq(cfg.scenarios, ",") {
		switch strings.TrimSpace(name) {
		case "uncontended":
			out = append(out, scenario{name: "uncontended", workers: 1})
		case "parallel":
			out = append(out, scenario{name: "parallel", workers: cfg.parallel})
		case "contended":
			out = append(out, scenario{name: "contended", workers: cfg.parallel, shared: true})
		default:
			return nil, usagef("--scenarios: unknown scenario %q (want uncontended, parallel, contended)", name)
		}
	}
	return out, nil
}

func startEmbedded(n int) ([]*redisproc.Server, error) {
	return redisproc.StartServers(n, redisproc.Options{})
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runScenario runs one scenario for cfg.duration: each worker obtains and
// releases its lock (or the shared one) until the time is up.
func runScenario(ctx context.Context, c *redlock.Client, sc scenario, cfg benchConfig, runID string, bar *progressBar) benchResult {
	sctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	type tally struct {
		ops, errors int
		firstErr    error
		acq, rel    []time.Duration
	}
	tallies := make([]tally, sc.workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range sc.workers {
		name := fmt.Sprintf("%s:%s:%d", runID, sc.name, w)
		if sc.shared {
			name = fmt.Sprintf("%s:%s", runID, sc.name)
		}
		wg.Go(func() {
			t := &tallies[w]
			for sctx.Err() == nil {
				t0 := time.Now()
				l, err := c.Obtain(sctx, name, cfg.ttl)
				if err != nil {
					if sctx.Err() == nil {
						t.errors++
						if t.firstErr == nil {
							t.firstErr = err
						}
					}
					continue
				}
				t1 := time.Now()
				rerr := l.Release(context.WithoutCancel(sctx))
				t.acq = append(t.acq, t1.Sub(t0))
				t.rel = append(t.rel, time.Since(t1))
				if rerr != nil {
					t.errors++
					if t.firstErr == nil {
						t.firstErr = rerr
					}
				}
				t.ops++
				bar.add()
			}
		})
	}
	wg.Wait()
	r := benchResult{scenario: sc, elapsed: time.Since(start)}
	for _, t := range tallies {
		r.ops += t.ops
		r.errors += t.errors
		if r.firstErr == nil {
			r.firstErr = t.firstErr
		}
		r.acquire = append(r.acquire, t.acq...)
		r.release = append(r.release, t.rel...)
	}
	slices.Sort(r.acquire)
	slices.Sort(r.release)
	return r
}

func printResults(w io.Writer, results []benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tworkers\tlocks\tlocks/s\tacquire p50\tp90\tp99\tmax\trelease p50\tp99\terrors\t")
	for _, r := range results {
		rate := float64(r.ops) / r.elapsed.Seconds()
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.name, r.workers, r.ops, rate,
			quantile(r.acquire, 0.50), quantile(r.acquire, 0.90), quantile(r.acquire, 0.99), quantile(r.acquire, 1),
			quantile(r.release, 0.50), quantile(r.release, 0.99), r.errors)
	}
	_ = tw.Flush()
}

// benchJSON is the report of bench --json.
type benchJSON struct {
	Nodes       string         `json:"nodes"` // which nodes, as the table's first line says
	TTLMs       int64          `json:"ttl_ms"`
	DurationMs  int64          `json:"duration_ms"` // per scenario
	Interrupted bool           `json:"interrupted"` // the run was cut short: later scenarios are missing
	Scenarios   []scenarioJSON `json:"scenarios"`
}

type scenarioJSON struct {
	Name           string       `json:"name"`
	Workers        int          `json:"workers"`
	Locks          int          `json:"locks"` // obtained and released
	ElapsedNs      int64        `json:"elapsed_ns"`
	LocksPerSecond float64      `json:"locks_per_second"`
	Acquire        *latencyJSON `json:"acquire_ns"` // null when no lock was obtained
	Release        *latencyJSON `json:"release_ns"`
	Errors         int          `json:"errors"`
	FirstError     string       `json:"first_error,omitempty"`
}

// latencyJSON are percentiles of latencies, in nanoseconds.
type latencyJSON struct {
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
}

func benchReport(where string, cfg benchConfig, results []benchResult, interrupted bool) benchJSON {
	rep := benchJSON{Nodes: where, TTLMs: cfg.ttl.Milliseconds(), DurationMs: cfg.duration.Milliseconds(),
		Interrupted: interrupted, Scenarios: []scenarioJSON{}}
	for _, r := range results {
		sc := scenarioJSON{
			Name: r.name, Workers: r.workers, Locks: r.ops, ElapsedNs: r.elapsed.Nanoseconds(),
			LocksPerSecond: float64(r.ops) / r.elapsed.Seconds(),
			Acquire:        latencies(r.acquire), Release: latencies(r.release), Errors: r.errors,
		}
		if r.firstErr != nil {
			sc.FirstError = r.firstErr.Error()
		}
		rep.Scenarios = append(rep.Scenarios, sc)
	}
	return rep
}

// latencies are the percentiles of sorted, or nil when it is empty.
func latencies(sorted []time.Duration) *latencyJSON {
	if len(sorted) == 0 {
		return nil
	}
	q := func(q float64) int64 { return sorted[int(q*float64(len(sorted)-1))].Nanoseconds() }
	return &latencyJSON{P50: q(0.50), P90: q(0.90), P99: q(0.99), Max: q(1)}
}

// quantile formats the q-quantile of sorted durations; "-" when empty.
func quantile(sorted []time.Duration, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	return pct(sorted, q).String()
}

// chartFile is the --svg chart being made: a temporary file beside path,
// renamed to path once written, so that a failed or interrupted benchmark
// leaves an older chart as it was.
type chartFile struct {
	path string
	f    *os.File
}

// createChart creates the temporary file of the chart for path. Its error
// says why the directory cannot take the file, without the temporary name.
func createChart(path string) (*chartFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, err
	}
	return &chartFile{path: path, f: f}, nil
}

// write writes the chart of the results and renames it to its path.
func (c *chartFile) write(cfg benchConfig, results []benchResult) error {
	var series []latencySeries
	for _, r := range results {
		if len(r.acquire) > 0 {
			series = append(series, latencySeries{name: fmt.Sprintf("%s (%d worker%s)", r.name, r.workers, plural(r.workers)), sorted: r.acquire})
		}
	}
	title := fmt.Sprintf("redlock acquire latency by percentile (TTL %v, %v per scenario)", cfg.ttl, cfg.duration)
	err := writeLatencySVG(c.f, title, series)
	if err == nil {
		err = c.f.Chmod(0o644)
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(c.f.Name(), c.path)
	}
	if err != nil {
		_ = os.Remove(c.f.Name())
		return fmt.Errorf("--svg %s: %w", c.path, err)
	}
	c.f = nil
	return nil
}

// discard removes the temporary file unless write renamed it.
func (c *chartFile) discard() {
	if c.f != nil {
		_ = c.f.Close()
		_ = os.Remove(c.f.Name())
	}
}

// progressBar redraws one line on a terminal every 100 ms until stopped.
// A nil *progressBar does nothing.
type progressBar struct {
	ops  atomic.Int64
	quit chan struct{}
	wg   sync.WaitGroup
}

func startProgress(w io.Writer, name string, total time.Duration) *progressBar {
	b := &progressBar{quit: make(chan struct{})}
	start := time.Now()
	draw := func() {
		const width = 30
		frac := min(float64(time.Since(start))/float64(total), 1)
		filled := int(frac * width)
		fmt.Fprintf(w, "\r%-12s [%s%s] %5.1fs %8d locks", name,
			strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
			time.Since(start).Seconds(), b.ops.Load())
	}
	b.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.quit:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
				draw()
			}
		}
	})
	return b
}

func (b *progressBar) add() {
	if b != nil {
		b.ops.Add(1)
	}
}

// stop clears the line and waits for the drawing goroutine.
func (b *progressBar) stop() {
	if b != nil {
		close(b.quit)
		b.wg.Wait()
	}
}
