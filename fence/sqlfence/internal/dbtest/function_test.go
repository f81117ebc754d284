package dbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// newFunctionStore is newStore with the fence function installed.
func newFunctionStore(t testing.TB, db *sql.DB, d sqlfence.Dialect) (*sqlfence.Store, string) {
	t.Helper()
	s, table := newStore(t, db, d)
	if err := s.MigrateFunction(t.Context()); err != nil {
		t.Fatalf("MigrateFunction: %v", err)
	}
	t.Cleanup(func() { dropFunction(t, db, d, table) })
	return s, table
}

func dropFunction(t testing.TB, db *sql.DB, d sqlfence.Dialect, table string) {
	var stmts []string
	switch d {
	case sqlfence.Postgres:
		stmts = []string{"DROP FUNCTION IF EXISTS " + table + "_fence(text, text)"}
	case sqlfence.MySQL:
		stmts = []string{"DROP PROCEDURE IF EXISTS " + table + "_fence"}
	case sqlfence.SQLite:
		stmts = []string{"DROP TRIGGER IF EXISTS " + table + "_fence_apply", "DROP VIEW IF EXISTS " + table + "_fence"}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
}

// fenceStatement is the statement a shell job runs to fence its
// transaction: the fence function of table, with the resource and the
// fence text as parameters.
func fenceStatement(d sqlfence.Dialect, table string) string {
	switch d {
	case sqlfence.Postgres:
		return "SELECT " + table + "_fence($1, $2)"
	case sqlfence.MySQL:
		return "CALL " + table + "_fence(?, ?)"
	}
	return "INSERT INTO " + table + "_fence (resource, fence) VALUES (?, ?)"
}

// execer is a *sql.DB, *sql.Tx or *sql.Conn.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// applyText runs the fence function for resource with the fence text.
func applyText(ctx context.Context, e execer, d sqlfence.Dialect, table, resource, text string) error {
	_, err := e.ExecContext(ctx, fenceStatement(d, table), resource, text)
	return err
}

// sqlState returns the SQLSTATE of a PostgreSQL or MySQL error, "" for
// another.
func sqlState(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return string(my.SQLState[:])
	}
	return ""
}

// errText returns the database's own text of err: the message of a
// PostgreSQL or MySQL error, the whole text of another.
func errText(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Message
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Message
	}
	return err.Error()
}

// isStale reports whether err is the fence function's refusal.
func isStale(err error) bool {
	return sqlState(err) == sqlfence.SQLStateStale || strings.Contains(errText(err), "fence: stale token")
}

// isInvalid reports whether err is the fence function's rejection of an
// invalid fence or fence text.
func isInvalid(err error) bool {
	return sqlState(err) == sqlfence.SQLStateInvalid || strings.Contains(errText(err), "fence: invalid fence")
}

// wantStaleText checks the text of the function's refusal of rejected by
// current: on PostgreSQL and MySQL that of fence.StaleError, on SQLite
// (whose RAISE takes only a literal) one naming the case.
func wantStaleText(t *testing.T, d sqlfence.Dialect, err error, current, rejected fence.Fence) {
	t.Helper()
	if !isStale(err) {
		t.Errorf("fence function with %v over %v = %v, want a stale refusal", rejected, current, err)
		return
	}
	want := (&fence.StaleError{Current: current, Rejected: rejected}).Error()
	if d == sqlfence.SQLite {
		switch {
		case current.Lock != rejected.Lock:
			want = "fence: stale token: resource is fenced by another lock"
		case current.Token == rejected.Token:
			want = "fence: stale token: token belongs to another lease"
		default:
			want = "fence: stale token: token is older than the current token"
		}
		if !strings.Contains(errText(err), want) {
			t.Errorf("refusal of %v over %v: %q, want it to contain %q", rejected, current, errText(err), want)
		}
		return
	}
	if got := errText(err); got != want {
		t.Errorf("refusal of %v over %v:\n got %q\nwant %q (fence.StaleError's text)", rejected, current, got, want)
	}
}

