// Command leader is leader election with a keep-alive lock: every instance
// of a fleet runs it, one of them leads and does the leader's work while it
// holds the lock "leader", and the others wait to take over. A leader that
// loses the lock (its process froze, or it lost the lock nodes) stops
// before the lock's loss deadline: lock.Done is closed then, and the work
// loop checks it before every step. A crashed leader's lock runs out after
// its TTL, and another instance takes over.
//
// Each step of the work is a write to a fenced journal in Redis (package
// fence): the journal accepts a write only
// with a fencing token at least as high as every token it has accepted, so
// a leader that was frozen past its TTL and wakes up cannot write after
// its successor, even before it learns that it lost the lock.
//
//	cd examples/leader && go run . -nodes 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379 -store 10.0.0.9:6379 -id a
//
// It prints one line per change: "campaigning", "leading token=N",
// "lost token=N: …", "fenced token=N" (the journal refused a write), and
// "stopped" when interrupted (it releases the lock first, so that another
// instance takes over at once).
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
	"github.com/redlock-go/redlock/fence"
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
	nodes, store []string
	id, name     string
	ttl, every   time.Duration
	maxTTL       time.Duration
	nodeTimeout  time.Duration
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	nodes := fs.String("nodes", "", "comma-separated host:port of the Redis lock nodes (required)")
	store := fs.String("store", "", "host:port of the Redis that holds the fenced journal (required)")
	host, _ := os.Hostname()
	fs.StringVar(&cfg.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's name in the journal")
	fs.StringVar(&cfg.name, "lock", "leader", "the lock's name")
	fs.DurationVar(&cfg.ttl, "ttl", 5*time.Second, "the lock's TTL: how long a crashed leader blocks the others")
	fs.DurationVar(&cfg.every, "every", 200*time.Millisecond, "how often the leader does a step of work")
	fs.DurationVar(&cfg.maxTTL, "max-ttl", 0, "the deployment's longest TTL (WithMaxTTL): the restart guard's window (0: WithMaxTTL's default)")
	fs.DurationVar(&cfg.nodeTimeout, "node-timeout", 0, "per-node timeout (WithNodeTimeout; 0: derived from the TTL)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *nodes == "" || *store == "" {
		fmt.Fprintln(stderr, "leader: -nodes and -store are required")
		return 2
	}
	cfg.nodes, cfg.store = strings.Split(*nodes, ","), []string{*store}
	if err := elect(ctx, cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "leader:", err)
		return 1
	}
	return 0
}

// elect campaigns until ctx ends: it obtains the lock, leads while it
// holds it, and campaigns again when it loses it.
func elect(ctx context.Context, cfg config, out io.Writer) error {
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
	st := redis.NewClient(&redis.Options{Addr: cfg.store[0], ContextTimeoutEnabled: true})
	defer st.Close()
	j := &journal{f: fence.NewRedis(st)}

	for ctx.Err() == nil {
		fmt.Fprintln(out, "campaigning")
		// Obtain waits, on release notifications and the holder's TTL,
		// until this instance gets the lock or ctx ends. WithAutoRefresh
		// keeps it while the process runs and reaches the nodes.
		lock, err := c.Obtain(ctx, cfg.name, cfg.ttl, redlock.WithAutoRefresh())
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintln(out, "campaign failed:", err)
			continue
		}
		lead(ctx, cfg, lock, j, out)
	}
	fmt.Fprintln(out, "stopped")
	return nil
}

// lead does the leader's work while lock is held, and returns when it is
// lost, the journal refuses its token, or ctx ends. It releases the lock.
func lead(ctx context.Context, cfg config, lock *redlock.Lock, j *journal, out io.Writer) {
	defer lock.Release(context.WithoutCancel(ctx))
	fmt.Fprintf(out, "leading token=%d\n", lock.Token())
	tick := time.NewTicker(cfg.every)
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-lock.Done():
			fmt.Fprintf(out, "lost token=%d: %v\n", lock.Token(), lock.Err())
			return
		case <-tick.C:
		}
		// Err reads the clock: past the loss deadline, which comes before
		// the lock can expire on the nodes, it reports the loss even if the
		// keep-alive has not run yet (after a freeze, say). A process
		// frozen between this check and the write is what the journal's
		// fencing is for.
		if err := lock.Err(); err != nil {
			fmt.Fprintf(out, "lost token=%d: %v\n", lock.Token(), err)
			return
		}
		err := j.write(ctx, lock.Sequencer(), cfg.id, seq)
		switch {
		case errors.Is(err, fence.ErrStale):
			fmt.Fprintf(out, "fenced token=%d\n", lock.Token())
			return
		case err != nil && ctx.Err() == nil:
			fmt.Fprintln(out, "journal:", err)
		}
	}
}

// journal is the leader's work: an append-only list in Redis that accepts
// an entry only with a token at least as high as every token it accepted,
// atomically with the append: the append is a script that package fence
// runs only under a current token (fence.Redis.Eval), with the fence in a
// hash beside the list (the same hash tag, for Redis Cluster). The hash
// also counts the refused writes.
type journal struct{ f *fence.Redis }

// The journal's keys share a hash tag.
const (
	journalEntries = "{leader-journal}:entries"
	journalFence   = "{leader-journal}"
)

const appendEntry = `return redis.call('RPUSH', KEYS[1], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])`

// write appends an entry; it returns an error matching fence.ErrStale when
// a leader with a higher token has written.
func (j *journal) write(ctx context.Context, s fence.Sequencer, id string, seq int) error {
	_, err := j.f.Eval(ctx, journalFence, s, appendEntry, []string{journalEntries}, s.Token, id, seq)
	return err
}
