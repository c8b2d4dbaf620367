// Package redlocksql is a lease store for the degraded mode of redlock
// (redlock.WithDegradedMode) in a SQL database, through database/sql: an
// embedded SQLite file (the pure-Go modernc.org/sqlite driver, no cgo), or
// a PostgreSQL server shared by a fleet (the jackc/pgx driver). It lives in
// a module of its own, so that the redlock module depends on neither.
//
//	db, err := redlocksql.OpenSQLite("/var/lib/myapp/leases.db")
//	store, err := redlocksql.New(ctx, db, redlocksql.SQLite)
//	c, err := redlock.New(nodes, redlock.WithDegradedMode(store))
//
// # The table
//
// One row per lock name, in the table lease_records (WithTable):
//
//	name    TEXT PRIMARY KEY  the lock's name, with the Client's prefix
//	owner   TEXT              the holder's random value (128 bits)
//	expiry  BIGINT            milliseconds since 1970 on the database's clock
//	version BIGINT            the lease's version: its token
//
// Every write is one statement, atomic on its row: an acquire is an
// INSERT … ON CONFLICT DO UPDATE that takes the row only when its lease has
// expired or is already the owner's (then it extends it and keeps its
// version, so a retried acquire is idempotent). A new lease gets the row's
// version + 1 (a new row: the clock in milliseconds × 1024), so versions
// of a name only increase. Leases expire on their own: a row whose expiry
// has passed is free, nothing needs to delete it; a release sets the
// expiry to 0 and keeps the row for its version.
//
// Expiry is read on the database's clock: PostgreSQL's now(), SQLite's
// julianday('now') (the host's clock, shared by every process that opens
// the file).
//
// # What it excludes
//
// A SQLite file excludes only the processes that share it on one host; a
// PostgreSQL database excludes the clients that all fell back to it. No
// store excludes a client that still reaches a quorum of Redis nodes: see
// docs/safety.md in the redlock repository.
package redlocksql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redlock-go/redlock"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// Dialect is the SQL dialect of a Store's database.
type Dialect int

const (
	// SQLite is an SQLite database (modernc.org/sqlite, driver "sqlite").
	SQLite Dialect = iota + 1
	// Postgres is a PostgreSQL database (jackc/pgx, driver "pgx").
	Postgres
)

// String returns "sqlite" or "postgres".
func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// DefaultTable is the name of the lease table.
const DefaultTable = "lease_records"

// Option configures a Store.
type Option interface {
	apply(*Store)
}

type option func(*Store)

func (f option) apply(s *Store) { f(s) }

// WithTable sets the name of the lease table: letters, digits and
// underscores, not starting with a digit. Default DefaultTable.
func WithTable(name string) Option {
	return option(func(s *Store) { s.table = name })
}

// Store is a redlock.LeaseStore in a SQL table. It is safe for concurrent
// use. It does not own its *sql.DB: close it after the Clients that use the
// Store.
type Store struct {
	db      *sql.DB
	dialect Dialect
	table   string

	acquire, holder, extend, release string
}

var _ redlock.LeaseStore = (*Store)(nil)

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// New returns a Store on db, creating its table when it does not exist.
// It returns an error when db is nil, the dialect or table name is not
// valid, or the table cannot be created.
func New(ctx context.Context, db *sql.DB, d Dialect, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("redlocksql: nil *sql.DB")
	}
	s := &Store{db: db, dialect: d, table: DefaultTable}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlocksql: nil option")
		}
		o.apply(s)
	}
	if d != SQLite && d != Postgres {
		return nil, fmt.Errorf("redlocksql: unknown dialect %v: use SQLite or Postgres", d)
	}
	if !identifier.MatchString(s.table) {
		return nil, fmt.Errorf("redlocksql: table name %q: use letters, digits and underscores, not starting with a digit", s.table)
	}
	s.prepare()
	create := "CREATE TABLE IF NOT EXISTS " + s.table + ` (
	name    TEXT PRIMARY KEY,
	owner   TEXT NOT NULL,
	expiry  BIGINT NOT NULL,
	version BIGINT NOT NULL
)`
	if _, err := db.ExecContext(ctx, create); err != nil {
		// Two processes creating the table at once: PostgreSQL may refuse
		// the second. The table is there all the same.
		if _, qerr := db.ExecContext(ctx, "SELECT 1 FROM "+s.table+" WHERE 1 = 0"); qerr != nil {
			return nil, fmt.Errorf("redlocksql: create table %s: %w", s.table, err)
		}
	}
	return s, nil
}

