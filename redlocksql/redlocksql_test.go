package redlocksql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/redistest"
	"github.com/redlock-go/redlock/redlocksql"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// backend opens a fresh database of one dialect; each call of open returns
// another *sql.DB on the same database (another process, as far as the
// database can tell).
type backend struct {
	dialect redlocksql.Dialect
	open    func(t *testing.T) func() *sql.DB
}

var backends = []backend{
	{redlocksql.SQLite, func(t *testing.T) func() *sql.DB {
		path := filepath.Join(t.TempDir(), "leases.db")
		return func() *sql.DB {
			db, err := redlocksql.OpenSQLite(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		}
	}},
	{redlocksql.Postgres, func(t *testing.T) func() *sql.DB {
		dsn := startPostgres(t)
		return func() *sql.DB {
			db, err := redlocksql.OpenPostgres(dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return db
		}
	}},
}

func newStore(t *testing.T, db *sql.DB, d redlocksql.Dialect) *redlocksql.Store {
	t.Helper()
	s, err := redlocksql.New(context.Background(), db, d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			open := b.open(t)
			db := open()
			s := newStore(t, db, b.dialect)
			s2 := newStore(t, open(), b.dialect) // a second process on the table
			ctx := context.Background()

			a, err := s.Acquire(ctx, "n", "a", time.Second)
			if err != nil || !a.Acquired || a.Version < 1 || a.Version >= redlock.MaxLeaseVersion {
				t.Fatalf("Acquire: %+v, %v", a, err)
			}
			again, err := s2.Acquire(ctx, "n", "a", time.Second)
			if err != nil || !again.Acquired || again.Version != a.Version {
				t.Fatalf("Acquire again by the owner: %+v, %v; want the same version %d", again, err, a.Version)
			}
			other, err := s2.Acquire(ctx, "n", "b", time.Second)
			if err != nil || other.Acquired || other.Remaining <= 0 || other.Remaining > time.Second {
				t.Fatalf("Acquire of a held lease: %+v, %v", other, err)
			}
			if ok, err := s2.Extend(ctx, "n", "b", a.Version, time.Second); ok || err != nil {
				t.Fatalf("Extend by another owner: %v, %v", ok, err)
			}
			if ok, err := s2.Extend(ctx, "n", "a", a.Version+1, time.Second); ok || err != nil {
				t.Fatalf("Extend of another version: %v, %v", ok, err)
			}
			if ok, err := s.Extend(ctx, "n", "a", a.Version, time.Second); !ok || err != nil {
				t.Fatalf("Extend by the owner: %v, %v", ok, err)
			}
			if ok, err := s2.Release(ctx, "n", "b", a.Version); ok || err != nil {
				t.Fatalf("Release by another owner: %v, %v; want false", ok, err)
			}
			if ok, err := s2.Release(ctx, "n", "a", a.Version+1); ok || err != nil {
				t.Fatalf("Release of another version: %v, %v; want false", ok, err)
			}
			if ok, err := s.Release(ctx, "n", "a", a.Version); !ok || err != nil {
				t.Fatalf("Release by the owner: %v, %v; want true", ok, err)
			}
			if ok, err := s.Release(ctx, "n", "a", a.Version); ok || err != nil {
				t.Fatalf("second Release: %v, %v; want false", ok, err)
			}
			if ok, _ := s.Extend(ctx, "n", "a", a.Version, time.Second); ok {
				t.Fatal("Extend after Release succeeded")
			}
			b1, err := s2.Acquire(ctx, "n", "b", 100*time.Millisecond)
			if err != nil || !b1.Acquired || b1.Version <= a.Version {
				t.Fatalf("Acquire after Release: %+v, %v; want a version above %d", b1, err, a.Version)
			}
			// It expires on its own.
			time.Sleep(300 * time.Millisecond)
			if ok, _ := s2.Extend(ctx, "n", "b", b1.Version, time.Second); ok {
				t.Fatal("Extend of an expired lease succeeded")
			}
			if ok, err := s2.Release(ctx, "n", "b", b1.Version); ok || err != nil {
				t.Fatalf("Release of an expired lease: %v, %v; want false", ok, err)
			}
			c1, err := s.Acquire(ctx, "n", "c", time.Second)
			if err != nil || !c1.Acquired || c1.Version <= b1.Version {
				t.Fatalf("Acquire after expiry: %+v, %v; want a version above %d", c1, err, b1.Version)
			}
			if ok, err := s2.Release(ctx, "n", "b", 0); ok || err != nil {
				t.Fatalf("Release by the expired owner of a lease taken by another: %v, %v; want false", ok, err)
			}
			var rows int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM lease_records").Scan(&rows); err != nil || rows != 1 {
				t.Fatalf("lease_records has %d rows (%v), want 1", rows, err)
			}
		})
	}
}

