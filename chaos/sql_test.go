package chaos_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// postgresEnv names the PostgreSQL to use; CI starts one at the default.
const (
	postgresEnv = "FENCELOCK_POSTGRES_DSN"
	postgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

// TestHolderPauseSQLite is TestHolderPause with the resource in SQLite,
// fenced by sqlfence.Store (unfenced: a plain table of values).
func TestHolderPauseSQLite(t *testing.T) {
	holderPauseSQL(t, "sqlite", sqlfence.SQLite, openSQLite)
}

// TestHolderPausePostgres is TestHolderPause with the resource in
// PostgreSQL, fenced by sqlfence.Store (unfenced: a plain table of
// values).
func TestHolderPausePostgres(t *testing.T) {
	holderPauseSQL(t, "postgres", sqlfence.Postgres, openPostgres)
}

// holderPauseSQL runs the holder-pause scenario against tables of the
// run's own in db, dropped when the run has been checked. The holders
// share one *sql.DB and its connections; the fence check runs in the
// database, so only the holders' history is checked (no resource
// journal: serialising the calls to record them would hide the
// database's own concurrency control).
func holderPauseSQL(t *testing.T, adapter string, d sqlfence.Dialect, open func(t *testing.T) *sql.DB) {
	runScenario(t, scenario{name: "holder-pause", adapter: adapter, shortRuns: 3, control: staleWrite, setup: func(t *testing.T) *world {
		s := newStandalone(t)
		db := open(t)
		return s.world(func(r *run) (*chaos.Journal, func(int) fence.Store) {
			store := sqlResource(r, db, d)
			// The journal is used only to Load the final state.
			return &chaos.Journal{Store: store}, func(int) fence.Store { return store }
		}, holderPause(s))
	}})
}

// sqlResource creates r's tables: sqlfence's fence and value tables, or,
// unfenced, a plain table of values.
func sqlResource(r *run, db *sql.DB, d sqlfence.Dialect) fence.Store {
	mode := map[bool]string{true: "f", false: "u"}[r.fenced]
	table := fmt.Sprintf("chaos_%d_%d_%s", os.Getpid(), r.seed, mode)
	ctx := context.Background()
	drop := func(tables ...string) {
		r.cleanup(func() {
			for _, tb := range tables {
				if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+tb); err != nil {
					r.t.Errorf("DROP TABLE %s: %v", tb, err)
				}
			}
		})
	}
	if !r.fenced {
		p := &plainSQL{db: db, table: table, dialect: d}
		drop(table)
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (resource TEXT PRIMARY KEY, value TEXT NOT NULL)"); err != nil {
			r.t.Fatalf("create %s: %v", table, err)
		}
		return p
	}
	store := sqlfence.New(db, d, table)
	drop(table, table+"_values")
	if err := errors.Join(store.Migrate(ctx), store.MigrateValues(ctx)); err != nil {
		r.t.Fatalf("Migrate: %v", err)
	}
	return store
}

// openPostgres opens the PostgreSQL named by FENCELOCK_POSTGRES_DSN, or
// the default, and fails the test if it does not answer: CI starts it.
func openPostgres(t *testing.T) *sql.DB {
	dsn := postgresDSN
	if v := os.Getenv(postgresEnv); v != "" {
		dsn = v
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("sql.Open(pgx, %s=%q): %v", postgresEnv, dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("PostgreSQL %q unreachable: %v\n(set %s to a reachable database; CI starts one)", dsn, err, postgresEnv)
	}
	return db
}

// openSQLite opens a new SQLite database in a temporary directory, with
// the busy timeout sqlfence's documentation asks for.
func openSQLite(t *testing.T) *sql.DB {
	path := filepath.Join(t.TempDir(), "chaos.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatalf("sql.Open(sqlite): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// plainSQL is the unfenced control for SQL: a table of values whose
// statements ignore fences.
type plainSQL struct {
	db      *sql.DB
	table   string
	dialect sqlfence.Dialect
}

// q replaces the ? placeholders with $1, $2 for PostgreSQL.
func (p *plainSQL) q(query string) string {
	if p.dialect != sqlfence.Postgres {
		return query
	}
	out := make([]byte, 0, len(query)+4)
	n := 0
	for i := range len(query) {
		if query[i] == '?' {
			n++
			out = fmt.Appendf(out, "$%d", n)
			continue
		}
		out = append(out, query[i])
	}
	return string(out)
}

func (p *plainSQL) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := p.db.ExecContext(ctx, p.q("INSERT INTO "+p.table+" (resource, value) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET value = excluded.value"),
		resource, string(value))
	return err
}

func (p *plainSQL) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	var v string
	err := p.db.QueryRowContext(ctx, p.q("SELECT value FROM "+p.table+" WHERE resource = ?"), resource).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(v), nil
}

func (p *plainSQL) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := p.db.ExecContext(ctx, p.q("DELETE FROM "+p.table+" WHERE resource = ?"), resource)
	return err
}

func (p *plainSQL) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	v, err := p.Get(ctx, resource, fence.Fence{})
	return v, fence.Fence{}, err
}
