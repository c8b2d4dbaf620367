package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/driver"
	redigodriver "github.com/redlock-go/redlock/driver/redigo"
	"github.com/redlock-go/redlock/tests/fault"
)

// faultDriver gives the fault suite (tests/fault) nodes on redigo pools
// configured as the package documentation says, with the suite's short
// timeouts: dials within 200 ms, reads and writes within 500 ms.
var faultDriver = fault.Driver{
	Name: "redigo",
	Standalone: func(addr string) (driver.Node, func(), error) {
		p := &redis.Pool{
			DialContext: func(ctx context.Context) (redis.Conn, error) {
				return redis.DialContext(ctx, "tcp", addr,
					redis.DialConnectTimeout(200*time.Millisecond),
					redis.DialReadTimeout(500*time.Millisecond),
					redis.DialWriteTimeout(500*time.Millisecond))
			},
			MaxIdle:     16,
			IdleTimeout: time.Minute,
		}
		return redigodriver.New(p, addr), func() { _ = p.Close() }, nil
	},
}

// TestFaults runs a representative part of the fault suite on redigo
// (fault.Representative: pauses, crashes, freezes, resets, with controls),
// and the proxy's partition, lost replies and the keep-alive cut off.
// -fault.all runs every scenario (redigo has no Sentinel: those are
// skipped).
func TestFaults(t *testing.T) {
	fault.Run(t, append(fault.Representative(),
		"partition-majority",
		"replies-lost-majority",
		"auto-refresh-partition-majority",
	)...)
}
