package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestSequencerText(t *testing.T) {
	for _, tc := range []struct {
		s    Sequencer
		text string
	}{
		{Sequencer{Lock: "orders", Kind: "plain", Token: 1838866269518849}, "plain:1838866269518849:orders"},
		{Sequencer{Lock: "a:b c%d\n", Kind: "write", Token: 7}, "write:7:a:b%20c%25d%0A"},
		{Sequencer{Lock: "été", Kind: "permit", Token: -3}, "permit:-3:%C3%A9t%C3%A9"},
		{Token(42), "42"},
		{Token(math.MinInt64), "-9223372036854775808"},
	} {
		if got := tc.s.String(); got != tc.text {
			t.Errorf("%+v.String() = %q, want %q", tc.s, got, tc.text)
		}
		back, err := ParseSequencer(tc.text)
		if err != nil || back != tc.s {
			t.Errorf("ParseSequencer(%q) = %+v, %v, want %+v", tc.text, back, err, tc.s)
		}
	}
	for _, bad := range []string{
		"", "x", "+5", "05", "plain:5", "plain:5:", "Plain:5:a", "pla1n:5:a", ":5:a",
		"plain:x:a", "plain:05:a", "plain:5:a b", "plain:5:%4", "plain:5:%zz", "plain:5:%61",
		"plain:99999999999999999999:a",
	} {
		if s, err := ParseSequencer(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSequencer(%q) = %+v, %v, want ErrInvalid", bad, s, err)
		}
	}
}

// TestZeroTokenRefused is finding 8 of issue 46: a lock of several names
// (redlock's Client.All) has token 0 of its own, and a caller who fenced
// with it fenced nothing: every fence accepted 0. Each refuses it now
// with ErrInvalid, pointing to Lock.Parts, and changes nothing.
func TestZeroTokenRefused(t *testing.T) {
	r, c := newRedis(t)
	ctx := context.Background()
	tbl, err := NewTable("accounts", "id", "fence", Dollar)
	if err != nil {
		t.Fatal(err)
	}
	g := NewGuard(&MemoryStore{})
	ran := false
	for name, fn := range map[string]func(Sequencer) error{
		"Redis.Set":    func(s Sequencer) error { return r.Set(ctx, "k", s, "v") },
		"Redis.Get":    func(s Sequencer) error { _, _, err := r.Get(ctx, "k", s); return err },
		"Redis.Add":    func(s Sequencer) error { _, err := r.Add(ctx, "k", s, 1, NoFloor); return err },
		"Redis.Eval":   func(s Sequencer) error { _, err := r.Eval(ctx, "k", s, "return 1", nil); return err },
		"Table.Update": func(s Sequencer) error { return tbl.Update(ctx, unsent{}, 1, s, "a = 1") },
		"Guard.Do": func(s Sequencer) error {
			return g.Do(ctx, "r", s, func(context.Context) error { ran = true; return nil })
		},
	} {
		for _, s := range []Sequencer{{}, {Lock: "orders", Kind: "plain"}} {
			err := fn(s)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Parts") {
				t.Errorf("%s(%+v) = %v, want ErrInvalid pointing to Lock.Parts", name, s, err)
			}
		}
	}
	if ran {
		t.Error("Guard.Do ran its function under token 0")
	}
	if n := c.Exists(ctx, "k").Val(); n != 0 {
		t.Errorf("a call with token 0 wrote the record: EXISTS k = %d", n)
	}
}

// unsent is an Execer whose statements fail: a statement that should not
// have been sent.
type unsent struct{}

func (unsent) ExecContext(context.Context, string, ...any) (sql.Result, error) {
	return nil, errors.New("a statement was sent")
}

func (unsent) QueryRowContext(context.Context, string, ...any) *sql.Row { return nil }

// TestOtherLockRefused: a resource records the lock it follows, and a
// sequencer of another lock is refused, however high its token: issue
// 46's "a newer token of another lock passes". So is a bare token, once
// the resource follows a lock.
func TestOtherLockRefused(t *testing.T) {
	r, _ := newRedis(t)
	ctx := context.Background()
	a := Sequencer{Lock: "orders", Kind: "plain", Token: 10}
	if err := r.Set(ctx, "acct", a, "a"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sequencer{
		{Lock: "invoices", Kind: "plain", Token: 20},
		{Lock: "orders2", Kind: "write", Token: 20},
		Token(20),
	} {
		if err := r.Set(ctx, "acct", s, "b"); !errors.Is(err, ErrOtherLock) || !strings.Contains(err.Error(), `"orders"`) {
			t.Errorf("Set(%v) on a record that follows %q: %v, want ErrOtherLock naming it", s, a.Lock, err)
		}
	}
	st, err := r.Inspect(ctx, "acct")
	if err != nil || st.Value != "a" || st.Fence != 10 || st.Lock != "orders" || st.Refused != 3 {
		t.Fatalf("Inspect = %+v, %v, want value a, fence 10, lock orders, 3 refused", st, err)
	}
	// A name with any byte comes back whole in the error.
	odd := Sequencer{Lock: "a b\n\x00é", Kind: "plain", Token: 5}
	if err := r.Set(ctx, "odd", odd, "x"); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "odd", Sequencer{Lock: "c", Kind: "plain", Token: 6}, "y"); !errors.Is(err, ErrOtherLock) || !strings.Contains(err.Error(), fmt.Sprintf("%q", odd.Lock)) {
		t.Errorf("Set of another lock on a record of %q: %v", odd.Lock, err)
	}
	// The reader of the same read-write lock follows the same lock.
	if _, _, err := r.GetShared(ctx, "acct", Sequencer{Lock: "orders", Kind: "read", Token: 11}); err != nil {
		t.Fatalf("GetShared of the same lock's reader: %v", err)
	}
	g := NewGuard(&MemoryStore{})
	noop := func(context.Context) error { return nil }
	if err := g.Do(ctx, "r", a, noop); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sequencer{{Lock: "invoices", Kind: "plain", Token: 20}, Token(20)} {
		if err := g.Do(ctx, "r", s, noop); !errors.Is(err, ErrOtherLock) {
			t.Errorf("Guard.Do(%v) on a resource that follows %q: %v, want ErrOtherLock", s, a.Lock, err)
		}
	}
}
