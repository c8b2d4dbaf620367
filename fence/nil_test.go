package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// noPanic runs fn and fails the test, naming what, if it panics.
func noPanic(t *testing.T, what string, fn func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
				t.Errorf("%s panicked: %v", what, p)
			}
		}()
		err = fn()
	}()
	return err
}

// TestNilInputs: a nil client, store, database, function or context, typed
// nil or not, and the zero values of the package's types, give an error
// matching ErrInvalid that names the problem, never a panic. No server is
// needed: nothing is sent.
func TestNilInputs(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	var typedNilClient *redis.Client
	var typedNilStore *MemoryStore
	var typedNilDB *sql.DB
	var typedNilTx *sql.Tx
	var nilRedis *Redis
	var nilGuard *Guard
	var nilTable *Table
	tbl, err := NewTable("accounts", "id", "fence", Dollar)
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context) error { return nil }
	unused := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialed
	t.Cleanup(func() { _ = unused.Close() })
	cases := []struct {
		name, says string
		fn         func() error
	}{
		{"NewRedis(nil).Set", "client", func() error { return NewRedis(nil).Set(ctx, "k", Token(1), "v") }},
		{"NewRedis(nil).Get", "client", func() error { _, _, err := NewRedis(nil).Get(ctx, "k", Token(1)); return err }},
		{"NewRedis(nil).GetShared", "client", func() error { _, _, err := NewRedis(nil).GetShared(ctx, "k", Token(1)); return err }},
		{"NewRedis(nil).Add", "client", func() error { _, err := NewRedis(nil).Add(ctx, "k", Token(1), 1, NoFloor); return err }},
		{"NewRedis(nil).Eval", "client", func() error { _, err := NewRedis(nil).Eval(ctx, "k", Token(1), "return 1", nil); return err }},
		{"NewRedis(nil).Inspect", "client", func() error { _, err := NewRedis(nil).Inspect(ctx, "k"); return err }},
		{"NewRedis(typed nil).Set", "client", func() error { return NewRedis(typedNilClient).Set(ctx, "k", Token(1), "v") }},
		{"NewRedis(typed nil).Inspect", "client", func() error { _, err := NewRedis(typedNilClient).Inspect(ctx, "k"); return err }},
		{"Redis{}.Set", "client", func() error { return (&Redis{}).Set(ctx, "k", Token(1), "v") }},
		{"(*Redis)(nil).Set", "nil *Redis", func() error { return nilRedis.Set(ctx, "k", Token(1), "v") }},
		{"(*Redis)(nil).Inspect", "nil *Redis", func() error { _, err := nilRedis.Inspect(ctx, "k"); return err }},
		{"Redis.Set(nil ctx)", "context", func() error { return NewRedis(unused).Set(nilCtx, "k", Token(1), "v") }},

		{"NewGuard(nil).Do", "store", func() error { return NewGuard(nil).Do(ctx, "r", Token(1), noop) }},
		{"NewGuard(typed nil).Do", "store", func() error { return NewGuard(typedNilStore).Do(ctx, "r", Token(1), noop) }},
		{"Guard{}.Do", "store", func() error { return (&Guard{}).Do(ctx, "r", Token(1), noop) }},
		{"(*Guard)(nil).Do", "nil *Guard", func() error { return nilGuard.Do(ctx, "r", Token(1), noop) }},
		{"Guard.Do(nil fn)", "function", func() error { return NewGuard(&MemoryStore{}).Do(ctx, "r", Token(1), nil) }},
		{"Guard.Do(nil ctx)", "context", func() error { return NewGuard(&MemoryStore{}).Do(nilCtx, "r", Token(1), noop) }},
		{"(*MemoryStore)(nil).Admit", "nil *MemoryStore", func() error { _, _, err := typedNilStore.Admit(ctx, "r", Token(1)); return err }},

		{"Table.Update(nil db)", "database", func() error { return tbl.Update(ctx, nil, 1, Token(1), "a = 1") }},
		{"Table.Update(typed nil db)", "database", func() error { return tbl.Update(ctx, typedNilDB, 1, Token(1), "a = 1") }},
		{"Table.Update(typed nil tx)", "database", func() error { return tbl.Update(ctx, typedNilTx, 1, Token(1), "a = 1") }},
		{"Table.Fence(nil db)", "database", func() error { return tbl.Fence(ctx, nil, 1, Token(1)) }},
		{"Table.Tx(nil db)", "database", func() error { return tbl.Tx(ctx, nil, 1, Token(1), func(*sql.Tx) error { return nil }) }},
		{"Table.Tx(typed nil db)", "database", func() error {
			return tbl.Tx(ctx, typedNilDB, 1, Token(1), func(*sql.Tx) error { return nil })
		}},
		{"Table.Tx(nil fn)", "function", func() error { return tbl.Tx(ctx, &sql.DB{}, 1, Token(1), nil) }},
		{"Table.Update(nil ctx)", "context", func() error { return tbl.Update(nilCtx, typedNilDB, 1, Token(1), "a = 1") }},
		{"Table{}.Update", "NewTable", func() error { return (&Table{}).Update(ctx, typedNilDB, 1, Token(1), "a = 1") }},
		{"(*Table)(nil).Fence", "nil *Table", func() error { return nilTable.Fence(ctx, typedNilDB, 1, Token(1)) }},
	}
	for _, tc := range cases {
		err := noPanic(t, tc.name, tc.fn)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", tc.name, err, tc.says)
		}
	}

	// The middleware answers 500 with the reason when it was given nil.
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for name, h := range map[string]func() http.Handler{
		"Middleware(nil resource)": func() http.Handler { return NewGuard(&MemoryStore{}).Middleware(nil, ok) },
		"Middleware(nil next)":     func() http.Handler { return NewGuard(&MemoryStore{}).Middleware(byPath, nil) },
		"NewGuard(nil).Middleware": func() http.Handler { return NewGuard(nil).Middleware(byPath, ok) },
	} {
		rec := httptest.NewRecorder()
		_ = noPanic(t, name, func() error {
			req := httptest.NewRequest(http.MethodPut, "/a", strings.NewReader("x"))
			req.Header.Set(TokenHeader, "1")
			h().ServeHTTP(rec, req)
			return nil
		})
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "fence: invalid argument") {
			t.Errorf("%s: %d %q, want 500 with the reason", name, rec.Code, rec.Body.String())
		}
	}
}
