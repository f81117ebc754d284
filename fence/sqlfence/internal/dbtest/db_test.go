package dbtest_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/fencelock/fencelock/fence/sqlfence"
)

// database is one of the databases the tests run on.
type database struct {
	name    string
	dialect sqlfence.Dialect
	open    func(t testing.TB) *sql.DB
}

var databases = []database{
	{"Postgres", sqlfence.Postgres, openPostgres},
	{"MySQL", sqlfence.MySQL, openMySQL},
	{"SQLite", sqlfence.SQLite, openSQLite},
}

func openPostgres(t testing.TB) *sql.DB {
	return openDSN(t, "pgx", "FENCELOCK_POSTGRES_DSN", postgresDSN())
}

func openMySQL(t testing.TB) *sql.DB {
	return openDSN(t, "mysql", "FENCELOCK_MYSQL_DSN", mysqlDSN())
}

// postgresDSN and mysqlDSN are the servers the tests use:
// FENCELOCK_POSTGRES_DSN and FENCELOCK_MYSQL_DSN, or those that
// scripts/start-databases starts.
func postgresDSN() string {
	if v := os.Getenv("FENCELOCK_POSTGRES_DSN"); v != "" {
		return v
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func mysqlDSN() string {
	if v := os.Getenv("FENCELOCK_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// openDSN opens dsn, which the environment variable env gave or is made
// from (postgresDSN, mysqlDSN), and fails the test if it does not answer:
// CI starts the servers, so a missing one is an error, not a reason to
// skip.
func openDSN(t testing.TB, driver, env, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("sql.Open(%q, %s=%q): %v", driver, env, dsn, err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("database %q unreachable: %v\n(set %s to a reachable database, or start the server: scripts/start-databases)", dsn, err, env)
	}
	return db
}

// openSQLite opens a new SQLite database in a temporary directory, with
// the busy timeout the package doc asks for.
func openSQLite(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fence.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatalf("sql.Open(sqlite): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newStore returns a Store, with both its tables, on tables of its own,
// dropped at cleanup, so parallel and repeated runs never share a table.
func newStore(t testing.TB, db *sql.DB, d sqlfence.Dialect) (*sqlfence.Store, string) {
	t.Helper()
	s, table := newTxStore(t, db, d)
	if err := s.MigrateValues(t.Context()); err != nil {
		t.Fatalf("MigrateValues: %v", err)
	}
	return s, table
}

// newTxStore is newStore with only the fence table, all that Tx needs.
func newTxStore(t testing.TB, db *sql.DB, d sqlfence.Dialect) (*sqlfence.Store, string) {
	t.Helper()
	table := "fence_" + randomHex(6)
	s := sqlfence.New(db, d, table)
	t.Cleanup(func() { dropTables(t, db, table, table+"_values") })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, table
}

func dropTables(t testing.TB, db *sql.DB, tables ...string) {
	for _, table := range tables {
		if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table); err != nil {
			t.Errorf("DROP TABLE %s: %v", table, err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
