package dbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

func TestStore(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			fencetest.Run(t, func(t *testing.T) fence.Store {
				s, _ := newStore(t, db, d.dialect)
				return s
			})
		})
	}
}

// TestNew_invalid shows the constructor's error policy, the library's:
// New never fails, and every call on a Store made from invalid arguments
// returns an error wrapping fence.ErrInvalid and sends nothing.
func TestNew_invalid(t *testing.T) {
	db := openSQLite(t)
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	stores := map[string]*sqlfence.Store{
		"zero Dialect": sqlfence.New(db, sqlfence.Dialect(0), "fence"),
		"Dialect(4)":   sqlfence.New(db, sqlfence.Dialect(4), "fence"),
		"nil db":       sqlfence.New(nil, sqlfence.SQLite, "fence"),
	}
	for _, table := range []string{"", "1fence", "fence-x", "fence x", "a;drop", `"q"`, "x234567890123456789012345678901234567890123456789"} {
		stores["table "+table] = sqlfence.New(db, sqlfence.SQLite, table)
		if _, err := sqlfence.FencesDDL(sqlfence.SQLite, table); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("FencesDDL(SQLite, %q) error = %v, want ErrInvalid", table, err)
		}
		if _, err := sqlfence.ValuesDDL(sqlfence.SQLite, table); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("ValuesDDL(SQLite, %q) error = %v, want ErrInvalid", table, err)
		}
		if _, err := sqlfence.FunctionDDL(sqlfence.SQLite, table); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("FunctionDDL(SQLite, %q) error = %v, want ErrInvalid", table, err)
		}
	}
	if _, err := sqlfence.FencesDDL(sqlfence.Dialect(0), "fence"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("FencesDDL(Dialect(0)) error = %v, want ErrInvalid", err)
	}
	for name, s := range stores {
		_, _, loadErr := s.Load(t.Context(), "r")
		_, getErr := s.Get(t.Context(), "r", f)
		called := false
		for op, err := range map[string]error{
			"Migrate":         s.Migrate(t.Context()),
			"MigrateValues":   s.MigrateValues(t.Context()),
			"MigrateFunction": s.MigrateFunction(t.Context()),
			"Tx":              s.Tx(t.Context(), "r", f, func(context.Context, *sql.Tx) error { called = true; return nil }),
			"Put":             s.Put(t.Context(), "r", f, []byte("v")),
			"Get":             getErr,
			"Delete":          s.Delete(t.Context(), "r", f),
			"Load":            loadErr,
		} {
			if !errors.Is(err, fence.ErrInvalid) {
				t.Errorf("%s: %s = %v, want ErrInvalid", name, op, err)
			}
		}
		if called {
			t.Errorf("%s: Tx called fn", name)
		}
	}
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil || n != 0 {
		t.Errorf("tables in the database = %d, %v; want 0: invalid Stores must create nothing", n, err)
	}
}

// TestStore_Migrate_fencesOnly shows that Migrate creates only the fence
// table, which Tx needs, and MigrateValues the value table.
func TestStore_Migrate_fencesOnly(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newTxStore(t, db, d.dialect)
			f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
			if err := s.Tx(t.Context(), "r", f, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatalf("Tx after Migrate = %v, want nil", err)
			}
			if _, err := db.ExecContext(t.Context(), "SELECT 1 FROM "+table+"_values"); err == nil {
				t.Errorf("SELECT from %s_values after Migrate alone: no error, want no such table", table)
			}
			if err := s.Put(t.Context(), "r", f, []byte("v")); err == nil {
				t.Errorf("Put without the value table = nil, want an error")
			}
			if err := s.MigrateValues(t.Context()); err != nil {
				t.Fatalf("MigrateValues = %v", err)
			}
			if err := s.Put(t.Context(), "r", f, []byte("v")); err != nil {
				t.Errorf("Put after MigrateValues = %v, want nil", err)
			}
		})
	}
}

