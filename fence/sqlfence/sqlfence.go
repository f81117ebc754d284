package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// Store is a fence table in a SQL database, and a fence.Store over a
// table of values next to it. It is safe for concurrent use.
type Store struct {
	db      *sql.DB
	dialect Dialect
	table   string
	q       queries
	err     error        // invalid arguments to New, returned by every call
	hooks   *fence.Hooks // nil: nothing reported
}

var _ fence.Store = (*Store)(nil)

// tableName is what New accepts: a plain identifier, so that it needs no
// quoting, short enough that table+"_values" is within every database's
// limit (PostgreSQL's 63 bytes).
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// New returns a Store whose fences are in table and whose values (for
// Put, Get, Load and Delete) are in table_values, both in db. Nothing is
// created until Migrate and MigrateValues. The table name must be a plain
// identifier (letters, digits, underscore; at most 48 bytes). An unknown
// Dialect, an invalid table name or a nil db are reported, wrapping
// fence.ErrInvalid, by every call on the Store, which then sends nothing.
func New(db *sql.DB, d Dialect, table string) *Store {
	err := validate(d, table)
	if db == nil {
		err = errors.Join(err, fmt.Errorf("%w: sqlfence: nil *sql.DB", fence.ErrInvalid))
	}
	s := &Store{db: db, dialect: d, table: table, err: err}
	if err == nil {
		s.q = newQueries(d, table)
	}
	return s
}

func validate(d Dialect, table string) error {
	var errs []error
	if d < Postgres || d > SQLite {
		errs = append(errs, fmt.Errorf("%w: sqlfence: unknown %v", fence.ErrInvalid, d))
	}
	if !tableName.MatchString(table) {
		errs = append(errs, fmt.Errorf("%w: sqlfence: table name %q is not a plain identifier of at most 48 bytes", fence.ErrInvalid, table))
	}
	return errors.Join(errs...)
}

// WithHooks returns a Store on the same database and tables as s that
// reports every fenced access to h: Tx (Op "tx"), Put, Get and Delete
// (fence.Hooks.Report). s itself is unchanged and reports nothing. Use
// it rather than fence.WithHooks, which hides Tx and would report the
// fence.Store methods a second time if both were used. A nil h reports
// nothing.
func (s *Store) WithHooks(h *fence.Hooks) *Store {
	c := *s
	c.hooks = h
	return &c
}

// FencesDDL returns the statement that creates the fence table named
// table, in dialect d, if it does not exist: the table that Migrate
// creates, for migration tools that keep their own schema files. The fence
// table has one row per resource:
//
//	resource   the resource name, as bytes (BYTEA, VARBINARY(1024), BLOB)
//	lock_name  the lock of the current fence, '' for none
//	token      the current token, 0 for none
//	lease      the lease of the current fence, '' for none
//
// On MySQL a resource name is at most 1024 bytes. The error, for an
// unknown Dialect or an invalid table name, wraps fence.ErrInvalid.
func FencesDDL(d Dialect, table string) (string, error) {
	if err := validate(d, table); err != nil {
		return "", err
	}
	return newQueries(d, table).createFences, nil
}

// ValuesDDL returns the statement that creates the value table of the
// Store whose fence table is named table (table_values), in dialect d, if
// it does not exist: the table that MigrateValues creates. Only Put, Get,
// Load and Delete use it; Tx does not. Errors are those of FencesDDL.
func ValuesDDL(d Dialect, table string) (string, error) {
	if err := validate(d, table); err != nil {
		return "", err
	}
	return newQueries(d, table).createValues, nil
}

// Migrate creates the fence table (FencesDDL) if it does not exist: all
// that Tx needs.
func (s *Store) Migrate(ctx context.Context) error {
	return s.migrate(ctx, s.q.createFences)
}

// MigrateValues creates the value table (ValuesDDL) if it does not exist,
// for the fence.Store methods Put, Get, Load and Delete. Call it after
// Migrate.
func (s *Store) MigrateValues(ctx context.Context) error {
	return s.migrate(ctx, s.q.createValues)
}

func (s *Store) migrate(ctx context.Context, ddl string) error {
	if s.err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", s.err)
	}
	if _, err := s.db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("sqlfence: migrate %s: %w", s.table, err)
	}
	return nil
}

// Tx runs fn in a transaction in which f has been accepted and recorded
// as the fence of resource, and commits if fn returns nil. fn gets ctx,
// for its statements, and the transaction. The statements fn runs through
// tx are thereby fenced: no access with an older fence can commit after
// them. If f is refused, Tx returns an error wrapping fence.ErrStale (a
// *fence.StaleError) or fence.ErrInvalid without calling fn. If fn returns
// an error, or panics, the transaction is rolled back, f is not recorded,
// and fn's error is returned as is. fn must not commit or roll back the
// transaction itself.
func (s *Store) Tx(ctx context.Context, resource string, f fence.Fence, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.tx(ctx, "tx", resource, f, fn)
}

