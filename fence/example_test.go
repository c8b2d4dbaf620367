package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/internal/redistest"
)

// A holder that lost its lock (token 41) writes after the next holder (42):
// refused.
func ExampleRedis_Set() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()

	fmt.Println(r.Set(ctx, "account:7", fence.Token(42), "balance=90"))
	err := r.Set(ctx, "account:7", fence.Token(41), "balance=150")
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	// Output:
	// <nil>
	// true fence: account:7: stale token 41: the resource has seen token 42
}

// A read-modify-write reads with its token: a holder that read earlier with
// an older token can no longer write.
func ExampleRedis_Get() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()
	_ = r.Set(ctx, "doc", fence.Token(10), "v1")

	v, _, _ := r.Get(ctx, "doc", fence.Token(11)) // holder 11 reads, then stalls
	fmt.Println(v)
	v, _, _ = r.Get(ctx, "doc", fence.Token(12)) // holder 12 reads and writes
	_ = r.Set(ctx, "doc", fence.Token(12), v+"+12")
	fmt.Println(r.Set(ctx, "doc", fence.Token(11), v+"+11")) // holder 11 wakes up
	// Output:
	// v1
	// fence: doc: stale token 11: the resource has seen token 12
}

// A stock decremented by current holders only, never below zero.
func ExampleRedis_Add() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()

	_, _ = r.Add(ctx, "stock:sku1", fence.Token(1), 2, fence.NoFloor) // two in stock
	for token := int64(2); token <= 4; token++ {
		n, err := r.Add(ctx, "stock:sku1", fence.Token(token), -1, 0)
		fmt.Println(n, err)
	}
	// Output:
	// 1 <nil>
	// 0 <nil>
	// 0 fence: stock:sku1: counter 0-1 would be below its floor 0
}

// The caller's own script, run only under a current token. With Redis
// Cluster, the fence's key and the script's keys share a hash tag.
func ExampleRedis_Eval() {
	nodes, stop := redistest.ExampleNodes(1)
	defer stop()
	r := fence.NewRedis(nodes[0])
	ctx := context.Background()
	const enqueue = `return redis.call('RPUSH', KEYS[1], ARGV[1])`

	n, err := r.Eval(ctx, "{jobs}:fence", fence.Token(7), enqueue, []string{"{jobs}:queue"}, "job-a")
	fmt.Println(n, err)
	_, err = r.Eval(ctx, "{jobs}:fence", fence.Token(6), enqueue, []string{"{jobs}:queue"}, "job-b")
	fmt.Println(err)
	// Output:
	// 1 <nil>
	// fence: {jobs}:fence: stale token 6: the resource has seen token 7
}

// A fenced UPDATE on PostgreSQL (fence.Question for SQLite and MySQL). The
// row carries its fence: see Table for the schema.
func ExampleTable_Update() {
	var db *sql.DB // sql.Open("pgx", dsn)
	var token int64 = 42
	accounts, err := fence.NewTable("accounts", "id", "fence", fence.Dollar)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	err = accounts.Update(ctx, db, 7, fence.Token(token), "balance = balance - $1", 10)
	if errors.Is(err, fence.ErrStale) {
		log.Print("lost the lock: ", err) // nothing was written
	}
}

// A read-then-write in one transaction: the row is fenced (and locked)
// first, then read and written.
func ExampleTable_Tx() {
	var db *sql.DB // sql.Open("pgx", dsn)
	var token int64 = 42
	accounts, err := fence.NewTable("accounts", "id", "fence", fence.Dollar)
	if err != nil {
		log.Fatal(err)
	}
	err = accounts.Tx(context.Background(), db, 7, fence.Token(token), func(tx *sql.Tx) error {
		var balance int64
		if err := tx.QueryRow(`SELECT balance FROM accounts WHERE id = $1`, 7).Scan(&balance); err != nil {
			return err
		}
		_, err := tx.Exec(`UPDATE accounts SET balance = $1 WHERE id = $2`, balance*2, 7)
		return err
	})
	if errors.Is(err, fence.ErrStale) {
		log.Print("lost the lock: ", err) // the transaction was rolled back
	}
}

// An HTTP service that refuses the requests of a holder that lost its lock:
// the client sends its token in the Fencing-Token header. A path has many
// spellings (//, ., .., a trailing /) that reach one file: the resource is
// the cleaned path (CleanPath), one name for all of them, or each spelling
// would have a fence of its own and a stale token would pass through the
// next one. The handler stores under the same name.
func ExampleGuard_Middleware() {
	put := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "stored", fence.CleanPath(r))
	})
	g := fence.NewGuard(&fence.MemoryStore{})
	srv := httptest.NewServer(g.Middleware(fence.CleanPath, put))
	defer srv.Close()
	defer http.DefaultClient.CloseIdleConnections()

	for _, req := range []struct{ path, token string }{
		{"/reports/q3", "42"},
		{"/reports/q3", "41"},
		{"/reports//q3", "41"},
		{"/reports/./q3", "41"},
		{"/reports/q3/", "41"},
		{"/reports/x/../q3", "41"},
	} {
		r, _ := http.NewRequest(http.MethodPut, srv.URL+req.path, strings.NewReader("Q3 figures"))
		r.Header.Set(fence.TokenHeader, req.token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(body))
	}
	// Output:
	// 200 stored /reports/q3
	// 409 fence: /reports/q3: stale token 41: the resource has seen token 42
	// 409 fence: /reports/q3: stale token 41: the resource has seen token 42
	// 409 fence: /reports/q3: stale token 41: the resource has seen token 42
	// 409 fence: /reports/q3: stale token 41: the resource has seen token 42
	// 409 fence: /reports/q3: stale token 41: the resource has seen token 42
}
