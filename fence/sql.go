package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Placeholder is how a database/sql driver numbers a statement's
// parameters.
type Placeholder int

const (
	// Dollar: $1, $2, … (PostgreSQL).
	Dollar Placeholder = iota
	// Question: ?, ?, … in order (SQLite, MySQL).
	Question
)

// Table is a table whose rows carry their fence: a column with the
// highest token that has written or fenced the row. The schema pattern:
//
//	CREATE TABLE accounts (
//	    id      BIGINT PRIMARY KEY,
//	    balance BIGINT NOT NULL,
//	    fence   BIGINT NOT NULL DEFAULT 0  -- the highest token seen
//	);
//
// A row is created by the application, with fence 0 (or −2⁶³ when
// negative tokens are allowed), and deleting it deletes its fence. A NULL
// fence is no fence, as a missing record in Redis: the first admitted
// token writes the row and becomes its fence. So a fence column added to
// a table that has rows (ALTER TABLE … ADD COLUMN fence BIGINT, NULL in
// each) needs no backfill; NOT NULL DEFAULT 0 is the same for new rows,
// and keeps a stray NULL from resetting a fence. With the option
// LockColumn, a text column (NULL at first) keeps the lock a row follows,
// and a sequencer of another lock is refused (ErrOtherLock). Table is safe
// for concurrent use.
type Table struct {
	name, key, fence string
	ph               Placeholder
	opts             options
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// NewTable returns the fenced table name, whose rows are found by the
// column key and carry their fence in the column fence. The names are
// written into statements as they are: they come from the program, never
// from its input. It returns an error wrapping ErrInvalid for a name that
// is not a plain SQL identifier (letters, digits, _; schema.table) or an
// unknown Placeholder.
func NewTable(name, key, fence string, ph Placeholder, opts ...Option) (*Table, error) {
	o := newOptions(opts)
	ids := []string{name, key, fence}
	if o.lockColumn != "" {
		ids = append(ids, o.lockColumn)
	}
	for _, id := range ids {
		if !identifier.MatchString(id) {
			return nil, fmt.Errorf("%w: %q is not a plain SQL identifier", ErrInvalid, id)
		}
	}
	if ph != Dollar && ph != Question {
		return nil, fmt.Errorf("%w: placeholder %d", ErrInvalid, ph)
	}
	return &Table{name: name, key: key, fence: fence, ph: ph, opts: o}, nil
}

// Execer is what a fenced statement runs on: a *sql.DB, *sql.Conn or
// *sql.Tx. Its driver must report the rows an UPDATE matched, as those of
// PostgreSQL and SQLite do; go-sql-driver/mysql does with
// clientFoundRows=true in its DSN, and without it a write of a current
// token that changes no value fails with an error saying so.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Update runs, in one statement,
//
//	UPDATE name SET <set>, fence = token
//	WHERE key = id AND (fence IS NULL OR fence <= token)
//
// (s's token; with LockColumn, the row's lock is recorded and compared
// too: another lock's sequencer is an error matching ErrOtherLock), with
// args as set's parameters (numbered from $1, or ? in order). set is
// SQL, written into the statement as it is: it comes from the program,
// never from its input, and every value goes in args. A set with a
// comment or a semicolon (--, /*, ;), which would cut off the fence's
// WHERE clause, is refused with an error matching ErrInvalid. It
// returns a *StaleError (ErrStale) when the row's fence is above token
// (nothing is written), and an error wrapping sql.ErrNoRows when there is
// no such row. On a *sql.DB, a statement of its own, it runs again after
// a conflict (see ErrConflict: under REPEATABLE READ or SERIALIZABLE, it
// waited for the row while a concurrent transaction wrote it); in the
// caller's transaction or connection, the conflict is returned, an error
// matching ErrConflict.
func (t *Table) Update(ctx context.Context, db Execer, id any, s Sequencer, set string, args ...any) error {
	if err := t.ready(ctx, db); err != nil {
		return err
	}
	if err := checkSet(set); err != nil {
		return err
	}
	return t.update(ctx, db, id, s, set+", ", args)
}

// Fence records token on the row of id, as a fenced read does: a holder
// with a lower token can no longer Update it, nor Fence it. Call it before
// the read of a read-modify-write that does not run in one transaction
// (see Tx for one that does): then a holder that stalls between its read
// and its write, past its lock, has its Update refused, instead of writing
// before the next holder, whose write, based on the same read, would then
// lose it. It returns a *StaleError (ErrStale) when the row's fence is
// above token, and an error wrapping sql.ErrNoRows when there is no row; a
// conflict is as in Update.
func (t *Table) Fence(ctx context.Context, db Execer, id any, s Sequencer) error {
	if err := t.ready(ctx, db); err != nil {
		return err
	}
	return t.update(ctx, db, id, s, "", nil)
}

// Reset sets the fence of the row of id to to, in one statement: its
// fence column becomes to's token and, with LockColumn, its lock column
// to's lock (NULL for none); the zero Sequencer sets both to NULL, no
// fence (the next sequencer is admitted whatever it is), which a NOT NULL
// fence column refuses: reset it to Token(1) instead. It checks
// nothing: it is the way out of a poisoned fence (see Redis.Reset, and
// docs/fencing.md, "Poisoned fences"). It returns an error wrapping
// sql.ErrNoRows when there is no such row. The statement, for an operator
// at a SQL prompt:
//
//	UPDATE name SET fence = T[, lock = L] WHERE key = ID
func (t *Table) Reset(ctx context.Context, db Execer, id any, to Sequencer) error {
	if err := t.ready(ctx, db); err != nil {
		return err
	}
	var tok, lock any
	if to != (Sequencer{}) {
		tok = to.Token
	}
	if to.Lock != "" {
		lock = to.Lock
	}
	p := [3]string{"$1", "$2", "$3"}
	if t.ph == Question {
		p = [3]string{"?", "?", "?"}
	}
	q, args := fmt.Sprintf("UPDATE %s SET %s = %s", t.name, t.fence, p[0]), []any{tok}
	if lc := t.opts.lockColumn; lc != "" {
		q, args = q+fmt.Sprintf(", %s = %s", lc, p[1]), append(args, lock)
	} else {
		p[2] = p[1]
	}
	q, args = q+fmt.Sprintf(" WHERE %s = %s", t.key, p[2]), append(args, id)
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return t.fail(id, "reset: ", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("fence: %s: no such row: %w", t.resource(id), sql.ErrNoRows)
	}
	return nil
}

// checkSet refuses a SET clause that is empty, or that could cut off what
// follows it in the statement, the fence's assignment and WHERE clause: a
// comment (--, /*) or the end of the statement (;). Such a clause made a
// stale token's Update write every row of the table on SQLite. It refuses
// them in string literals too, where values do not belong: they go in args.
func checkSet(set string) error {
	if strings.TrimSpace(set) == "" {
		return invalid("empty SET clause")
	}
	for _, bad := range []string{"--", "/*", ";"} {
		if strings.Contains(set, bad) {
			return invalid("SET clause %q contains %s, which would cut off the fence's WHERE clause: pass values as arguments", set, bad)
		}
	}
	return nil
}

// ready refuses a statement that cannot run: no Table, a Table not made
// by NewTable, no context or no database.
func (t *Table) ready(ctx context.Context, db any) error {
	switch {
	case t == nil:
		return invalid("nil *Table: make it with NewTable")
	case t.name == "":
		return invalid("a Table not made by NewTable")
	case ctx == nil:
		return invalid("nil context")
	case isNil(db):
		return invalid("nil database")
	}
	return nil
}

// conflictAttempts is how many times a fenced statement that failed with a
// conflict runs, where it can run again (conflict).
const conflictAttempts = 8

// update runs the fenced UPDATE on the row of id. On a *sql.DB, a
// statement of its own outside any transaction, it runs it again after a
// conflict: nothing was written.
func (t *Table) update(ctx context.Context, db Execer, id any, s Sequencer, set string, args []any) error {
	if err := t.opts.admit(t.resource(id), s); err != nil {
		return err
	}
	q, args := t.statement(set, args, s, id)
	_, again := db.(*sql.DB)
	for attempt := 1; ; attempt++ {
		err := t.exec(ctx, db, id, s, q, args)
		if !again || !conflict(err) || attempt == conflictAttempts {
			return err
		}
	}
}

// statement is the fenced UPDATE of the row of id, with set's assignments
// (ending in ", " when there are any) and their args, and its arguments:
//
//	UPDATE name SET <set>fence = T[, lock = COALESCE(NULLIF(L, ''), lock)]
//	WHERE key = ID AND (fence IS NULL OR fence <= T)[ AND (lock IS NULL OR lock = L)]
//
// with T the token and L the lock's name (” for a bare token, which
// records nothing and passes only a row that follows no lock).
func (t *Table) statement(set string, args []any, s Sequencer, id any) (string, []any) {
	n, lc := len(args), t.opts.lockColumn
	if t.ph == Dollar {
		q := fmt.Sprintf("UPDATE %s SET %s%s = $%d", t.name, set, t.fence, n+1)
		if lc != "" {
			q += fmt.Sprintf(", %s = COALESCE(NULLIF($%d, ''), %s)", lc, n+3, lc)
		}
		q += fmt.Sprintf(" WHERE %s = $%d AND (%s IS NULL OR %s <= $%d)", t.key, n+2, t.fence, t.fence, n+1)
		if lc == "" {
			return q, append(args[:n:n], s.Token, id)
		}
		q += fmt.Sprintf(" AND (%s IS NULL OR %s = $%d)", lc, lc, n+3)
		return q, append(args[:n:n], s.Token, id, s.Lock)
	}
	q := fmt.Sprintf("UPDATE %s SET %s%s = ?", t.name, set, t.fence)
	a := append(args[:n:n], s.Token)
	if lc != "" {
		q += fmt.Sprintf(", %s = COALESCE(NULLIF(?, ''), %s)", lc, lc)
		a = append(a, s.Lock)
	}
	q += fmt.Sprintf(" WHERE %s = ? AND (%s IS NULL OR %s <= ?)", t.key, t.fence, t.fence)
	a = append(a, id, s.Token)
	if lc != "" {
		q += fmt.Sprintf(" AND (%s IS NULL OR %s = ?)", lc, lc)
		a = append(a, s.Lock)
	}
	return q, a
}

// exec runs the fenced statement q once.
func (t *Table) exec(ctx context.Context, db Execer, id any, s Sequencer, q string, args []any) error {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return t.fail(id, "", err)
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return t.fail(id, "", err)
	}
	if rows > 0 {
		return nil
	}
	return t.refused(ctx, db, id, s)
}

