package redlock

import (
	"context"
	"testing"
	"time"
)

// A lock keeps its key only and reads its name back from it: the name
// comes back whole with a prefix, with braces and colons in the name, for
// each part of a lock of several names, and in the events.
func TestNameReadBackFromKey(t *testing.T) {
	cl := startNodes(t, 1)
	var rec eventRecorder
	c := newClient(t, cl.clients, WithPrefix("app:{x}:"), WithHook(&rec))
	ctx := context.Background()
	for _, name := range []string{"a", "order:42", "{tag}:x}", "é"} {
		l, err := c.TryObtain(ctx, name, 10*time.Second)
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if got := l.Name(); got != name {
			t.Errorf("Name() = %q, want %q", got, name)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		got := rec.releases[len(rec.releases)-1].Name
		rec.mu.Unlock()
		if got != name {
			t.Errorf("ReleaseEvent.Name = %q, want %q", got, name)
		}
	}
	all, err := c.All("p2", "p1").TryObtain(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Release(ctx)
	if all.Name() != "" {
		t.Errorf("a lock of several names: Name() = %q, want \"\"", all.Name())
	}
	parts := all.Parts()
	if len(parts) != 2 || parts[0].Name() != "p1" || parts[1].Name() != "p2" {
		t.Errorf("parts named %q, %q; want p1, p2", parts[0].Name(), parts[1].Name())
	}
}
