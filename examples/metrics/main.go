// Command metrics serves the Prometheus metrics of a redlock Client at
// /metrics while workers contend for a few locks, so that every metric of
// redlockprom moves: obtains and contention, waits, automatic refreshes,
// releases, and now and then a lock held past its TTL and lost.
//
//	cd examples/metrics && go run .
//	curl -s localhost:2112/metrics | grep ^redlock_
//
// Without -nodes it starts three local redis-server processes (on the PATH)
// as lock nodes, and stops them when it ends. It runs until interrupted, or
// for the -for duration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockprom"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "localhost:2112", "listen address of the /metrics endpoint")
	nodeList := fs.String("nodes", "", "comma-separated host:port of the Redis lock nodes (default: start three local redis-server)")
	workers := fs.Int("workers", 8, "concurrent workers")
	locks := fs.Int("locks", 3, "distinct lock names the workers contend for")
	duration := fs.Duration("for", 0, "how long to run (0: until interrupted)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := serve(ctx, *addr, *nodeList, *workers, *locks, *duration, stdout); err != nil {
		fmt.Fprintln(stderr, "metrics:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, addr, nodeList string, workers, locks int, duration time.Duration, stdout io.Writer) error {
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	var opts []redlock.Option
	var addrs []string
	if nodeList != "" {
		addrs = strings.Split(nodeList, ",")
	} else {
		servers, err := startServers(3)
		if err != nil {
			return err
		}
		defer servers.stop()
		addrs = servers.addrs
		// The servers were just started: the restart guard would keep them
		// out of locking for its recovery window. Keep it on in production.
		opts = append(opts, redlock.WithRestartGuard(redlock.GuardOff))
	}
	var nodes []redis.UniversalClient
	for _, a := range addrs {
		n := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(a), ContextTimeoutEnabled: true})
		defer n.Close()
		nodes = append(nodes, n)
	}

	// Register on a registry of our own, never the global one.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hook, err := redlockprom.New(reg, redlockprom.WithLockLabel(func(name string) string {
		kind, _, _ := strings.Cut(name, ":") // "job:2" → "job": a bounded label
		return kind
	}))
	if err != nil {
		return err
	}
	c, err := redlock.New(nodes, append(opts, redlock.WithHook(hook))...)
	if err != nil {
		return err
	}
	defer c.Close()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving http://%s/metrics\n", ln.Addr())

	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { work(ctx, c, i, locks) })
	}
	wg.Wait()

	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// work runs one worker until ctx ends: mostly short jobs under a contended
// lock kept alive by Do, sometimes a TryObtain that gives up at once, and
// now and then a lease left to run out.
func work(ctx context.Context, c *redlock.Client, id, locks int) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for n := 0; ctx.Err() == nil; n++ {
		name := fmt.Sprintf("job:%d", rng.IntN(locks))
		switch {
		case n%10 == 9:
			// A lease held past its TTL without refresh: lost.
			l, err := c.TryObtain(ctx, fmt.Sprintf("lease:%d", id), 200*time.Millisecond)
			if err == nil {
				select {
				case <-l.Done():
				case <-ctx.Done():
				}
				_ = l.Release(context.WithoutCancel(ctx))
			}
		case n%5 == 4:
			if l, err := c.TryObtain(ctx, name, time.Second); err == nil {
				pause(ctx, time.Duration(rng.IntN(20))*time.Millisecond)
				_ = l.Release(context.WithoutCancel(ctx))
			}
		default:
			octx, cancel := context.WithTimeout(ctx, time.Second)
			_ = c.Do(octx, name, 600*time.Millisecond, func(ctx context.Context) error {
				// Long enough, now and then, for the keep-alive to refresh.
				pause(ctx, time.Duration(5+rng.IntN(300))*time.Millisecond)
				return nil
			})
			cancel()
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
