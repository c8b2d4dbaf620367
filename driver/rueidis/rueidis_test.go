package rueidis_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/tests/fault"
)

// rueidis's cluster client closes the connections a topology refresh
// replaced five seconds later, and refreshes its topology after a MOVED
// (the slot migration of the conformance suite) after a random delay, each
// on a goroutine of its own that nothing stops, not even Close; they end
// by themselves. TestMain is also the main of the client processes that
// the fault suite (TestFaults) starts.
func TestMain(m *testing.M) {
	fault.Main(m, faultDriver,
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"))
}

// newClient makes a rueidis client as the package documentation says, and
// closes it when the test ends.
func newClient(t testing.TB, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if c == nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, drivertest.Driver{
		Name: "rueidis",
		Standalone: func(t testing.TB, addr string) driver.Node {
			return rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true}))
		},
		Dialing: func(t testing.TB, addr string, dial drivertest.Dialer) driver.Node {
			return rueidisdriver.New(newClient(t, rueidis.ClientOption{
				InitAddress:       []string{addr},
				ForceSingleClient: true,
				DialCtxFn: func(ctx context.Context, dst string, _ *net.Dialer, _ *tls.Config) (net.Conn, error) {
					return dial(ctx, "tcp", dst)
				},
			}))
		},
		Cluster: func(t testing.TB, addrs []string) driver.Node {
			return rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: addrs}))
		},
		Sentinel: func(t testing.TB, master string, sentinels []string) driver.Node {
			return rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: sentinels, Sentinel: rueidis.SentinelOption{MasterSet: master}}))
		},
	})
}

func BenchmarkDriver(b *testing.B) {
	drivertest.Benchmark(b, drivertest.Driver{
		Name: "rueidis",
		Standalone: func(t testing.TB, addr string) driver.Node {
			return rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true}))
		},
	})
}

// Auto-pipelining: 64 goroutines obtaining and releasing locks through one
// node send their requests on rueidis's few pipelined connections
// (2^PipelineMultiplex), many in flight at once on each, instead of a
// connection each.
func TestAutoPipelining(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	n := rueidisdriver.New(newClient(t, rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true, PipelineMultiplex: 1}))
	c, err := redlock.NewFromNodes([]driver.Node{n}, redlock.WithNodeTimeout(2*time.Second), redlock.WithRestartGuard(redlock.GuardOff))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	connections := func() int64 {
		v, err := n.Do(ctx, "INFO", "stats")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(v.(string)) {
			if f, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
				n, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatal("INFO stats has no total_connections_received")
		return 0
	}
	before := connections()
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 25 {
				l, err := c.TryObtain(ctx, fmt.Sprintf("pipelined-%d-%d", g, i), 10*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Two pipelined connections at most (PipelineMultiplex 1), both
	// possibly opened during the run.
	if opened := connections() - before; opened > 2 {
		t.Errorf("64 goroutines opened %d connections; rueidis's auto-pipelining shares two", opened)
	}
}

// With ForceSingleClient, as the package documentation says, NewClient
// returns a client for a standalone node that is down, and the node works
// once its server is up: a Redlock deployment can start with a node down.
func TestNodeDownAtStart(t *testing.T) {
	s := redistest.Start(t, 1)[0]
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true})
	if c == nil {
		t.Fatalf("NewClient for a node that is down: no client (%v)", err)
	}
	defer c.Close()
	t.Logf("NewClient for a node that is down: %v", err)
	n := rueidisdriver.New(c)
	if info := n.Info(); info.Addr != s.Addr() || !info.Unique {
		t.Errorf("Info: %+v, want Addr %s", info, s.Addr())
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := n.Do(ctx, "PING")
		cancel()
		if err == nil && v == "PONG" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not answer after its server started: %v, %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A nil client is a nil node, which NewFromNodes refuses.
func TestNilClient(t *testing.T) {
	if n := rueidisdriver.New(nil); n != nil {
		t.Fatalf("New(nil): %v, want nil", n)
	}
	if _, err := redlock.NewFromNodes([]driver.Node{rueidisdriver.New(nil)}); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("NewFromNodes with New(nil): %v, want ErrInvalid", err)
	}
}
