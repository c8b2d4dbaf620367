package redigo_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	redigodriver "github.com/redlock-go/redlock/driver/redigo"
	"github.com/redlock-go/redlock/tests/fault"
)

// TestMain checks for leaked goroutines; it is also the main of the
// client processes that the fault suite (TestFaults) starts.
func TestMain(m *testing.M) {
	fault.Main(m, faultDriver)
}

// pool makes a pool as the package documentation says, and closes it when
// the test ends.
func pool(t testing.TB, addr string) *redis.Pool {
	p := &redis.Pool{
		DialContext: func(ctx context.Context) (redis.Conn, error) {
			return redis.DialContext(ctx, "tcp", addr)
		},
		MaxIdle:     16,
		IdleTimeout: time.Minute,
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var redigoDriver = drivertest.Driver{
	Name: "redigo",
	Standalone: func(t testing.TB, addr string) driver.Node {
		return redigodriver.New(pool(t, addr), addr)
	},
	Dialing: func(t testing.TB, addr string, dial drivertest.Dialer) driver.Node {
		p := &redis.Pool{
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				return redis.DialContext(ctx, "tcp", addr, redis.DialContextFunc(dial))
			},
			MaxIdle:     16,
			IdleTimeout: time.Minute,
		}
		t.Cleanup(func() { _ = p.Close() })
		return redigodriver.New(p, addr)
	},
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, redigoDriver)
}

// A pool with Dial and no DialContext cannot bound its dials by a
// request's deadline: the node says so, and redlock runs its requests on
// goroutines of their own.
func TestConformanceWithDialOnly(t *testing.T) {
	drivertest.Run(t, drivertest.Driver{
		Name: "redigo, Dial only",
		Standalone: func(t testing.TB, addr string) driver.Node {
			p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }, MaxIdle: 16}
			t.Cleanup(func() { _ = p.Close() })
			n := redigodriver.New(p, addr)
			if n.Info().HonoursDeadline {
				t.Error("a pool without DialContext claims to honour deadlines")
			}
			return n
		},
	})
}

func BenchmarkDriver(b *testing.B) {
	drivertest.Benchmark(b, redigoDriver)
}

// A nil pool is a nil node, which NewFromNodes refuses.
func TestNilPool(t *testing.T) {
	if n := redigodriver.New(nil, "127.0.0.1:6379"); n != nil {
		t.Fatalf("New(nil): %v, want nil", n)
	}
	if _, err := redlock.NewFromNodes([]driver.Node{redigodriver.New(nil, "")}); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("NewFromNodes with New(nil): %v, want ErrInvalid", err)
	}
}
