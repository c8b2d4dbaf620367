// Command cron runs a job once per tick across a fleet: every instance
// runs this same schedule, and for each tick exactly one of them runs the
// job.
//
// Each tick has a lock of its own, named after the tick ("job:<tick in Unix
// ms>"), and its TTL bounds the run:
//
//   - The lock is not released when the run ends. It expires on its own,
//     so an instance that comes late to the tick (slow, or paused) finds it
//     still held and does not run the tick again.
//   - An instance that comes later than the TTL does not even try: once
//     the tick's lock may have expired, obtaining it would not prove that
//     nobody ran the tick. After obtaining, it checks again that the lock
//     was obtained before the earliest moment the first holder's keys could
//     have expired (tick + TTL − drift allowance − the clock skew between
//     instances, -skew).
//   - A crashed instance blocks nothing: the next tick has another name.
//   - On shutdown it waits for its last tick's lock to run out before it
//     closes its Client, which would release the lock.
//   - The run gets a context that ends at the lock's ValidUntil.
//
// The TTL must be at least the job's longest run and at most the tick
// period; instances' clocks must agree within -skew. So the job runs at
// most once per tick. It runs at least once unless every instance is down
// or cannot reach a quorum of nodes during the tick's window.
//
//	cd examples/cron && go run . -nodes 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 -store 10.0.0.9:6379
//
// Each run increments a counter per tick in the -store Redis
// ("cron:runs:<tick>") before it works, which is how its test counts the
// runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/limits"
)

func main() {
	ctx, stop := signalContext()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// signalContext is cancelled by an interrupt or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

type config struct {
	nodes       []string
	store       string
	id, job     string
	every, ttl  time.Duration
	work, late  time.Duration
	skew        time.Duration
	from        time.Time // the first tick; zero: the next one
	ticks       int       // 0: until interrupted
	maxTTL      time.Duration
	nodeTimeout time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cron", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	nodes := fs.String("nodes", "", "comma-separated host:port of the Redis lock nodes (required)")
	fs.StringVar(&cfg.store, "store", "", "host:port of the Redis where each run counts itself (required)")
	host, _ := os.Hostname()
	fs.StringVar(&cfg.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's name in its output")
	fs.StringVar(&cfg.job, "job", "job", "the job's name: its locks are JOB:<tick>")
	fs.DurationVar(&cfg.every, "every", time.Minute, "the tick period")
	fs.DurationVar(&cfg.ttl, "ttl", 0, "each tick's lock TTL, which bounds a run: at least the longest run, at most -every (0: -every)")
	fs.DurationVar(&cfg.work, "work", 100*time.Millisecond, "how long the job runs")
	fs.DurationVar(&cfg.late, "late", 0, "start each tick this late (a slow instance)")
	fs.DurationVar(&cfg.skew, "skew", 50*time.Millisecond, "the most the instances' clocks differ")
	from := fs.Int64("from", 0, "the first tick, in Unix milliseconds (0: the next tick)")
	fs.IntVar(&cfg.ticks, "ticks", 0, "how many ticks to run (0: until interrupted)")
	fs.DurationVar(&cfg.maxTTL, "max-ttl", 0, "the deployment's longest TTL (WithMaxTTL): the restart guard's window (0: WithMaxTTL's default)")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", 0, "per-node timeout (WithNodeTimeout; 0: derived from the TTL)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.ttl == 0 {
		cfg.ttl = cfg.every
	}
	switch {
	case *nodes == "" || cfg.store == "":
		fmt.Fprintln(stderr, "cron: -nodes and -store are required")
		return 2
	case cfg.every <= 0 || cfg.ttl > cfg.every || cfg.ttl < limits.MinTTL:
		fmt.Fprintf(stderr, "cron: -ttl %v must be within [%v, -every %v]\n", cfg.ttl, limits.MinTTL, cfg.every)
		return 2
	}
	cfg.nodes = strings.Split(*nodes, ",")
	if *from != 0 {
		cfg.from = time.UnixMilli(*from)
	}
	if err := schedule(ctx, cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "cron:", err)
		return 1
	}
	return 0
}

// schedule runs the ticks until ctx ends or cfg.ticks are done.
func schedule(ctx context.Context, cfg config, out io.Writer) error {
	var nodes []redis.UniversalClient
	for _, a := range cfg.nodes {
		n := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(a), ContextTimeoutEnabled: true})
		defer n.Close()
		nodes = append(nodes, n)
	}
	var opts []redlock.Option
	if cfg.maxTTL > 0 {
		opts = append(opts, redlock.WithMaxTTL(cfg.maxTTL))
	}
	if cfg.nodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(cfg.nodeTimeout))
	}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	st := redis.NewClient(&redis.Options{Addr: cfg.store, ContextTimeoutEnabled: true})
	defer st.Close()

	// Close releases the locks still held: first let the last tick's lock
	// run out, so that no late instance can run that tick again.
	var heldUntil time.Time
	defer func() { time.Sleep(time.Until(heldUntil)) }()

	tick := cfg.from
	if tick.IsZero() {
		tick = time.Now().Truncate(cfg.every).Add(cfg.every)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for n := 0; cfg.ticks == 0 || n < cfg.ticks; n, tick = n+1, tick.Add(cfg.every) {
		timer.Reset(time.Until(tick.Add(cfg.late)))
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if until := runTick(ctx, cfg, c, st, tick, out); until.After(heldUntil) {
			heldUntil = until
		}
	}
	return nil
}

