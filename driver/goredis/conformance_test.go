package goredis_test

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	"github.com/redlock-go/redlock/driver/goredis"
)

// The conformance suite, with the options the README recommends
// (ContextTimeoutEnabled) and with go-redis's defaults, under which
// requests do not honour their deadlines.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name     string
		deadline bool
	}{
		{"ContextTimeoutEnabled", true},
		{"default options", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			drivertest.Run(t, drivertest.Driver{
				Name: "go-redis, " + c.name,
				Standalone: func(t testing.TB, addr string) driver.Node {
					rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: c.deadline})
					t.Cleanup(func() { _ = rc.Close() })
					return goredis.New(rc)
				},
				Dialing: func(t testing.TB, addr string, dial drivertest.Dialer) driver.Node {
					rc := redis.NewClient(&redis.Options{Addr: addr, Dialer: dial, ContextTimeoutEnabled: c.deadline})
					t.Cleanup(func() { _ = rc.Close() })
					return goredis.New(rc)
				},
				Cluster: func(t testing.TB, addrs []string) driver.Node {
					rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: c.deadline})
					t.Cleanup(func() { _ = rc.Close() })
					return goredis.New(rc)
				},
				Sentinel: func(t testing.TB, master string, sentinels []string) driver.Node {
					rc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: master, SentinelAddrs: sentinels, ContextTimeoutEnabled: c.deadline})
					t.Cleanup(func() { _ = rc.Close() })
					return goredis.New(rc)
				},
			})
		})
	}
}

func BenchmarkDriver(b *testing.B) {
	for _, deadline := range []bool{true, false} {
		b.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", deadline), func(b *testing.B) {
			drivertest.Benchmark(b, drivertest.Driver{
				Name: "go-redis",
				Standalone: func(t testing.TB, addr string) driver.Node {
					rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: deadline})
					t.Cleanup(func() { _ = rc.Close() })
					return goredis.New(rc)
				},
			})
		})
	}
}
