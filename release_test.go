package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Tests of a lock's release (release.go) with an ended context and a
// node that does not answer.

func TestReleaseWithCancelledContext(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients)
	lock, err := c.TryObtain(context.Background(), "cancelled", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release with a cancelled context: %v", err)
	}
	assertReleased(t, cl.clients, "cancelled")
}

func TestReleaseTimeoutIsNotErrNotHeld(t *testing.T) {
	cl := startNodes(t, 3)
	c := newClient(t, cl.clients, WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	lock, err := c.TryObtain(ctx, "release-timeout", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The obtain returns at a quorum: wait for every node's acquire, so
	// that a late one cannot land on node 0 after the DEL below (a CI run
	// released on nodes 0 and 2).
	eventually(t, "every node holds the lock", func() bool {
		for _, n := range cl.clients {
			if _, ok := rawGet(t, n, "release-timeout"); !ok {
				return false
			}
		}
		return true
	})
	// Node 0 lost the key; node 1 does not answer: no quorum confirms the
	// release, but neither did a quorum say the lock was not ours.
	if err := cl.clients[0].Del(ctx, "{redlock:release-timeout}").Err(); err != nil {
		t.Fatal(err)
	}
	cl.pause(t, 1)
	err = lock.Release(ctx)
	var qe *QuorumError
	if !errors.As(err, &qe) || errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrNotOwner) || !errors.Is(err, ErrNodeTimeout) {
		t.Fatalf("Release: %v; want a *QuorumError with ErrNotOwner and ErrNodeTimeout per node, not ErrNotHeld", err)
	}
}