// TestStoreExcludesConcurrentAcquires races acquirers of two "processes"
// (two *sql.DB) for one name: at every moment at most one holds it.
func TestStoreExcludesConcurrentAcquires(t *testing.T) {
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			open := b.open(t)
			stores := []*redlocksql.Store{newStore(t, open(), b.dialect), newStore(t, open(), b.dialect)}
			ctx := context.Background()
			var holders, overlaps, acquired atomic.Int32
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					s := stores[w%2]
					owner := fmt.Sprintf("w%d", w)
					for range 15 {
						l, err := s.Acquire(ctx, "race", owner, 5*time.Second)
						if err != nil {
							t.Error(err)
							return
						}
						if !l.Acquired {
							time.Sleep(time.Millisecond)
							continue
						}
						acquired.Add(1)
						if holders.Add(1) > 1 {
							overlaps.Add(1)
						}
						time.Sleep(time.Millisecond)
						holders.Add(-1)
						if ok, err := s.Release(ctx, "race", owner, l.Version); !ok || err != nil {
							t.Errorf("Release: %v, %v", ok, err)
						}
					}
				})
			}
			wg.Wait()
			if overlaps.Load() != 0 || acquired.Load() == 0 {
				t.Fatalf("%d overlaps in %d acquires, want 0 in some", overlaps.Load(), acquired.Load())
			}
		})
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	db, err := redlocksql.OpenSQLite(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := redlocksql.New(ctx, nil, redlocksql.SQLite); err == nil {
		t.Error("New with a nil db succeeded")
	}
	if _, err := redlocksql.New(ctx, db, redlocksql.Dialect(9)); err == nil {
		t.Error("New with an unknown dialect succeeded")
	}
	if _, err := redlocksql.New(ctx, db, redlocksql.SQLite, redlocksql.WithTable("x; DROP TABLE y")); err == nil {
		t.Error("New with a bad table name succeeded")
	}
	if _, err := redlocksql.OpenSQLite(""); err == nil {
		t.Error("OpenSQLite with an empty path succeeded")
	}
}

// TestDegradedClientsShareStore runs two Clients that both fall back to one
// store when a majority of their Redis nodes is killed: each obtains a
// degraded lock, and they exclude each other.
func TestDegradedClientsShareStore(t *testing.T) {
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			open := b.open(t)
			servers := redistest.Start(t, 3)
			var clients []*redlock.Client
			for range 2 {
				var nodes []redis.UniversalClient
				for _, s := range servers {
					c := s.Client()
					t.Cleanup(func() { _ = c.Close() })
					nodes = append(nodes, c)
				}
				// Each Client is a process of its own: its own *sql.DB.
				store := newStore(t, open(), b.dialect)
				c, err := redlock.New(nodes, redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(150*time.Millisecond),
					redlock.WithBreaker(2, 200*time.Millisecond), redlock.WithDegradedMode(store))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				clients = append(clients, c)
			}
			for _, s := range servers[:2] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			la := obtainDegraded(t, clients[0], "job")
			for range 40 {
				if clients[1].BreakerState() != "closed" {
					break
				}
				_, _ = clients[1].TryObtain(ctx, "other", 10*time.Second)
			}
			if _, err := clients[1].TryObtain(ctx, "job", 10*time.Second); !errors.Is(err, redlock.ErrHeld) {
				t.Fatalf("second client, same store: %v, want ErrHeld", err)
			}
			// Obtain waits for the release.
			got := make(chan *redlock.Lock, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				l, err := clients[1].Obtain(wctx, "job", 10*time.Second)
				if err != nil {
					t.Errorf("Obtain of the released lock: %v", err)
				}
				got <- l
			}()
			time.Sleep(300 * time.Millisecond)
			if err := la.Release(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
			lb := <-got
			if lb != nil {
				if !lb.Degraded() || lb.Token() <= la.Token() {
					t.Fatalf("second lock: degraded %v, token %d after %d", lb.Degraded(), lb.Token(), la.Token())
				}
				_ = lb.Release(ctx)
			}
			// A lock that is not refreshed runs out, in the store too.
			short := obtainDegradedTTL(t, clients[0], "short", 300*time.Millisecond)
			<-short.Done()
			if !errors.Is(short.Err(), redlock.ErrLost) {
				t.Fatalf("degraded lock after its validity: %v, want ErrLost", short.Err())
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			l, err := clients[1].Obtain(wctx, "short", 10*time.Second)
			if err != nil || !l.Degraded() {
				t.Fatalf("Obtain after the lease ran out: %v", err)
			}
			_ = l.Release(ctx)
		})
	}
}

