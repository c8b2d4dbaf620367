package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
)

// Nil nodes, typed nils behind the interfaces included, are refused with
// ErrInvalid and an error that says which node is nil; nothing panics. No
// server is needed: New and NewFromNodes do no I/O.
func TestNilNodesAreInvalid(t *testing.T) {
	live := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = live.Close() })
	for _, c := range []struct {
		name  string
		nodes []redis.UniversalClient
	}{
		{"nil interface", []redis.UniversalClient{nil}},
		{"(*redis.Client)(nil)", []redis.UniversalClient{(*redis.Client)(nil)}},
		{"(*redis.ClusterClient)(nil)", []redis.UniversalClient{live, (*redis.ClusterClient)(nil)}},
		{"(*redis.Ring)(nil)", []redis.UniversalClient{(*redis.Ring)(nil)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := New(c.nodes)
			if err == nil {
				_ = cl.Close()
				t.Fatal("New accepted a nil client")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("New: %v, want ErrInvalid naming the nil client", err)
			}
		})
	}
	for _, c := range []struct {
		name  string
		nodes []driver.Node
	}{
		{"nil driver.Node", []driver.Node{nil}},
		{"(*goredis.Node)(nil)", []driver.Node{(*goredis.Node)(nil)}},
		{"goredis.New of a typed nil", []driver.Node{goredis.New(live), goredis.New((*redis.Client)(nil))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := NewFromNodes(c.nodes)
			if err == nil {
				_ = cl.Close()
				t.Fatal("NewFromNodes accepted a nil node")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nil") {
				t.Fatalf("NewFromNodes: %v, want ErrInvalid naming the nil node", err)
			}
		})
	}
}
