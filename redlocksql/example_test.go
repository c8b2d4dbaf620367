package redlocksql_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/redlock-go/redlock/redlocksql"
)

// A lease store in an SQLite file: every process of the host that opens
// the file shares its leases. Give it to redlock.New with
// redlock.WithDegradedMode(store); the Client takes leases only while its
// circuit breaker is open.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "leases")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := redlocksql.OpenSQLite(filepath.Join(dir, "leases.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	store, err := redlocksql.New(ctx, db, redlocksql.SQLite)
	if err != nil {
		log.Fatal(err)
	}

	// What a Client does with it: owners are the locks' random values.
	a, err := store.Acquire(ctx, "redlock:report", "owner-a", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	b, err := store.Acquire(ctx, "redlock:report", "owner-b", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a:", a.Acquired, "b:", b.Acquired, "b waits about 10s:", b.Remaining > 9*time.Second)
	if ok, err := store.Release(ctx, "redlock:report", "owner-a", a.Version); err != nil || !ok {
		log.Fatal("release: ", ok, err)
	}
	b, err = store.Acquire(ctx, "redlock:report", "owner-b", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a's release, b:", b.Acquired, "with a higher version:", b.Version > a.Version)
	// Output:
	// a: true b: false b waits about 10s: true
	// after a's release, b: true with a higher version: true
}