// obtainDegraded makes TryObtain attempts (at most 40, within 20 s) until
// one returns a lock, which must be degraded.
func obtainDegraded(t *testing.T, c *redlock.Client, name string) *redlock.Lock {
	t.Helper()
	return obtainDegradedTTL(t, c, name, 10*time.Second)
}

func obtainDegradedTTL(t *testing.T, c *redlock.Client, name string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for i := 0; i < 40 && time.Now().Before(deadline); i++ {
		var l *redlock.Lock
		if l, err = c.TryObtain(context.Background(), name, ttl); err == nil {
			if !l.Degraded() || l.Token() >= 0 {
				t.Fatalf("lock %q with a majority of nodes dead: degraded %v, token %d", name, l.Degraded(), l.Token())
			}
			return l
		}
	}
	t.Fatalf("no degraded lock %q: %v", name, err)
	return nil
}

// releaseResults is a hook that keeps the Result of each ReleaseEvent.
type releaseResults struct {
	mu  sync.Mutex
	got []string
}

func (r *releaseResults) Observe(_ context.Context, ev redlock.Event) {
	if e, ok := ev.(redlock.ReleaseEvent); ok {
		r.mu.Lock()
		r.got = append(r.got, e.Name+":"+string(e.Result))
		r.mu.Unlock()
	}
}

// TestDegradedReleaseOfATakenLeaseIsNotHeld: a degraded lock that ran out
// and was taken by another Client is released with ErrNotHeld, as on the
// nodes, and counted "not_held"; the other Client's lease is untouched.
func TestDegradedReleaseOfATakenLeaseIsNotHeld(t *testing.T) {
	for _, b := range backends {
		t.Run(b.dialect.String(), func(t *testing.T) {
			open := b.open(t)
			servers := redistest.Start(t, 3)
			hook := &releaseResults{}
			var clients []*redlock.Client
			for i := range 2 {
				var nodes []redis.UniversalClient
				for _, s := range servers {
					c := s.Client()
					t.Cleanup(func() { _ = c.Close() })
					nodes = append(nodes, c)
				}
				opts := []redlock.Option{redlock.WithRestartGuard(redlock.GuardOff), redlock.WithNodeTimeout(150 * time.Millisecond),
					redlock.WithBreaker(2, 200*time.Millisecond), redlock.WithDegradedMode(newStore(t, open(), b.dialect))}
				if i == 0 {
					opts = append(opts, redlock.WithHook(hook))
				}
				c, err := redlock.New(nodes, opts...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				clients = append(clients, c)
			}
			for _, s := range servers[:2] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			la := obtainDegradedTTL(t, clients[0], "taken", 300*time.Millisecond)
			<-la.Done()
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			lb, err := clients[1].Obtain(wctx, "taken", 10*time.Second)
			if err != nil || !lb.Degraded() {
				t.Fatalf("Obtain after the lease ran out: %v", err)
			}
			if err := la.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
				t.Fatalf("Release of a lease another Client took: %v, want ErrNotHeld", err)
			}
			hook.mu.Lock()
			got := fmt.Sprint(hook.got)
			hook.mu.Unlock()
			if got != "[taken:not_held]" {
				t.Fatalf("ReleaseEvents %s, want [taken:not_held]", got)
			}
			if err := lb.Refresh(ctx, 10*time.Second); err != nil {
				t.Fatalf("the holder's lock after the stale release: %v", err)
			}
			if err := lb.Release(ctx); err != nil {
				t.Fatalf("Release by the holder: %v", err)
			}
		})
	}
}
