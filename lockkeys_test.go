package redlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestKeyHashTag(t *testing.T) {
	layout := &keyLayout{prefix: defaultConfig().prefix}
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"order:42", "{redlock:order:42}", true},
		{"{tenant}:x", "{redlock:{tenant}:x}", true},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := layout.redisKey(tt.name)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("redisKey(%q) = %q, %v; want %q ok=%v", tt.name, got, err, tt.want, tt.ok)
		}
	}
	layout.prefix = ""
	if _, err := layout.redisKey("}x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty hash tag accepted: %v", err)
	}
}

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