// TestFunction applies the rule through the fence function alone, and
// mixed with the Go Store on the same table.
func TestFunction(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newFunctionStore(t, db, d.dialect)
			ctx := t.Context()
			apply := func(f fence.Fence) error { return applyText(ctx, db, d.dialect, table, "r", f.String()) }
			current := func() fence.Fence {
				t.Helper()
				_, cur, err := s.Load(ctx, "r")
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return cur
			}

			f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
			if err := apply(f10); err != nil {
				t.Fatalf("fresh fence %v: %v", f10, err)
			}
			if err := apply(f10); err != nil {
				t.Errorf("same fence %v again: %v", f10, err)
			}
			for _, stale := range []fence.Fence{
				{Lock: "orders", Token: 9, Lease: "a"},
				{Lock: "orders", Token: 10, Lease: "b"},
				{Lock: "jobs", Token: 99, Lease: "c"},
				{Lock: `or"d\ers`, Token: 99, Lease: `c"\`},
			} {
				wantStaleText(t, d.dialect, apply(stale), f10, stale)
			}
			if cur := current(); cur != f10 {
				t.Fatalf("fence after refusals = %v, want %v", cur, f10)
			}
			f11 := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
			if err := apply(f11); err != nil || current() != f11 {
				t.Errorf("newer fence %v: %v, current %v", f11, err, current())
			}

			// The Go Store and the function keep one rule on one table.
			f12 := fence.Fence{Lock: "orders", Token: 12, Lease: "c"}
			if err := s.Put(ctx, "r", f12, []byte("v")); err != nil {
				t.Fatalf("Put(%v): %v", f12, err)
			}
			wantStaleText(t, d.dialect, apply(f11), f12, f11)
			f13 := fence.Fence{Lock: "orders", Token: 13, Lease: "d"}
			if err := apply(f13); err != nil {
				t.Fatalf("fence %v after Put(%v): %v", f13, f12, err)
			}
			if err := s.Put(ctx, "r", f12, []byte("w")); !errors.Is(err, fence.ErrStale) {
				t.Errorf("Put(%v) after the function took %v = %v, want ErrStale", f12, f13, err)
			}
			// Delete keeps the fence: the function still refuses an older one.
			if err := s.Delete(ctx, "r", f13); err != nil {
				t.Fatalf("Delete(%v): %v", f13, err)
			}
			wantStaleText(t, d.dialect, apply(f12), f13, f12)

			// The first fence of another resource takes any lock.
			if err := applyText(ctx, db, d.dialect, table, "fresh", (fence.Fence{Lock: "jobs", Token: 1, Lease: "x"}).String()); err != nil {
				t.Errorf("first fence of another resource: %v", err)
			}
		})
	}
}

// TestFunction_rollsBack: the statements of a transaction whose fence is
// refused do not commit. On PostgreSQL the refusal aborts the transaction
// itself, so even a COMMIT after it rolls back; MySQL and SQLite end only
// the failed statement, so the client must stop there (mysql does,
// sqlite3 with -bail; TestShell runs them so) and never commit.
func TestFunction_rollsBack(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			_, table := newFunctionStore(t, db, d.dialect)
			notes := newNotes(t, db, d.dialect, table)
			ctx := t.Context()
			f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
			if err := applyText(ctx, db, d.dialect, table, "r", f10.String()); err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := notes.add(ctx, tx, "before"); err != nil {
				t.Fatal(err)
			}
			f9 := fence.Fence{Lock: "orders", Token: 9, Lease: "b"}
			if err := applyText(ctx, tx, d.dialect, table, "r", f9.String()); !isStale(err) {
				t.Fatalf("stale fence in a transaction = %v, want a refusal", err)
			}
			if d.dialect == sqlfence.Postgres {
				if err := notes.add(ctx, tx, "after"); err == nil {
					t.Errorf("statement after the refusal: no error, want the transaction aborted")
				}
				if err := tx.Commit(); err == nil {
					t.Errorf("COMMIT after the refusal: no error, want it rolled back")
				}
			} else {
				tx.Rollback()
			}
			if got := notes.list(t); len(got) != 0 {
				t.Errorf("notes after a refused transaction = %q, want none", got)
			}
		})
	}
}

// notes is a table of short texts that transactions write.
type notes struct {
	db            *sql.DB
	insert, query string
}

func newNotes(t *testing.T, db *sql.DB, d sqlfence.Dialect, table string) *notes {
	t.Helper()
	name := table + "_notes"
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+name+" (note VARCHAR(100) NOT NULL)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	t.Cleanup(func() { dropTables(t, db, name) })
	return &notes{db: db, insert: "INSERT INTO " + name + " (note) VALUES (" + placeholder(d) + ")", query: "SELECT note FROM " + name + " ORDER BY note"}
}

func (n *notes) add(ctx context.Context, e execer, note string) error {
	_, err := e.ExecContext(ctx, n.insert, note)
	return err
}

func (n *notes) list(t *testing.T) []string {
	t.Helper()
	rows, err := n.db.QueryContext(t.Context(), n.query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	return got
}

// TestFunction_invalid: texts that are not a valid fence in String's
// form are rejected, and change nothing.
func TestFunction_invalid(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newFunctionStore(t, db, d.dialect)
			ctx := t.Context()
			f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
			if err := applyText(ctx, db, d.dialect, table, "r", f10.String()); err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{
				``,
				`"11";lock="orders"`,
				`"11";lease="a";lock="orders"`,     // valid for Parse, not String's form
				`11;lock="orders";lease="a"`,       // the deprecated form
				`"11";lock="orders";lease="a";x=1`, // an unknown parameter
				`"011";lock="orders";lease="a"`,
				`"0";lock="orders";lease="a"`,
				`"-11";lock="orders";lease="a"`,
				`"9223372036854775808";lock="orders";lease="a"`,
				`"99999999999999999999";lock="orders";lease="a"`,
				`"1 1";lock="orders";lease="a"`,
				`"11";lock="";lease="a"`,
				`"11";lock="orders";lease=""`,
				`"11";lock="or"ders";lease="a"`,
				`"11";lock="or\ders";lease="a"`,
				`"11";lock="orders\";lease="a"`,
				"\"11\";lock=\"orders\";lease=\"a\x7f\"",
				"\"11\";lock=\"ordérs\";lease=\"a\"",
				"\"11\";lock=\"orders\";lease=\"a\"\t",
				`"11";lock="orders";lease="a"x`,
			} {
				if err := applyText(ctx, db, d.dialect, table, "r", text); !isInvalid(err) {
					t.Errorf("fence text %q = %v, want an invalid fence error", text, err)
				}
			}
			var nullErr error
			if d.dialect == sqlfence.Postgres {
				_, nullErr = db.ExecContext(ctx, "SELECT "+table+"_fence(NULL, NULL)")
			} else {
				_, nullErr = db.ExecContext(ctx, fenceStatement(d.dialect, table), nil, nil)
			}
			if !isInvalid(nullErr) {
				t.Errorf("NULL resource and fence = %v, want an invalid fence error", nullErr)
			}
			if _, cur, err := s.Load(ctx, "r"); err != nil || cur != f10 {
				t.Errorf("fence after invalid texts = %v, %v; want %v", cur, err, f10)
			}
			// Spaces around the text are allowed, as fence.Parse allows them.
			f11 := fence.Fence{Lock: "orders", Token: 11, Lease: "a"}
			if err := applyText(ctx, db, d.dialect, table, "r", "  "+f11.String()+" "); err != nil {
				t.Errorf("fence text with spaces around: %v", err)
			}
		})
	}
}

