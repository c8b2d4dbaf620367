package goredis

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// A client honours deadlines only with ContextTimeoutEnabled and neither
// timeout -2, with which go-redis sets no connection deadline at all, the
// context's included (TestFrozenSingleNodeWithoutConnectionDeadlines, in
// the root package, shows what a false true would cost). New does no I/O,
// so no server is needed.
func TestInfoHonoursDeadline(t *testing.T) {
	const addr = "127.0.0.1:1"
	for _, c := range []struct {
		name string
		new  func() redis.UniversalClient
		want bool
	}{
		{"defaults", func() redis.UniversalClient { return redis.NewClient(&redis.Options{Addr: addr}) }, false},
		{"ContextTimeoutEnabled", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		}, true},
		{"ContextTimeoutEnabled, timeouts -1 (none)", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, ReadTimeout: -1, WriteTimeout: -1})
		}, true},
		{"ContextTimeoutEnabled, ReadTimeout -2", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, ReadTimeout: -2})
		}, false},
		{"ContextTimeoutEnabled, WriteTimeout -2", func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, WriteTimeout: -2})
		}, false},
		{"Cluster, ContextTimeoutEnabled", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true})
		}, true},
		{"Cluster, ContextTimeoutEnabled, ReadTimeout -2", func() redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, ContextTimeoutEnabled: true, ReadTimeout: -2})
		}, false},
		{"Ring, ContextTimeoutEnabled", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: true})
		}, true},
		{"Ring, ContextTimeoutEnabled, WriteTimeout -2", func() redis.UniversalClient {
			return redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, ContextTimeoutEnabled: true, WriteTimeout: -2})
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := c.new()
			defer rc.Close()
			if got := New(rc).Info().HonoursDeadline; got != c.want {
				t.Fatalf("Info().HonoursDeadline = %v, want %v", got, c.want)
			}
		})
	}
}
