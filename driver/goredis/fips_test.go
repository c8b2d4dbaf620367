package goredis_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	"github.com/redlock-go/redlock/driver/goredis"
)

// A lock cycle over go-redis in a FIPS 140-only process
// (GODEBUG=fips140=only), which the test starts.
func TestConformanceFIPS140Only(t *testing.T) {
	drivertest.FIPS140Only(t, drivertest.Driver{
		Name: "go-redis",
		Standalone: func(t testing.TB, addr string) driver.Node {
			rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			return goredis.New(rc)
		},
	})
}
