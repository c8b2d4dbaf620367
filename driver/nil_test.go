package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
)

// ptrConn is a pointer type that implements driver.PubSubConn, for a
// typed nil behind the interface.
type ptrConn struct{ driver.PubSubConn }

// A dial that returns no connection and no error (nil, or a nil pointer
// behind the interface) is a failed dial: the Hub never confirms, and
// nothing panics.
func TestHubDialWithoutConnection(t *testing.T) {
	for name, conn := range map[string]driver.PubSubConn{
		"nil":             nil,
		"(*ptrConn)(nil)": (*ptrConn)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			for _, sharded := range []bool{false, true} {
				h := driver.NewHub(func(context.Context, string) (driver.PubSubConn, error) { return conn, nil }, sharded, time.Second)
				w := driver.NewWaiter()
				select {
				case <-h.Subscribe("ch", w):
					t.Errorf("sharded %v: confirmed without a connection", sharded)
				case <-time.After(300 * time.Millisecond):
				}
				h.Unsubscribe("ch", w)
				h.Close()
			}
		})
	}
}

// A goredis.Node that New did not make (a zero Node) fails its requests
// with an error, and a redlock Client over it fails to lock, instead of
// panicking.
func TestZeroGoRedisNode(t *testing.T) {
	n := &goredis.Node{}
	ctx := context.Background()
	if _, err := n.Do(ctx, "PING"); err == nil {
		t.Error("Do on a zero Node: no error")
	}
	if _, err := n.Pipe(ctx, [][]any{{"PING"}}); err == nil {
		t.Error("Pipe on a zero Node: no error")
	}
	if ms, err := n.Masters(ctx); ms != nil || err != nil {
		t.Errorf("Masters on a zero Node: %v, %v", ms, err)
	}
	h := n.Notifier()
	w := driver.NewWaiter()
	select {
	case <-h.Subscribe("ch", w):
		t.Error("a zero Node's notifier confirmed")
	case <-time.After(300 * time.Millisecond):
	}
	h.Close()

	c, err := redlock.NewFromNodes([]driver.Node{n})
	if err != nil {
		return // refused: as good
	}
	defer func() { _ = c.Close() }()
	if l, err := c.TryObtain(ctx, "zero", time.Second); err == nil {
		_ = l.Release(ctx)
		t.Error("obtained on a zero Node")
	}
}