// runTick runs the job for tick if this instance is the first to obtain
// the tick's lock in time. It returns the obtained lock's ValidUntil, or
// the zero time.
func runTick(ctx context.Context, cfg config, c *redlock.Client, st *redis.Client, tick time.Time, out io.Writer) (heldUntil time.Time) {
	// The first holder's keys live at least until tick + TTL − drift (it
	// obtained them at the tick or later, on its clock). An obtain that
	// ends before that, on every instance's clock, found them, if there
	// were any.
	deadline := tick.Add(cfg.ttl - limits.DriftAllowance(cfg.ttl, limits.DriftFactor) - cfg.skew)
	if !time.Now().Before(deadline) {
		fmt.Fprintf(out, "tick %d: too late\n", tick.UnixMilli())
		return heldUntil
	}
	name := fmt.Sprintf("%s:%d", cfg.job, tick.UnixMilli())
	octx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// A few attempts: simultaneous attempts may split the nodes' votes so
	// that none wins. Once an instance holds the lock, the others' attempts
	// are refused until it expires.
	lock, err := c.Obtain(octx, name, cfg.ttl, redlock.WithMaxAttempts(4))
	switch {
	case errors.Is(err, redlock.ErrNotObtained):
		fmt.Fprintf(out, "tick %d: not ours\n", tick.UnixMilli())
		return heldUntil
	case err != nil:
		fmt.Fprintf(out, "tick %d: %v\n", tick.UnixMilli(), err)
		return heldUntil
	}
	// No Release: the lock must outlive the run, so that no late instance
	// runs the tick again. It expires with its TTL.
	heldUntil = lock.ValidUntil()
	if !time.Now().Before(deadline) {
		fmt.Fprintf(out, "tick %d: obtained too late to be sure it is the only run\n", tick.UnixMilli())
		return heldUntil
	}
	rctx, cancelRun := context.WithDeadline(ctx, lock.ValidUntil())
	defer cancelRun()
	// The job: it counts its run, then works for cfg.work or until its
	// lock's validity ends.
	if err := st.Incr(rctx, fmt.Sprintf("cron:runs:%d", tick.UnixMilli())).Err(); err != nil {
		fmt.Fprintf(out, "tick %d: job: %v\n", tick.UnixMilli(), err)
		return heldUntil
	}
	fmt.Fprintf(out, "tick %d: running (%s, token %d)\n", tick.UnixMilli(), cfg.id, lock.Token())
	t := time.NewTimer(cfg.work)
	defer t.Stop()
	select {
	case <-t.C:
	case <-rctx.Done():
		fmt.Fprintf(out, "tick %d: run cut short at the end of the lock's validity\n", tick.UnixMilli())
	}
	return heldUntil
}
