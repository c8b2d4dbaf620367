package rueidis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/driver"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
)

// wrapped is a pointer type that implements rueidis.Client, for a typed
// nil behind the interface.
type wrapped struct{ rueidis.Client }

// A nil pointer behind rueidis.Client gives a nil node, which
// NewFromNodes refuses with ErrInvalid, instead of a panic in New.
func TestTypedNilClient(t *testing.T) {
	var c rueidis.Client = (*wrapped)(nil)
	n := rueidisdriver.New(c)
	if n != nil {
		t.Fatalf("New of a typed nil: %v, want nil", n)
	}
	if _, err := redlock.NewFromNodes([]driver.Node{n}); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("NewFromNodes with New of a typed nil: %v, want ErrInvalid", err)
	}
}

// A Node that New did not make (a zero Node) fails its requests with an
// error, and its notifier never confirms, instead of panicking.
func TestZeroNode(t *testing.T) {
	n := &rueidisdriver.Node{}
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
}
