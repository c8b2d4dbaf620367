package redlocksql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/redlocksql"
)

// lockTable opens a fresh database of b with the accounts table of
// fencedAccounts and a column of the lock a row follows (NULL, as after
// ALTER TABLE … ADD COLUMN), and returns it with a Table that keeps it.
func lockTable(t *testing.T, b backend) (*sql.DB, *fence.Table, string) {
	t.Helper()
	db := b.open(t)()
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0, fence_lock TEXT)`,
		`INSERT INTO accounts (id, balance) VALUES (1, 100)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	ph, set := fence.Dollar, "balance = $1"
	if b.dialect == redlocksql.SQLite {
		ph, set = fence.Question, "balance = ?"
	}
	tbl, err := fence.NewTable("accounts", "id", "fence", ph, fence.LockColumn("fence_lock"))
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl, set
}

// TestFenceTableLockColumn: with LockColumn, a row records the lock of its
// first sequencer and refuses another lock's, and a bare token, with
// ErrOtherLock, whatever their tokens, in Update, Fence and Tx; the same
// lock's reader passes. Without it (the control) the other lock's newer
// token is accepted.
func TestFenceTableLockColumn(t *testing.T) {
	orders := fence.Sequencer{Lock: "orders", Kind: "write", Token: 10}
	other := fence.Sequencer{Lock: "invoices", Kind: "plain", Token: 20}
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			db, tbl, set := lockTable(t, b)
			ctx := context.Background()
			if err := tbl.Update(ctx, db, 1, orders, set, 90); err != nil {
				t.Fatal(err)
			}
			var lock sql.NullString
			if err := db.QueryRow(`SELECT fence_lock FROM accounts WHERE id = 1`).Scan(&lock); err != nil || lock.String != "orders" {
				t.Fatalf("fence_lock = %v, %v; want orders", lock, err)
			}
			for name, run := range map[string]func(fence.Sequencer) error{
				"Update": func(s fence.Sequencer) error { return tbl.Update(ctx, db, 1, s, set, 0) },
				"Fence":  func(s fence.Sequencer) error { return tbl.Fence(ctx, db, 1, s) },
				"Tx":     func(s fence.Sequencer) error { return tbl.Tx(ctx, db, 1, s, func(*sql.Tx) error { return nil }) },
			} {
				for _, s := range []fence.Sequencer{other, fence.Token(30)} {
					if err := run(s); !errors.Is(err, fence.ErrOtherLock) {
						t.Errorf("%s(%v) on a row of lock orders: %v, want ErrOtherLock", name, s, err)
					}
				}
			}
			if bal, fen := balance(t, db); bal != 90 || fen != 10 {
				t.Fatalf("balance %d, fence %d after the refusals; want 90, 10", bal, fen)
			}
			reader := fence.Sequencer{Lock: "orders", Kind: "read", Token: 11}
			if err := tbl.Fence(ctx, db, 1, reader); err != nil {
				t.Fatalf("Fence of the same lock's reader: %v", err)
			}
			ph := fence.Dollar
			if b.dialect == redlocksql.SQLite {
				ph = fence.Question
			}
			plain, err := fence.NewTable("accounts", "id", "fence", ph)
			if err != nil {
				t.Fatal(err)
			}
			if err := plain.Update(ctx, db, 1, other, set, 0); err != nil {
				t.Fatalf("a Table without LockColumn (the control): %v, want the other lock's newer token accepted", err)
			}
		})
	}
	if _, err := fence.NewTable("accounts", "id", "fence", fence.Dollar, fence.LockColumn("x; DROP TABLE accounts")); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("LockColumn with a statement: %v, want ErrInvalid", err)
	}
}

// TestFenceTableReset: a row's fence poisoned by a token no holder has is
// reset, with its lock column, and the real holder writes again while a
// stale one stays refused; on a NOT NULL fence column, a reset to
// fence.Token(1) forgets the fence and the lock (the zero Sequencer would
// write NULL); a missing row is sql.ErrNoRows.
func TestFenceTableReset(t *testing.T) {
	orders := fence.Sequencer{Lock: "orders", Kind: "plain", Token: 10}
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			db, tbl, set := lockTable(t, b)
			ctx := context.Background()
			poison := fence.Sequencer{Lock: "orders", Kind: "plain", Token: 1<<63 - 1}
			if err := tbl.Fence(ctx, db, 1, poison); err != nil {
				t.Fatal(err)
			}
			if err := tbl.Update(ctx, db, 1, orders, set, 90); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("the holder on a poisoned row: %v, want ErrStale", err)
			}
			if err := tbl.Reset(ctx, db, 1, orders); err != nil {
				t.Fatal(err)
			}
			if err := tbl.Update(ctx, db, 1, orders, set, 90); err != nil {
				t.Errorf("the holder after the reset: %v", err)
			}
			stale := fence.Sequencer{Lock: "orders", Kind: "plain", Token: 9}
			if err := tbl.Update(ctx, db, 1, stale, set, 0); !errors.Is(err, fence.ErrStale) {
				t.Errorf("a stale holder after the reset: %v, want ErrStale", err)
			}
			if err := tbl.Reset(ctx, db, 1, fence.Token(1)); err != nil {
				t.Fatal(err)
			}
			var f sql.NullInt64
			var l sql.NullString
			if err := db.QueryRow(`SELECT fence, fence_lock FROM accounts WHERE id = 1`).Scan(&f, &l); err != nil || f.Int64 != 1 || l.Valid {
				t.Errorf("after a reset to Token(1): fence %v, lock %v, %v; want 1 and NULL", f, l, err)
			}
			if err := tbl.Fence(ctx, db, 1, fence.Sequencer{Lock: "invoices", Kind: "plain", Token: 2}); err != nil {
				t.Errorf("another lock after a reset to Token(1): %v", err)
			}
			if err := tbl.Reset(ctx, db, 2, orders); !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("Reset of a missing row: %v, want sql.ErrNoRows", err)
			}
		})
	}
}
