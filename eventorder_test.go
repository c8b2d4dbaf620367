package redlock

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Tests of the order of a lock's events (eventorder.go).

// A lock's events come after its ObtainEvent, even when the lock ends
// while the obtain that returns it is still reporting it: here the hook
// holds the ObtainEvent back until it hears the lock's release by Close, or
// for 2 s, since Close must wait for the ObtainEvent.
func TestHookHearsALocksObtainFirst(t *testing.T) {
	cl := startNodes(t, 1)
	h := &orderHook{inObtain: make(chan struct{}), released: make(chan struct{}, 1)}
	c := newClient(t, cl.clients, WithHook(h))
	obtained := make(chan error, 1)
	go func() {
		_, err := c.TryObtain(context.Background(), "order", time.Minute)
		obtained <- err
	}()
	<-h.inObtain
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	if err := <-obtained; err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Equal(h.heard, []string{"obtain", "release"}) {
		t.Fatalf("the hook heard %v; want the lock's obtain, then its release", h.heard)
	}
}