// prepare writes the dialect's statements. $1… are the parameters;
// SQLite numbers them ?1….
func (s *Store) prepare() {
	now := "(CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT))"
	bigger := "GREATEST"
	if s.dialect == SQLite {
		now = "(CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER))"
		bigger = "MAX"
	}
	q := func(sql string) string {
		sql = strings.ReplaceAll(sql, "NOW_MS", now)
		sql = strings.ReplaceAll(sql, "BIGGER", bigger)
		sql = strings.ReplaceAll(sql, "TABLE", s.table)
		if s.dialect == SQLite {
			sql = strings.ReplaceAll(sql, "$", "?")
			sql = strings.ReplaceAll(sql, "::BIGINT", "")
		}
		return sql
	}
	s.acquire = q(`INSERT INTO TABLE AS r (name, owner, expiry, version)
VALUES ($1, $2, NOW_MS + $3::BIGINT, NOW_MS * 1024)
ON CONFLICT (name) DO UPDATE SET
	owner = excluded.owner,
	expiry = excluded.expiry,
	version = CASE WHEN r.owner = excluded.owner AND r.expiry > NOW_MS THEN r.version ELSE r.version + 1 END
WHERE r.owner = excluded.owner OR r.expiry <= NOW_MS
RETURNING version`)
	s.holder = q(`SELECT expiry - NOW_MS FROM TABLE WHERE name = $1`)
	s.extend = q(`UPDATE TABLE SET expiry = BIGGER(expiry, NOW_MS + $4::BIGINT)
WHERE name = $1 AND owner = $2 AND version = $3::BIGINT AND expiry > NOW_MS`)
	s.release = q(`UPDATE TABLE SET expiry = 0
WHERE name = $1 AND owner = $2 AND ($3::BIGINT = 0 OR version = $3::BIGINT) AND expiry > NOW_MS`)
}

// Acquire implements redlock.LeaseStore: one upsert, which takes the row
// when its lease has expired or is owner's.
func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (redlock.Lease, error) {
	var version int64
	err := s.db.QueryRowContext(ctx, s.acquire, name, owner, ttl.Milliseconds()).Scan(&version)
	switch {
	case err == nil:
		return redlock.Lease{Acquired: true, Version: version}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return redlock.Lease{}, fmt.Errorf("redlocksql: acquire %q: %w", name, err)
	}
	// Held by another owner: say for how long.
	var left int64
	if err := s.db.QueryRowContext(ctx, s.holder, name).Scan(&left); err != nil {
		return redlock.Lease{Remaining: -1}, nil
	}
	return redlock.Lease{Remaining: time.Duration(max(left, 0)) * time.Millisecond}, nil
}

// Extend implements redlock.LeaseStore. It never shortens a lease.
func (s *Store) Extend(ctx context.Context, name, owner string, version int64, ttl time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.extend, name, owner, version, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("redlocksql: extend %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("redlocksql: extend %q: %w", name, err)
	}
	return n == 1, nil
}

// Release implements redlock.LeaseStore: the live lease's expiry becomes
// 0, and its row stays, for its version. Version 0 matches any version of
// owner. It returns false when owner holds no live lease of name (it
// expired, was released, or is another owner's): no row changes then.
func (s *Store) Release(ctx context.Context, name, owner string, version int64) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.release, name, owner, version)
	if err != nil {
		return false, fmt.Errorf("redlocksql: release %q: %w", name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("redlocksql: release %q: %w", name, err)
	}
	return n == 1, nil
}

// OpenSQLite opens the SQLite database file at path (created if missing)
// for a Store: with a busy timeout of 5 s, so that processes sharing the
// file wait for each other's writes instead of failing, and the WAL
// journal. Close it after the Clients that use it.
func OpenSQLite(path string) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("redlocksql: empty SQLite path")
	}
	u := url.URL{Scheme: "file", Opaque: path}
	v := url.Values{}
	v.Add("_pragma", "busy_timeout(5000)")
	v.Add("_pragma", "journal_mode(WAL)")
	u.RawQuery = v.Encode()
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("redlocksql: open %s: %w", path, err)
	}
	return db, nil
}

// OpenPostgres opens a PostgreSQL database for a Store, through pgx's
// database/sql driver; dsn is a URL (postgres://user:pass@host:port/db) or
// key=value pairs. Close it after the Clients that use it.
func OpenPostgres(dsn string) (*sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("redlocksql: open postgres: %w", err)
	}
	return db, nil
}
