package driver_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// driver.Hub is every driver's Notifier: each driver's conformance run
// (drivertest.Run in driver/goredis, driver/rueidis and driver/redigo)
// checks it on real servers, with that driver's connections.

// A Hub without a dialer or a timeout does not panic: it never confirms,
// and closes.
func TestHubWithoutDialer(t *testing.T) {
	h := driver.NewHub(nil, false, 0)
	w := driver.NewWaiter()
	confirmed := h.Subscribe("ch", w)
	timer := time.NewTimer(200 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-confirmed:
		t.Fatal("a hub without a dialer confirmed a subscription")
	case <-timer.C:
	}
	h.Unsubscribe("ch", w)
	h.Close()
}
