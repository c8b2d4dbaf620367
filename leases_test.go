package redlock

import (
	"context"
	"testing"
	"time"
)

func TestLocalLeases(t *testing.T) {
	ctx := context.Background()
	s := NewLocalLeases()
	a, err := s.Acquire(ctx, "n", "a", time.Second)
	if err != nil || !a.Acquired || a.Version < 1 || a.Version >= MaxLeaseVersion {
		t.Fatalf("Acquire: %+v, %v", a, err)
	}
	again, _ := s.Acquire(ctx, "n", "a", time.Second)
	if !again.Acquired || again.Version != a.Version {
		t.Fatalf("idempotent Acquire: %+v, want version %d", again, a.Version)
	}
	b, _ := s.Acquire(ctx, "n", "b", time.Second)
	if b.Acquired || b.Remaining <= 0 {
		t.Fatalf("Acquire of a held lease: %+v", b)
	}
	if ok, _ := s.Extend(ctx, "n", "b", a.Version, time.Second); ok {
		t.Fatal("Extend by another owner succeeded")
	}
	if ok, _ := s.Extend(ctx, "n", "a", a.Version, time.Second); !ok {
		t.Fatal("Extend by the owner failed")
	}
	if ok, err := s.Release(ctx, "n", "b", a.Version); ok || err != nil {
		t.Fatalf("Release by another owner: %v, %v; want false", ok, err)
	}
	if ok, err := s.Release(ctx, "n", "a", a.Version); !ok || err != nil {
		t.Fatalf("Release by the owner: %v, %v; want true", ok, err)
	}
	if ok, _ := s.Release(ctx, "n", "a", a.Version); ok {
		t.Fatal("second Release: true, want false")
	}
	b, _ = s.Acquire(ctx, "n", "b", 20*time.Millisecond)
	if !b.Acquired || b.Version <= a.Version {
		t.Fatalf("Acquire after release: %+v, want a version above %d", b, a.Version)
	}
	time.Sleep(40 * time.Millisecond)
	if ok, _ := s.Extend(ctx, "n", "b", b.Version, time.Second); ok {
		t.Fatal("Extend of an expired lease succeeded")
	}
	if ok, _ := s.Release(ctx, "n", "b", b.Version); ok {
		t.Fatal("Release of an expired lease: true, want false")
	}
	c, _ := s.Acquire(ctx, "n", "c", time.Second)
	if !c.Acquired || c.Version <= b.Version {
		t.Fatalf("Acquire after expiry: %+v, want a version above %d", c, b.Version)
	}
}
