package fault

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
)

var (
	flagDuration = flag.Duration("fault.duration", 0, "how long each scenario's workload runs (default 4s, or 30s with -fault.long; a scenario may ask for more than 4s)")
	flagLong     = flag.Bool("fault.long", false, "run the long version of every scenario")
	flagReport   = flag.String("fault.report", "", "append one markdown table row per scenario to this file")
	flagAll      = flag.Bool("fault.all", false, "run every scenario where a test runs a subset (the drivers' modules)")
)

// duration is the workload time of one scenario.
func duration() time.Duration {
	switch {
	case *flagDuration > 0:
		return *flagDuration
	case *flagLong:
		return 30 * time.Second
	default:
		return 4 * time.Second
	}
}

// Driver makes the lock nodes of the suite's clients: the driver the suite
// runs on. Every client, goroutine or process, makes its own nodes, so
// that a fault of one client's connections touches no other's. The store
// the clients write to is always reached with go-redis: it is not a lock
// node, and no fault touches it.
type Driver struct {
	// Name names the driver in the suite's messages.
	Name string
	// Standalone returns a node for the redis-server at addr (host:port,
	// the server's or a fault proxy's in front of it) and a function that
	// closes its client, or an error when it cannot make one (a server
	// that is down is no such error: the suite stops servers). The node must end a request at its context's
	// deadline, dial within about 200 ms, end a blocked read or write
	// within about 500 ms, and not retry a request (the lock retries):
	// the suite kills, freezes and cuts off servers under the nodes, and
	// its checks assume a dead node costs a client little.
	Standalone func(addr string) (driver.Node, func(), error)
	// Sentinel returns a node for the master that the sentinels at
	// sentinels monitor under the name master, as Standalone does; nil
	// when the driver does not support Sentinel (the Sentinel scenarios
	// are then skipped).
	Sentinel func(master string, sentinels []string) (driver.Node, func(), error)
}

// node returns d's node for a client address of the suite: host:port, or
// "sentinel:NAME:HOST:PORT,HOST:PORT" for a Sentinel-managed master.
func (d Driver) node(addr string) (driver.Node, func(), error) {
	if rest, ok := strings.CutPrefix(addr, "sentinel:"); ok {
		if d.Sentinel == nil {
			return nil, nil, fmt.Errorf("fault: driver %s does not support Sentinel", d.Name)
		}
		name, sentinels, _ := strings.Cut(rest, ":")
		return d.Sentinel(name, strings.Split(sentinels, ","))
	}
	return d.Standalone(addr)
}

// suiteDriver is the driver given to Main: the nodes of every client of
// the test process and of the client processes it starts.
var suiteDriver *Driver

// Main is the TestMain of a test binary that runs the suite on the nodes
// of d:
//
//	func TestMain(m *testing.M) { fault.Main(m, myDriver) }
//
// It runs the tests, checking for leaked goroutines (goleak, with opts),
// or, in a client process that the suite started (the test binary
// re-executed), that client's workload.
func Main(m *testing.M, d Driver, opts ...goleak.Option) {
	if d.Standalone == nil {
		fmt.Fprintln(os.Stderr, "fault: Driver.Standalone is required")
		os.Exit(2)
	}
	suiteDriver = &d
	// go-redis logs every failed dial; the suite kills nodes on purpose.
	redis.SetLogger(quietLogger{})
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(runChild(cfg))
	}
	goleak.VerifyTestMain(m, opts...)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// Scenarios returns the names of the suite's scenarios, in the order Run
// runs them.
func Scenarios() []string {
	names := make([]string, len(scenarios))
	for i, sc := range scenarios {
		names[i] = sc.name
	}
	return names
}

// Representative names the part of the suite that a driver's own tests
// run at least: a baseline, client pauses (a goroutine's and a whole
// client process's, each with its unfenced control), crashes of a
// minority and of a majority, freezes of a minority and of a majority,
// and connection resets.
func Representative() []string {
	return []string{
		"baseline",
		"control-unfenced-gc-pause",
		"gc-pause",
		"control-unfenced-process-pause",
		"process-pause",
		"crash-minority-guard-on",
		"crash-majority-guard-on",
		"freeze-minority-longer-than-ttl",
		"freeze-majority-longer-than-ttl",
		"reset-majority",
	}
}

// Run runs the named scenarios (every one when names is empty, or with
// -fault.all), each as a subtest named after it, on the driver given to
// Main. A scenario that needs what the driver lacks (Sentinel) is skipped
// with the reason.
func Run(t *testing.T, names ...string) {
	if suiteDriver == nil {
		t.Fatal("fault: Run needs the test binary's TestMain to call fault.Main")
	}
	for _, n := range names {
		if !slices.Contains(Scenarios(), n) {
			t.Fatalf("fault: no scenario %q", n)
		}
	}
	if *flagAll {
		names = nil
	}
	for _, sc := range scenarios {
		if len(names) > 0 && !slices.Contains(names, sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			if sc.sentinel && suiteDriver.Sentinel == nil {
				t.Skipf("driver %s does not support Sentinel", suiteDriver.Name)
			}
			runScenario(t, sc)
		})
	}
}