// TestMigrateFunction: installing twice, and concurrently, leaves one
// working function; an older version is replaced.
func TestMigrateFunction(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newFunctionStore(t, db, d.dialect)
			ctx := t.Context()
			errs := make(chan error, 4)
			for range cap(errs) {
				go func() { errs <- s.MigrateFunction(ctx) }()
			}
			for range cap(errs) {
				if err := <-errs; err != nil {
					t.Errorf("concurrent MigrateFunction: %v", err)
				}
			}
			// An older version: the same function under another marker.
			stmts, err := sqlfence.FunctionDDL(d.dialect, table)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range stmts {
				q = strings.ReplaceAll(q, "sqlfence ", "sqlfence-old ")
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := s.MigrateFunction(ctx); err != nil {
				t.Fatalf("MigrateFunction over an older version: %v", err)
			}
			if n := countMarkers(t, db, d.dialect, table, "sqlfence-old "); n != 0 {
				t.Errorf("after MigrateFunction the older version is still there")
			}
			f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
			if err := applyText(ctx, db, d.dialect, table, "r", f.String()); err != nil {
				t.Errorf("fence function after migrations: %v", err)
			}
		})
	}
}

// countMarkers counts the installed definitions of table's fence function
// that hold marker.
func countMarkers(t *testing.T, db *sql.DB, d sqlfence.Dialect, table, marker string) int {
	t.Helper()
	var q string
	switch d {
	case sqlfence.Postgres:
		q = "SELECT count(*) FROM pg_proc WHERE proname = $1 AND prosrc LIKE '%' || $2 || '%'"
	case sqlfence.MySQL:
		q = "SELECT count(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ? AND ROUTINE_COMMENT LIKE CONCAT('%', ?, '%')"
	case sqlfence.SQLite:
		q = "SELECT count(*) FROM sqlite_master WHERE name = ? || '_apply' AND sql LIKE '%' || ? || '%'"
	}
	var n int
	if err := db.QueryRowContext(t.Context(), q, table+"_fence", marker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sqlTx is Store.Tx done as a shell job does it: the fence function as
// the first statement of the caller's transaction.
func sqlTx(db *sql.DB, d sqlfence.Dialect, table string) txFunc {
	return func(ctx context.Context, resource string, f fence.Fence, fn func(context.Context, *sql.Tx) error) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := applyText(ctx, tx, d, table, resource, f.String()); err != nil {
			if isStale(err) {
				return fmt.Errorf("%w: %v", fence.ErrStale, err)
			}
			return err
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	}
}

// TestFunction_concurrent is TestStore_Tx_concurrent through the fence
// function: the history of accepted transactions must keep the rule. Its
// first round starts on a resource without a row, so first fences race.
func TestFunction_concurrent(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			_, table := newFunctionStore(t, db, d.dialect)
			h := newHistory(t, db, d.dialect, table)
			var clock atomic.Int64
			for round := range 2 {
				if d.dialect == sqlfence.SQLite {
					// One writer at a time, whose busy handler backs
					// off in sleeps of up to 100ms: a lighter load
					// keeps the test short, and atomicity there rests
					// on the write lock, which TestFunction_race shows.
					loadN(t, sqlTx(db, d.dialect, table), h, &clock, round, 4, 15)
					continue
				}
				load(t, sqlTx(db, d.dialect, table), h, &clock, round)
			}
			if v, n := h.violation(t); v != "" {
				t.Errorf("the fence function let the history break the rule: %s", v)
			} else {
				t.Logf("%d transactions accepted, in order", n)
			}
		})
	}
}

