package fipsonly_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	redigodriver "github.com/redlock-go/redlock/driver/redigo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A lock cycle over redigo in a FIPS 140-only process
// (GODEBUG=fips140=only), which the test starts.
func TestConformanceFIPS140Only(t *testing.T) {
	drivertest.FIPS140Only(t, drivertest.Driver{
		Name: "redigo",
		Standalone: func(t testing.TB, addr string) driver.Node {
			p := &redis.Pool{
				DialContext: func(ctx context.Context) (redis.Conn, error) {
					return redis.DialContext(ctx, "tcp", addr)
				},
				MaxIdle:     16,
				IdleTimeout: time.Minute,
			}
			t.Cleanup(func() { _ = p.Close() })
			return redigodriver.New(p, addr)
		},
	})
}
