package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/goredis"
	"github.com/redlock-go/redlock/internal/limits"
)

// nilHook is a Hook whose typed nil would panic when observed.
type nilHook struct{ n int }

func (h *nilHook) Observe(context.Context, Event) { h.n++ }

// Every nil or typed-nil input of New, NewFromNodes, the options and the
// handles is refused with ErrInvalid, and nothing panics, at New or at the
// first obtain.
func TestInvalidNilInputs(t *testing.T) {
	cl := startNodes(t, 1)
	nodes := cl.clients
	var nilLeases *localLeases
	var nilOption Option
	cases := []struct {
		name string
		new  func() (*Client, error)
	}{
		{"New typed nil *redis.Client", func() (*Client, error) {
			return New([]redis.UniversalClient{(*redis.Client)(nil)})
		}},
		{"New typed nil *redis.ClusterClient", func() (*Client, error) {
			return New([]redis.UniversalClient{nodes[0], (*redis.ClusterClient)(nil)})
		}},
		{"New nil client", func() (*Client, error) { return New([]redis.UniversalClient{nil}) }},
		{"NewFromNodes nil node", func() (*Client, error) { return NewFromNodes([]driver.Node{nil}) }},
		{"NewFromNodes typed nil node", func() (*Client, error) {
			return NewFromNodes([]driver.Node{goredis.New(nodes[0]), (*nilNode)(nil)})
		}},
		{"nil option", func() (*Client, error) { return New(nodes, nilOption) }},
		{"WithClock(nil)", func() (*Client, error) { return New(nodes, WithClock(nil)) }},
		{"WithHook(nil)", func() (*Client, error) { return New(nodes, WithHook(nil)) }},
		{"WithHook(typed nil)", func() (*Client, error) { return New(nodes, WithHook((*nilHook)(nil))) }},
		{"JoinHooks with nil", func() (*Client, error) { return New(nodes, WithHook(JoinHooks(&nilHook{}, nil))) }},
		{"JoinHooks with typed nil", func() (*Client, error) {
			return New(nodes, WithHook(JoinHooks((*nilHook)(nil))))
		}},
		{"WithDegradedMode(nil)", func() (*Client, error) { return New(nodes, WithDegradedMode(nil)) }},
		{"WithDegradedMode(typed nil)", func() (*Client, error) { return New(nodes, WithDegradedMode(nilLeases)) }},
		{"WithBackoff(nil)", func() (*Client, error) { return New(nodes, WithBackoff(nil)) }},
		{"WithMaxTTL above the bound", func() (*Client, error) { return New(nodes, WithMaxTTL(limits.MaxMaxTTL+time.Millisecond)) }},
		{"WithMaxTTL(MaxInt64)", func() (*Client, error) { return New(nodes, WithMaxTTL(1<<63-1)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panicked: %v", p)
				}
			}()
			c, err := tc.new()
			if c != nil {
				// Accepted: the first obtain must not panic either.
				defer c.Close()
				l, oerr := c.TryObtain(context.Background(), "x", time.Second)
				_ = l.Release(context.Background())
				t.Fatalf("accepted (first obtain: %v), want ErrInvalid", oerr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	}

	// The handles' and the Client's calls.
	c := newClient(t, nodes)
	var nilCtx context.Context
	var nilObtainOption ObtainOption
	calls := []struct {
		name string
		call func() error
	}{
		{"Obtain nil context", func() error { _, err := c.Obtain(nilCtx, "x", time.Second); return err }},
		{"TryObtain nil context", func() error { _, err := c.TryObtain(nilCtx, "x", time.Second); return err }},
		{"Do nil context", func() error { return c.Do(nilCtx, "x", time.Second, func(context.Context) error { return nil }) }},
		{"Mutex Obtain nil context", func() error { _, err := c.Mutex("x").Obtain(nilCtx, time.Second); return err }},
		{"Semaphore TryObtain nil context", func() error { _, err := c.Semaphore("s", 2).TryObtain(nilCtx, time.Second); return err }},
		{"All Obtain nil context", func() error { _, err := c.All("a", "b").Obtain(nilCtx, time.Second); return err }},
		{"Any Do nil context", func() error {
			return c.Any("a", "b").Do(nilCtx, time.Second, func(context.Context) error { return nil })
		}},
		{"Resume nil context", func() error {
			// A well-formed form: only the context is wrong.
			form := fmt.Sprintf(`{"v":1,"prefix":%q,"nodes":%d,"name":"x","kind":"plain","secret":"s","token":1,"ttl_ms":1000}`, c.e.cfg.prefix, len(nodes))
			_, err := c.Resume(nilCtx, []byte(form))
			return err
		}},
		{"nil obtain option", func() error { _, err := c.Obtain(context.Background(), "x", time.Second, nilObtainOption); return err }},
		{"Do nil function", func() error { return c.Do(context.Background(), "x", time.Second, nil) }},
		{"Mutex Do nil function", func() error { return c.Mutex("x").Do(context.Background(), time.Second, nil) }},
		{"WithBackoff(nil) on an obtain", func() error { _, err := c.Obtain(context.Background(), "x", time.Second, WithBackoff(nil)); return err }},
		{"Reentrant empty owner", func() error { _, err := c.Reentrant("x", "").Obtain(context.Background(), time.Second); return err }},
		{"Semaphore of 0", func() error { _, err := c.Semaphore("x", 0).Obtain(context.Background(), time.Second); return err }},
		{"All of none", func() error { _, err := c.All().Obtain(context.Background(), time.Second); return err }},
		{"Any of none", func() error { _, err := c.Any().Obtain(context.Background(), time.Second); return err }},
		{"Refresh nil context", func() error {
			l, err := c.Obtain(context.Background(), "r", time.Second)
			if err != nil {
				return err
			}
			defer l.Release(context.Background())
			return l.Refresh(nilCtx, time.Second)
		}},
	}
	// A nil context given to Release counts as context.Background(): the
	// lock is released, not left held.
	l, err := c.Obtain(context.Background(), "nil-release", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(nilCtx); err != nil {
		t.Fatalf("Release(nil): %v", err)
	}
	if l2, err := c.TryObtain(context.Background(), "nil-release", time.Second); err != nil {
		t.Fatalf("TryObtain after Release(nil): %v", err)
	} else {
		_ = l2.Release(context.Background())
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panicked: %v", p)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v, want ErrInvalid", err)
			}
		})
	}
}

// nilNode is a driver.Node of the test's own, for its typed nil.
type nilNode struct{ driver.Node }

// oddClient is a redis.UniversalClient of a type that cannot be compared
// with ==: New must not panic comparing two of them.
type oddClient struct {
	redis.UniversalClient
	tags []string
}

func TestNewUncomparableClientsDoNotPanic(t *testing.T) {
	cl := startNodes(t, 1)
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("New panicked: %v", p)
		}
	}()
	// Two wrappers of one client: whether New tells them apart is the
	// business of its same-server check; here it must only not panic.
	a, b := oddClient{cl.clients[0], nil}, oddClient{cl.clients[0], []string{"b"}}
	c, err := New([]redis.UniversalClient{a, b})
	if err == nil {
		_ = c.Close()
	}
}