// fail is the error of the database's err in step (a prefix such as
// "commit: ") on the row of id: one matching ErrConflict for a conflict.
func (t *Table) fail(id any, step string, err error) error {
	if conflict(err) {
		return fmt.Errorf("%w: %s: %s%w", ErrConflict, t.resource(id), step, err)
	}
	return fmt.Errorf("fence: %s: %s%w", t.resource(id), step, err)
}

// conflict reports whether err is the database's refusal of a statement
// it could not serialize with a concurrent transaction: SQLSTATE 40001, a
// serialization failure, or 40P01, a deadlock, as reported by drivers
// whose errors have a SQLState method (pgx, lib/pq).
func conflict(err error) bool {
	var e interface{ SQLState() string }
	if !errors.As(err, &e) {
		return false
	}
	switch e.SQLState() {
	case "40001", "40P01":
		return true
	}
	return false
}

// refused says why a fenced statement changed no row: another lock, a
// fence above the token, no row, or a driver that counts only the rows it
// changed.
func (t *Table) refused(ctx context.Context, db Execer, id any, s Sequencer) error {
	p := "$1"
	if t.ph == Question {
		p = "?"
	}
	var seen sql.NullInt64
	var lock sql.NullString
	cols, dest := t.fence, []any{&seen}
	if t.opts.lockColumn != "" {
		cols, dest = cols+", "+t.opts.lockColumn, append(dest, &lock)
	}
	err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", cols, t.name, t.key, p), id).Scan(dest...)
	token := s.Token
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("fence: %s: no such row: %w", t.resource(id), err)
	case err != nil:
		return fmt.Errorf("fence: %s: %w", t.resource(id), err)
	case lock.Valid && lock.String != "" && lock.String != s.Lock:
		return &otherLockError{resource: t.resource(id), s: s, follows: lock.String}
	case !seen.Valid || seen.Int64 <= token:
		// Not stale, and not known to be written: the driver counts the
		// rows an UPDATE changed, and this one changed nothing (the same
		// values again), or the row changed meanwhile.
		return fmt.Errorf("fence: %s: no row changed, yet the row's fence (%s) admits token %d: "+
			"the driver counts changed rows, not matched ones (go-sql-driver/mysql needs clientFoundRows=true in its DSN), "+
			"or the row changed meanwhile", t.resource(id), fenceText(seen), token)
	}
	return &StaleError{Resource: t.resource(id), Token: token, Fence: seen.Int64}
}

