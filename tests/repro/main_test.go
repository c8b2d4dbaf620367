package repro

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
)

// TestMain runs the child half of a test when REDLOCK_CHILD names one: the
// test binary started again by the test, as another process.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial; tests kill nodes on purpose.
	redis.SetLogger(quietLogger{})
	switch os.Getenv("REDLOCK_CHILD") {
	case "paused":
		os.Exit(pausedChild())
	case "resume":
		os.Exit(resumeChild())
	}
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// cluster is a set of real redis-server processes and a client for each.
type cluster struct {
	servers []*redistest.Server
	clients []redis.UniversalClient
}

func startNodes(t testing.TB, n int) *cluster {
	t.Helper()
	cl := &cluster{servers: redistest.Start(t, n)}
	for _, s := range cl.servers {
		c := s.Client()
		t.Cleanup(func() { _ = c.Close() })
		cl.clients = append(cl.clients, c)
	}
	return cl
}

// newClient returns a Client closed at the end of the test, with the root
// package's test defaults (its helpers_test.go says why): a node timeout of
// 250 ms, the restart guard and the configuration records off.
func newClient(t *testing.T, nodes []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	defaults := []redlock.Option{redlock.WithNodeTimeout(250 * time.Millisecond), redlock.WithRestartGuard(redlock.GuardOff), redlock.WithConfigRecords(false)}
	c, err := redlock.New(nodes, append(defaults, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func writer(c *redlock.Client, name string) redlock.Locker { _, w := c.RWMutex(name); return w }
