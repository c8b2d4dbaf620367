package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/redlock-go/redlock/driver"
	redigodriver "github.com/redlock-go/redlock/driver/redigo"
)

// A Node that New did not make (a zero Node) fails its requests with an
// error, and its notifier never confirms, instead of panicking.
func TestZeroNode(t *testing.T) {
	n := &redigodriver.Node{}
	ctx := context.Background()
	if _, err := n.Do(ctx, "PING"); err == nil {
		t.Error("Do on a zero Node: no error")
	}
	if _, err := n.Pipe(ctx, [][]any{{"PING"}}); err == nil {
		t.Error("Pipe on a zero Node: no error")
	}
	h := n.Notifier()
	w := driver.NewWaiter()
	select {
	case <-h.Subscribe("ch", w):
		t.Error("a zero Node's notifier confirmed")
	case <-time.After(300 * time.Millisecond):
	}
	h.Close()
}

// A pool whose dial returns no connection and no error: the notifier
// never confirms, and nothing panics.
func TestPoolDialWithoutConnection(t *testing.T) {
	pool := &redis.Pool{DialContext: func(context.Context) (redis.Conn, error) { return nil, nil }}
	defer func() { _ = pool.Close() }()
	h := redigodriver.New(pool, "").Notifier()
	w := driver.NewWaiter()
	select {
	case <-h.Subscribe("ch", w):
		t.Error("confirmed without a connection")
	case <-time.After(300 * time.Millisecond):
	}
	h.Close()
}
