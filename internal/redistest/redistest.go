// Package redistest starts real redis-server processes, Redis Clusters and
// Sentinel deployments for tests, on free loopback ports, and stops them
// when the test ends. The processes are those of internal/redisproc, the
// repository's one process harness; this package adds only the testing.TB
// helpers and aliases, so that non-test code (the CLI, examples, the
// benchmarks) imports redisproc and does not link the testing package.
package redistest

import (
	"context"
	"log"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/redisproc"
)

// The harness's types, under the names the tests use.
type (
	Server       = redisproc.Server
	Options      = redisproc.Options
	Cluster      = redisproc.Cluster
	Sentinel     = redisproc.Sentinel
	SentinelProc = redisproc.SentinelProc
)

// ErrNotInstalled is returned when redis-server or redis-sentinel is not on
// the PATH.
var ErrNotInstalled = redisproc.ErrNotInstalled

// StartServer starts one redis-server (redisproc.StartServer). The caller
// must call Stop.
func StartServer(opts Options) (*Server, error) { return redisproc.StartServer(opts) }

// Start starts n servers for a test and stops them when the test ends. It
// fails the test with a clear message when redis-server is not installed.
func Start(tb testing.TB, n int, opts ...Options) []*Server {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	servers, err := redisproc.StartServers(n, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, s := range servers {
			if err := s.Stop(); err != nil {
				tb.Errorf("redistest: stop %s: %v", s.Addr(), err)
			}
		}
	})
	return servers
}

// Clients starts n servers like Start and returns a client of each
// (Server.Client); the clients are closed when the test ends.
func Clients(tb testing.TB, n int) []redis.UniversalClient {
	tb.Helper()
	var clients []redis.UniversalClient
	for _, s := range Start(tb, n) {
		c := s.Client()
		tb.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	return clients
}

// ExampleNodes starts n servers for an Example, which has no testing.TB,
// and returns a client of each (Server.Client) and a function that closes
// the clients and stops the servers. It exits the process (log.Fatal) when
// the servers cannot start.
func ExampleNodes(n int) ([]redis.UniversalClient, func()) {
	servers, err := redisproc.StartServers(n, Options{})
	if err != nil {
		log.Fatal(err)
	}
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		clients[i] = s.Client()
	}
	return clients, func() {
		for _, c := range clients {
			_ = c.Close()
		}
		redisproc.StopAll(servers)
	}
}

// StartClusterT starts a cluster of n masters for a test and stops it when
// the test ends.
func StartClusterT(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := redisproc.StartCluster(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Stop() })
	return c
}

// StartSentinelT starts a sentinel deployment for a test and stops it when
// the test ends.
func StartSentinelT(tb testing.TB, name string) *Sentinel {
	tb.Helper()
	d, err := redisproc.StartSentinel(name)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := d.Stop(); err != nil {
			tb.Errorf("redistest: stop sentinel deployment %q: %v", d.Name, err)
		}
	})
	return d
}

// PauseProcess freezes a process with SIGSTOP (redisproc.PauseProcess),
// ResumeProcess resumes it; both fail where there is no SIGSTOP.
func PauseProcess(p *os.Process) error  { return redisproc.PauseProcess(p) }
func ResumeProcess(p *os.Process) error { return redisproc.ResumeProcess(p) }

// MaxMemoryAtUsed sets the server's maxmemory to the memory it uses now
// (its maxmemory-policy decides what happens next: refusals or
// evictions), and returns that many bytes. The test ends on failure.
func MaxMemoryAtUsed(tb testing.TB, c redis.UniversalClient) int64 {
	tb.Helper()
	ctx := context.Background()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var used int64 = -1
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				tb.Fatalf("used_memory %q: %v", v, err)
			}
		}
	}
	if used < 0 {
		tb.Fatal("INFO memory has no used_memory")
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used, 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	return used
}