// TestFunction_race runs two transactions whose fences race for one
// resource, the second's fence statement waiting, as the database shows,
// on the first's lock: the outcome must be the rule's, whichever commits
// first. On a resource without a row, both race to create it.
func TestFunction_race(t *testing.T) {
	older := fence.Fence{Lock: "orders", Token: 9, Lease: "a"}
	newer := fence.Fence{Lock: "orders", Token: 10, Lease: "b"}
	for _, d := range databases {
		for _, c := range []struct {
			name          string
			first, second fence.Fence
			existing      bool
		}{
			{"newer waits for older, first fence", older, newer, false},
			{"older waits for newer, first fence", newer, older, false},
			{"older waits for newer", newer, older, true},
		} {
			t.Run(d.name+"/"+c.name, func(t *testing.T) {
				db := d.open(t)
				s, table := newFunctionStore(t, db, d.dialect)
				ctx := t.Context()
				if c.existing {
					seed := fence.Fence{Lock: "orders", Token: 1, Lease: "seed"}
					if err := applyText(ctx, db, d.dialect, table, "r", seed.String()); err != nil {
						t.Fatal(err)
					}
				}
				raceOnce(t, db, d.dialect, table, c.first, c.second)
				want := c.first
				if c.second.Token > c.first.Token {
					want = c.second
				}
				if _, cur, err := s.Load(ctx, "r"); err != nil || cur != want {
					t.Errorf("fence after the race = %v, %v; want %v", cur, err, want)
				}
			})
		}
	}
}