// TestDDL runs the exported statements as a migration tool would, instead
// of Migrate, and uses the Store on the tables they made.
func TestDDL(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			table := "fence_" + randomHex(6)
			t.Cleanup(func() { dropTables(t, db, table, table+"_values") })
			for _, ddl := range []func(sqlfence.Dialect, string) (string, error){sqlfence.FencesDDL, sqlfence.ValuesDDL} {
				stmt, err := ddl(d.dialect, table)
				if err != nil {
					t.Fatalf("DDL(%v, %q) error = %v", d.dialect, table, err)
				}
				if _, err := db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			fn, err := sqlfence.FunctionDDL(d.dialect, table)
			if err != nil {
				t.Fatalf("FunctionDDL(%v, %q) error = %v", d.dialect, table, err)
			}
			t.Cleanup(func() { dropFunction(t, db, d.dialect, table) })
			for _, stmt := range fn {
				if _, err := db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			s := sqlfence.New(db, d.dialect, table)
			f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
			if err := s.Put(t.Context(), "r", f, []byte("v")); err != nil {
				t.Fatalf("Put = %v", err)
			}
			if v, cur, err := s.Load(t.Context(), "r"); err != nil || string(v) != "v" || cur != f {
				t.Errorf("Load = %q, %v, %v; want %q, %v, nil", v, cur, err, "v", f)
			}
			f2 := fence.Fence{Lock: "orders", Token: 2, Lease: "b"}
			if err := applyText(t.Context(), db, d.dialect, table, "r", f2.String()); err != nil {
				t.Errorf("fence function from FunctionDDL: %v", err)
			}
			if err := s.MigrateFunction(t.Context()); err != nil {
				t.Errorf("MigrateFunction over FunctionDDL's function: %v", err)
			}
		})
	}
}

func TestStore_Migrate_twice(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			s, _ := newStore(t, d.open(t), d.dialect)
			if err := s.Migrate(t.Context()); err != nil {
				t.Errorf("second Migrate = %v, want nil", err)
			}
			if err := s.MigrateValues(t.Context()); err != nil {
				t.Errorf("second MigrateValues = %v, want nil", err)
			}
		})
	}
}

// TestStore_Tx checks that the caller's statements commit with the fence,
// roll back with it, and do not run at all for a refused fence.
func TestStore_Tx(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newStore(t, db, d.dialect)
			notes := table + "_notes"
			if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+notes+" (note VARCHAR(100) NOT NULL)"); err != nil {
				t.Fatalf("CREATE TABLE: %v", err)
			}
			t.Cleanup(func() { dropTables(t, db, notes) })
			insert := "INSERT INTO " + notes + " (note) VALUES (" + placeholder(d.dialect) + ")"
			note := func(text string) func(context.Context, *sql.Tx) error {
				return func(ctx context.Context, tx *sql.Tx) error {
					if ctx != t.Context() {
						return errors.New("fn got another context than Tx's")
					}
					_, err := tx.ExecContext(ctx, insert, text)
					return err
				}
			}
			ctx := t.Context()
			f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
			if err := s.Tx(ctx, "r", f10, note("ten")); err != nil {
				t.Fatalf("Tx(%v) = %v, want nil", f10, err)
			}

			boom := errors.New("boom")
			f11 := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
			err := s.Tx(ctx, "r", f11, func(ctx context.Context, tx *sql.Tx) error {
				if err := note("eleven")(ctx, tx); err != nil {
					return err
				}
				return boom
			})
			if err != boom {
				t.Errorf("Tx(%v) with a failing fn = %v, want fn's error as is", f11, err)
			}

			f9 := fence.Fence{Lock: "orders", Token: 9, Lease: "c"}
			called := false
			err = s.Tx(ctx, "r", f9, func(context.Context, *sql.Tx) error { called = true; return nil })
			var se *fence.StaleError
			if !errors.As(err, &se) || se.Current != f10 || called {
				t.Errorf("Tx(%v) = %v, fn called: %v; want a StaleError with current %v, fn not called", f9, err, called, f10)
			}

			func() {
				defer func() { recover() }()
				s.Tx(ctx, "r", f11, func(ctx context.Context, tx *sql.Tx) error { note("panic")(ctx, tx); panic("fn panicked") })
			}()

			_, cur, err := s.Load(ctx, "r")
			if err != nil || cur != f10 {
				t.Errorf("Load = %v, %v; want %v, nil: a failed fn must not record its fence", cur, err, f10)
			}
			var got []string
			rows, err := db.QueryContext(ctx, "SELECT note FROM "+notes)
			if err != nil {
				t.Fatalf("SELECT: %v", err)
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				rows.Scan(&n)
				got = append(got, n)
			}
			if len(got) != 1 || got[0] != "ten" {
				t.Errorf("notes = %q, want [ten]: only the accepted, successful fn commits", got)
			}
		})
	}
}

func placeholder(d sqlfence.Dialect) string {
	if d == sqlfence.Postgres {
		return "$1"
	}
	return "?"
}

func FuzzTokenOrder(f *testing.F) {
	var stores []fence.Store
	for _, d := range databases {
		s, _ := newStore(f, d.open(f), d.dialect)
		stores = append(stores, s)
	}
	fencetest.FuzzTokenOrder(f, stores...)
}