// errNoRow says that a resource has no fence row yet.
var errNoRow = errors.New("no fence row")

func (s *Store) tx(ctx context.Context, op, resource string, f fence.Fence, fn func(context.Context, *sql.Tx) error) (err error) {
	if s.hooks != nil {
		start := time.Now()
		returned := false
		defer func() {
			if !returned {
				// fn panicked or called runtime.Goexit; the panic goes on.
				err = fmt.Errorf("sqlfence: %s %q: fn did not return (panic or runtime.Goexit)", op, resource)
			}
			s.hooks.Report(ctx, fence.AccessInfo{Op: op, Resource: resource, Fence: f, Latency: time.Since(start), Err: err})
		}()
		err = s.doTx(ctx, op, resource, f, fn)
		returned = true
		return err
	}
	return s.doTx(ctx, op, resource, f, fn)
}

func (s *Store) doTx(ctx context.Context, op, resource string, f fence.Fence, fn func(context.Context, *sql.Tx) error) error {
	if s.err != nil {
		return fmt.Errorf("sqlfence: %s %q: %w", op, resource, s.err)
	}
	if err := f.Validate(); err != nil {
		return fmt.Errorf("sqlfence: %s %q: %w", op, resource, err)
	}
	key := bytesOf(resource)
	err := s.attempt(ctx, key, f, fn)
	if errors.Is(err, errNoRow) {
		if _, err = s.db.ExecContext(ctx, s.q.ensure, key); err == nil {
			err = s.attempt(ctx, key, f, fn)
		}
	}
	var fnErr fnError
	if errors.As(err, &fnErr) {
		return fnErr.err
	}
	if err != nil {
		return fmt.Errorf("sqlfence: %s %q: %w", op, resource, err)
	}
	return nil
}

// fnError marks an error returned by the caller's function, which Tx
// returns unwrapped.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// attempt is one transaction of Tx. It returns errNoRow, before calling
// fn, if the resource has no fence row.
func (s *Store) attempt(ctx context.Context, key []byte, f fence.Fence, fn func(context.Context, *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback() // a rollback error leaves nothing to undo
		}
	}()
	if s.q.writeLock != "" {
		if _, err := tx.ExecContext(ctx, s.q.writeLock, key); err != nil {
			return err
		}
	}
	var cur fence.Fence
	err = tx.QueryRowContext(ctx, s.q.current, key).Scan(&cur.Lock, &cur.Token, &cur.Lease)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRow
	}
	if err != nil {
		return err
	}
	if cur.Token == 0 {
		cur = fence.Fence{}
	}
	if err := fence.Check(cur, f); err != nil {
		return err
	}
	if cur != f {
		if _, err := tx.ExecContext(ctx, s.q.record, f.Lock, f.Token, f.Lease, key); err != nil {
			return err
		}
	}
	if err := fn(ctx, tx); err != nil {
		return fnError{err}
	}
	committed = true
	return tx.Commit()
}

// Put implements fence.Store.
func (s *Store) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	return s.tx(ctx, "put", resource, f, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q.putValue, bytesOf(resource), nonNil(value))
		return wrap("put", resource, err)
	})
}

// Get implements fence.Store.
func (s *Store) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	var value []byte
	err := s.tx(ctx, "get", resource, f, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, s.q.getValue, bytesOf(resource)).Scan(&value)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return wrap("get", resource, err)
	})
	if err != nil {
		return nil, err
	}
	return value, nil
}

// Delete implements fence.Store.
func (s *Store) Delete(ctx context.Context, resource string, f fence.Fence) error {
	return s.tx(ctx, "delete", resource, f, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.q.deleteValue, bytesOf(resource))
		return wrap("delete", resource, err)
	})
}

// Load implements fence.Store. The fence and the value are read by one
// statement, so they belong to the same moment.
func (s *Store) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	if s.err != nil {
		return nil, fence.Fence{}, fmt.Errorf("sqlfence: load %q: %w", resource, s.err)
	}
	var cur fence.Fence
	var value []byte
	err := s.db.QueryRowContext(ctx, s.q.load, bytesOf(resource)).Scan(&cur.Lock, &cur.Token, &cur.Lease, &value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fence.Fence{}, nil
	}
	if err != nil {
		return nil, fence.Fence{}, fmt.Errorf("sqlfence: load %q: %w", resource, err)
	}
	if cur.Token == 0 {
		cur = fence.Fence{}
	}
	return value, cur, nil
}

func wrap(op, resource string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sqlfence: %s %q: %w", op, resource, err)
}

// bytesOf returns a resource name as a non-nil []byte: drivers send a nil
// slice as NULL, which would not match the empty name.
func bytesOf(resource string) []byte { return append([]byte{}, resource...) }

// nonNil returns b, or an empty slice for nil, for the same reason.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
