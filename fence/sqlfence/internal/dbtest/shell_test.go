package dbtest_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// shellDB is a database with the tables of the shell examples (fences,
// with its fence function, and orders), in a schema, database or file of
// its own, and the environment in which the example's client reaches it.
type shellDB struct {
	db     *sql.DB
	store  *sqlfence.Store
	env    []string
	dir    string // the example's working directory
	script string
	client string
}

// mustHave fails the test if the client program name is not on PATH:
// scripts/start-databases installs the clients, as it does the servers.
func mustHave(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not on PATH (scripts/start-databases installs it): %v", name, err)
	}
}

// newShellDB makes the example's tables for dialect d and returns them
// with the client's environment.
func newShellDB(t *testing.T, d database) *shellDB {
	t.Helper()
	ctx := t.Context()
	sh := &shellDB{dir: t.TempDir(), env: append(os.Environ(), "HOME="+t.TempDir())}
	switch d.dialect {
	case sqlfence.Postgres:
		mustHave(t, "psql")
		sh.client, sh.script = "psql", "psql.sh"
		admin := d.open(t)
		schema := "fenceshell_" + randomHex(6)
		if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
				t.Errorf("DROP SCHEMA %s: %v", schema, err)
			}
		})
		cfg, err := pgconn.ParseConfig(postgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		sh.env = append(sh.env, "PGHOST="+cfg.Host, fmt.Sprintf("PGPORT=%d", cfg.Port), "PGUSER="+cfg.User,
			"PGPASSWORD="+cfg.Password, "PGDATABASE="+cfg.Database, "PGOPTIONS=-c search_path="+schema)
		sep := "?"
		if strings.Contains(postgresDSN(), "?") {
			sep = "&"
		}
		sh.db = openDSN(t, "pgx", "FENCELOCK_POSTGRES_DSN", postgresDSN()+sep+"search_path="+schema)
	case sqlfence.MySQL:
		mustHave(t, "mysql")
		sh.client, sh.script = "mysql", "mysql.sh"
		admin := d.open(t)
		name := "fenceshell_" + randomHex(6)
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "DROP DATABASE "+name); err != nil {
				t.Errorf("DROP DATABASE %s: %v", name, err)
			}
		})
		cfg, err := mysql.ParseDSN(mysqlDSN())
		if err != nil {
			t.Fatal(err)
		}
		host, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		home := strings.TrimPrefix(sh.env[len(sh.env)-1], "HOME=")
		cnf := fmt.Sprintf("[client]\nhost=%s\nport=%s\nuser=%s\npassword=%s\n[mysql]\ndatabase=%s\n", host, port, cfg.User, cfg.Passwd, name)
		if err := os.WriteFile(filepath.Join(home, ".my.cnf"), []byte(cnf), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		sh.db = openDSN(t, "mysql", "FENCELOCK_MYSQL_DSN", cfg.FormatDSN())
	case sqlfence.SQLite:
		mustHave(t, "sqlite3")
		sh.client, sh.script = "sqlite3", "sqlite3.sh"
		db, err := sql.Open("sqlite", "file:"+filepath.Join(sh.dir, "shop.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		sh.db = db
	}
	sh.store = sqlfence.New(sh.db, d.dialect, "fences")
	for _, m := range []func(context.Context) error{sh.store.Migrate, sh.store.MigrateValues, sh.store.MigrateFunction} {
		if err := m(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sh.db.ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, state VARCHAR(20) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	sh.setState(t, "paid")
	return sh
}

func (sh *shellDB) setState(t *testing.T, state string) {
	t.Helper()
	if _, err := sh.db.ExecContext(t.Context(), "DELETE FROM orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.db.ExecContext(t.Context(), "INSERT INTO orders (id, state) VALUES (42, '"+state+"')"); err != nil {
		t.Fatal(err)
	}
}

func (sh *shellDB) state(t *testing.T) string {
	t.Helper()
	var s string
	if err := sh.db.QueryRowContext(t.Context(), "SELECT state FROM orders WHERE id = 42").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the example script with FENCELOCK_FENCE set to f's text, as
// fencelock run sets it, and returns its exit status and output.
func (sh *shellDB) run(t *testing.T, f fence.Fence) (int, string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "shell", sh.script))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), script)
	cmd.Dir = sh.dir
	cmd.Env = append(sh.env, "FENCELOCK_FENCE="+f.String())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return 0, out.String()
}

// TestShell runs the shell examples of the package documentation through
// the real psql, mysql and sqlite3: a fresh fence is accepted and the
// UPDATE commits; a stale one, of an older token, another lease or
// another lock, is refused, and the UPDATE after it does not commit;
// the same fence again is accepted.
func TestShell(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			sh := newShellDB(t, d)
			f10 := fence.Fence{Lock: "orders:42", Token: 10, Lease: "a"}
			if code, out := sh.run(t, f10); code != 0 || sh.state(t) != "shipped" {
				t.Fatalf("%s with a fresh fence %v: exit %d, state %q; want 0, shipped\n%s", sh.script, f10, code, sh.state(t), out)
			}
			for _, stale := range []fence.Fence{
				{Lock: "orders:42", Token: 9, Lease: "b"},
				{Lock: "orders:42", Token: 10, Lease: "b"},
				{Lock: "jobs", Token: 11, Lease: "c"},
			} {
				sh.setState(t, "paid")
				code, out := sh.run(t, stale)
				if code == 0 || sh.state(t) != "paid" || !strings.Contains(out, "fence: stale token") {
					t.Errorf("%s with a stale fence %v over %v: exit %d, state %q; want a failure naming the stale token, state paid\n%s",
						sh.script, stale, f10, code, sh.state(t), out)
				}
				if d.dialect != sqlfence.SQLite && !strings.Contains(out, "current token 10") {
					t.Errorf("%s with a stale fence %v: output does not tell the current token 10:\n%s", sh.script, stale, out)
				}
			}
			sh.setState(t, "paid")
			if code, out := sh.run(t, f10); code != 0 || sh.state(t) != "shipped" {
				t.Errorf("%s with the same fence %v again: exit %d, state %q; want 0, shipped\n%s", sh.script, f10, code, sh.state(t), out)
			}
			if _, cur, err := sh.store.Load(t.Context(), "orders/42"); err != nil || cur != f10 {
				t.Errorf("fence of orders/42 = %v, %v; want %v", cur, err, f10)
			}
		})
	}
}

// TestShell_quoting: a fence whose lock name and lease hold quotes,
// backslashes and shell characters reaches the function intact.
func TestShell_quoting(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			sh := newShellDB(t, d)
			f := fence.Fence{Lock: `o'r"d\e;r$s $(x) ` + "`x`", Token: 1764431234567890, Lease: `k'3\"J;`}
			if code, out := sh.run(t, f); code != 0 || sh.state(t) != "shipped" {
				t.Fatalf("%s with %v: exit %d, state %q; want 0, shipped\n%s", sh.script, f, code, sh.state(t), out)
			}
			if _, cur, err := sh.store.Load(t.Context(), "orders/42"); err != nil || cur != f {
				t.Errorf("fence of orders/42 = %#v, %v; want %#v", cur, err, f)
			}
		})
	}
}

// The package documentation shows each shell example as it is run here.
func TestDoc_shell(t *testing.T) {
	doc := packageDoc(t)
	for _, name := range []string{"psql.sh", "mysql.sh", "sqlite3.sh"} {
		b, err := os.ReadFile(filepath.Join("testdata", "shell", name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, indent(string(b))) {
			t.Errorf("sqlfence's package documentation does not show testdata/shell/%s; want it to contain\n%s", name, indent(string(b)))
		}
	}
}
