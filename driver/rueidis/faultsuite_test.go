package rueidis_test

import (
	"net"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/driver"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
	"github.com/redlock-go/redlock/tests/fault"
)

// faultDriver gives the fault suite (tests/fault) nodes on rueidis clients
// configured as the package documentation says, with the suite's short
// timeouts (dials within 200 ms, a connection that waits 500 ms for a
// write or a reply closed) and no retries.
var faultDriver = fault.Driver{
	Name: "rueidis",
	Standalone: func(addr string) (driver.Node, func(), error) {
		return faultNode(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true})
	},
	Sentinel: func(master string, sentinels []string) (driver.Node, func(), error) {
		return faultNode(rueidis.ClientOption{InitAddress: sentinels, Sentinel: rueidis.SentinelOption{MasterSet: master}})
	},
}

func faultNode(o rueidis.ClientOption) (driver.Node, func(), error) {
	o.Dialer = net.Dialer{Timeout: 200 * time.Millisecond}
	o.ConnWriteTimeout = 500 * time.Millisecond
	o.DisableRetry = true
	c, err := rueidis.NewClient(o)
	if c == nil {
		return nil, nil, err
	}
	return rueidisdriver.New(c), c.Close, nil
}

// TestFaults runs a representative part of the fault suite on rueidis
// (fault.Representative: pauses, crashes, freezes, resets, with
// controls), and a Sentinel failover.
//
// Not the proxy's blackholes and lost replies: the fault proxy drops the
// bytes it holds back inside a connection that stays open, and lets later
// bytes through once healed, which TCP never does (a real partition
// delays bytes, or ends the connection). go-redis and redigo close a
// connection whose request timed out, so they never read past the gap;
// rueidis keeps a pipelined or pub/sub connection after a request's
// deadline, and in two of four runs of partition-majority it then met a
// reply with no request queued for it and panicked ("protocol bug,
// message handled out of order", in its reading goroutine). -fault.all
// runs every scenario, those included.
func TestFaults(t *testing.T) {
	fault.Run(t, append(fault.Representative(), "sentinel-failover")...)
}