// raceOnce runs first's transaction up to its fence statement, then
// second's fence statement until it waits on first's lock (SQLite: until
// it is refused as busy, for it cannot be seen waiting), then commits
// first and lets second finish, checking it gets the rule's answer.
func raceOnce(t *testing.T, db *sql.DB, d sqlfence.Dialect, table string, first, second fence.Fence) {
	t.Helper()
	ctx := t.Context()
	c1, c2 := conn(t, db), conn(t, db)
	begin := "BEGIN"
	if d == sqlfence.SQLite {
		begin = "BEGIN IMMEDIATE"
	}
	if _, err := c1.ExecContext(ctx, begin); err != nil {
		t.Fatal(err)
	}
	if err := applyText(ctx, c1, d, table, "r", first.String()); err != nil {
		t.Fatalf("first fence %v: %v", first, err)
	}
	wantErr := func(err error) {
		t.Helper()
		if second.Token > first.Token {
			if err != nil {
				t.Errorf("second fence %v after %v: %v, want it accepted", second, first, err)
			}
		} else {
			wantStaleText(t, d, err, first, second)
		}
	}
	if d == sqlfence.SQLite {
		// One writer at a time: the second cannot even begin while the
		// first holds the write lock.
		if _, err := c2.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
			t.Fatal(err)
		}
		defer c2.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = 10000")
		if _, err := c2.ExecContext(ctx, "BEGIN IMMEDIATE"); err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
			t.Fatalf("second BEGIN IMMEDIATE while the first holds the fence = %v, want SQLITE_BUSY", err)
		}
		if _, err := c1.ExecContext(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if _, err := c2.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		wantErr(applyText(ctx, c2, d, table, "r", second.String()))
		c2.ExecContext(ctx, "COMMIT")
		return
	}
	id := backendID(t, c2, d)
	if _, err := c2.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- applyText(ctx, c2, d, table, "r", second.String()) }()
	waitLockWait(t, db, d, id, done)
	if _, err := c1.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	wantErr(<-done)
	if _, err := c2.ExecContext(ctx, "COMMIT"); err != nil && d != sqlfence.Postgres {
		t.Fatal(err)
	}
}

