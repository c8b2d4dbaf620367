package redisproc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// MigrateSlot moves a slot and its keys to another master: every master
// says the target serves it, and the cluster client reads the key there.
func TestMigrateSlot(t *testing.T) {
	c, err := StartCluster(2)
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := c.Client()
	defer cl.Close()
	const key = "{migrate}:k"
	if err := cl.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.Owner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := 1 - from
	if err := c.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Owner(ctx, slot); err != nil || got != to {
		t.Fatalf("after the move, slot %d is served by master %d (%v), want %d", slot, got, err, to)
	}
	direct := c.Servers[to].Client()
	defer direct.Close()
	if v, err := direct.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s on the new owner: %q, %v", key, v, err)
	}
	if v, err := cl.Get(ctx, key).Result(); err != nil || v != "v" {
		t.Fatalf("GET %s through the cluster client: %q, %v", key, v, err)
	}
	if err := c.MigrateSlot(ctx, slot, to); err != nil {
		t.Fatalf("moving a slot to its owner: %v", err)
	}
	if err := c.MigrateSlot(ctx, 16384, to); err == nil {
		t.Fatal("a slot out of range was moved")
	}
}