// fenceText is a fence column's value as the errors say it.
func fenceText(f sql.NullInt64) string {
	if !f.Valid {
		return "NULL"
	}
	return strconv.FormatInt(f.Int64, 10)
}

// Tx runs a read-then-write in one transaction under token: it begins a
// transaction on db (at the Isolation option's level, the database's
// default without it), fences the row of id (Fence: refused, it rolls back
// and returns the *StaleError, ErrStale), runs fn, and commits; when fn
// returns an error, it rolls back and returns it, and when fn panics, it
// rolls back and the panic goes on. The fencing UPDATE comes first, so the
// transaction holds the row's write lock from then on: an older holder's
// fenced statement waits for the commit and is then refused, a newer
// holder's waits and then reads what this one wrote. fn's statements on
// the row need no further check; they must use tx.
//
// Under REPEATABLE READ or SERIALIZABLE, a fencing statement that waited
// for the row while another transaction wrote it fails with SQLSTATE 40001
// (its snapshot is older than that write): Tx then begins again and
// fences again, which nothing before it had written, and so waits and
// goes through (or is refused as stale) as under READ COMMITTED, up to 8
// attempts. A conflict in fn's statements or at the commit, or at the
// eighth attempt, is returned as an error matching ErrConflict (and fn's
// error, if fn returned it): nothing was written, and the caller may run
// the Tx again if fn can run again.
func (t *Table) Tx(ctx context.Context, db *sql.DB, id any, s Sequencer, fn func(tx *sql.Tx) error) error {
	if err := t.ready(ctx, db); err != nil {
		return err
	}
	if fn == nil {
		return invalid("nil function")
	}
	if err := t.opts.admit(t.resource(id), s); err != nil {
		return err
	}
	tx, err := t.begin(ctx, db, id, s)
	if err != nil {
		return err
	}
	// Whatever ends the transaction but its commit, an error or a panic of
	// fn, rolls it back: an open one would keep the row (PostgreSQL) or the
	// whole database (SQLite) locked. After the commit it does nothing.
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx); err != nil {
		if conflict(err) {
			return fmt.Errorf("%w: %s: %w", ErrConflict, t.resource(id), err)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return t.fail(id, "commit: ", err)
	}
	return nil
}

// begin begins a transaction on db and fences the row of id in it. A
// fencing statement that failed with a conflict runs again in a new
// transaction, up to conflictAttempts times: nothing was written yet.
func (t *Table) begin(ctx context.Context, db *sql.DB, id any, s Sequencer) (*sql.Tx, error) {
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: t.opts.isolation})
		if err != nil {
			return nil, t.fail(id, "begin: ", err)
		}
		err = t.Fence(ctx, tx, id, s)
		if err == nil {
			return tx, nil
		}
		_ = tx.Rollback()
		if !conflict(err) || attempt == conflictAttempts {
			return nil, err
		}
	}
}

func (t *Table) resource(id any) string {
	var s string
	switch v := id.(type) {
	case string:
		s = strconv.Quote(v)
	default:
		s = fmt.Sprint(v)
	}
	return t.name + "[" + s + "]"
}