func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// backendID returns the server's ID of the session on c.
func backendID(t *testing.T, c *sql.Conn, d sqlfence.Dialect) int64 {
	t.Helper()
	q := "SELECT pg_backend_pid()"
	if d == sqlfence.MySQL {
		q = "SELECT CONNECTION_ID()"
	}
	var id int64
	if err := c.QueryRowContext(t.Context(), q).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitLockWait returns once the server shows session id waiting for a
// lock, and fails the test if done reports first (the statement did not
// wait) or 30 seconds pass.
func waitLockWait(t *testing.T, db *sql.DB, d sqlfence.Dialect, id int64, done chan error) {
	t.Helper()
	q := "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'"
	every := 5 * time.Millisecond
	if d == sqlfence.MySQL {
		q = "SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'"
		// InnoDB refreshes the table only if it was last read over 0.1s
		// ago: reading it more often would never see a change.
		every = 150 * time.Millisecond
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var n int
		if err := db.QueryRowContext(t.Context(), q, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("second fence statement returned without waiting for the first's lock: %v", err)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatal("second fence statement not seen waiting for the first's lock in 30s")
		}
	}
}

// TestFunction_racePostgres pauses a fence statement between its read of
// the fence and its write, where it holds the fence row: a BEFORE UPDATE
// trigger of the test's waits on an advisory lock that the test holds.
// A second, older fence must wait for the row and then be refused; a
// function that read the fence without locking its row would accept it
// and overwrite the newer fence when the first commits.
func TestFunction_racePostgres(t *testing.T) {
	db := openPostgres(t)
	s, table := newFunctionStore(t, db, sqlfence.Postgres)
	ctx := t.Context()
	seed := fence.Fence{Lock: "orders", Token: 1, Lease: "seed"}
	if err := applyText(ctx, db, sqlfence.Postgres, table, "r", seed.String()); err != nil {
		t.Fatal(err)
	}
	key := rand.Int64()
	pause := table + "_pause"
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_lock_shared(%d); PERFORM pg_advisory_unlock_shared(%d); RETURN NEW; END $$`, pause, key, key),
		fmt.Sprintf("CREATE TRIGGER %s BEFORE UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION %s()", pause, table, pause),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		db.ExecContext(context.Background(), "DROP TRIGGER IF EXISTS "+pause+" ON "+table)
		db.ExecContext(context.Background(), "DROP FUNCTION IF EXISTS "+pause+"()")
	})
	holder := conn(t, db)
	if _, err := holder.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	newer := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
	older := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	c1, c2 := conn(t, db), conn(t, db)
	id1, id2 := backendID(t, c1, sqlfence.Postgres), backendID(t, c2, sqlfence.Postgres)
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { first <- applyText(ctx, c1, sqlfence.Postgres, table, "r", newer.String()) }()
	waitLockWait(t, db, sqlfence.Postgres, id1, first) // paused in the trigger, holding the row
	go func() { second <- applyText(ctx, c2, sqlfence.Postgres, table, "r", older.String()) }()
	waitLockWait(t, db, sqlfence.Postgres, id2, second)
	if _, err := holder.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first fence %v: %v", newer, err)
	}
	wantStaleText(t, sqlfence.Postgres, <-second, newer, older)
	if _, cur, err := s.Load(ctx, "r"); err != nil || cur != newer {
		t.Errorf("fence after the race = %v, %v; want %v", cur, err, newer)
	}
}

// TestMigrateFunction_waitsForTurn: while another migration holds the
// turn and does not end, MigrateFunction returns by its context's
// deadline, with the context's error.
func TestMigrateFunction_waitsForTurn(t *testing.T) {
	for _, d := range databases[:2] { // SQLite's turn is its write lock, with a busy timeout of its own
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newFunctionStore(t, db, d.dialect)
			holder := conn(t, db)
			switch d.dialect {
			case sqlfence.Postgres:
				// Another migration, of an older version, not yet
				// committed: MigrateFunction finds the older version
				// installed and must wait to replace it.
				stmts, err := sqlfence.FunctionDDL(d.dialect, table)
				if err != nil {
					t.Fatal(err)
				}
				old := strings.ReplaceAll(stmts[0], "sqlfence ", "sqlfence-old ")
				for _, q := range []string{old, "BEGIN", old} {
					if _, err := holder.ExecContext(t.Context(), q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				defer holder.ExecContext(t.Context(), "ROLLBACK")
			case sqlfence.MySQL:
				if _, err := holder.ExecContext(t.Context(), "DO GET_LOCK(?, 10)", "sqlfence:"+table); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			err := s.MigrateFunction(ctx)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("MigrateFunction while another holds the turn = %v, want an error wrapping context.DeadlineExceeded", err)
			}
		})
	}
}
