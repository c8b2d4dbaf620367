package redlock

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRequestStorage: an obtain of one name keeps its name and its key in
// the request's own storage (one, oneKey), with no slice of their own; an
// obtain of several names has its keys in a slice, in the names' order.
func TestRequestStorage(t *testing.T) {
	node := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = node.Close() })
	c, err := New([]redis.UniversalClient{node}) // New does no I/O, nor does prepare
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	key := func(name string) string {
		k, err := c.e.layout.redisKey(name)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}

	r := request{spec: &plainSpec}
	r.one[0] = "solo"
	r.names = r.one[:]
	if err := c.e.prepare(&r, time.Second, nil, true); err != nil {
		t.Fatal(err)
	}
	if len(r.keys) != 1 || &r.keys[0] != &r.oneKey[0] {
		t.Fatalf("one name: %d keys, in the request's oneKey %v; want 1, true", len(r.keys), len(r.keys) == 1 && &r.keys[0] == &r.oneKey[0])
	}
	if r.keys[0] != key("solo") {
		t.Errorf("one name: key %q, want %q", r.keys[0], key("solo"))
	}

	names := []string{"a", "b", "c"}
	r = request{names: names, spec: &plainSpec}
	if err := c.e.prepare(&r, time.Second, nil, true); err != nil {
		t.Fatal(err)
	}
	if len(r.keys) != len(names) || &r.keys[0] == &r.oneKey[0] {
		t.Fatalf("three names: %d keys, in oneKey %v; want 3 of their own", len(r.keys), &r.keys[0] == &r.oneKey[0])
	}
	for i, name := range names {
		if r.keys[i] != key(name) {
			t.Errorf("name %d: key %q, want %q", i, r.keys[i], key(name))
		}
	}
}
