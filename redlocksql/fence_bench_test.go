package redlocksql_test

import (
	"context"
	"testing"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/redlocksql"
)

// The cost of a fence on PostgreSQL: fence.Table.Update (one UPDATE with
// the fence in its WHERE and SET) against the same UPDATE without the
// fence, each an autocommitted statement on one row of a local server.
// docs/benchmarks.md has the numbers.
func BenchmarkFencePostgresUpdate(b *testing.B) {
	dsn := startPostgres(b)
	db, err := redlocksql.OpenPostgres(dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO accounts (id, balance) VALUES (1, 0), (2, 0)`); err != nil {
		b.Fatal(err)
	}
	tbl, err := fence.NewTable("accounts", "id", "fence", fence.Dollar)
	if err != nil {
		b.Fatal(err)
	}
	var token int64 // grows across the runs of b.N
	b.Run("fenced-update", func(b *testing.B) {
		for range b.N {
			token++
			if err := tbl.Update(ctx, db, 1, fence.Token(token), "balance = balance + $1", 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-update", func(b *testing.B) {
		for range b.N {
			if _, err := db.ExecContext(ctx, `UPDATE accounts SET balance = balance + $1 WHERE id = $2`, 1, 2); err != nil {
				b.Fatal(err)
			}
		}
	})
}
