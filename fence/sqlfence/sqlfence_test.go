package sqlfence_test

import (
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

func TestNew_invalid(t *testing.T) {
	for _, table := range []string{"", "1fence", "fence-x", "fence x", "a;drop", `"q"`, "x234567890123456789012345678901234567890123456789"} {
		if _, err := sqlfence.New(nil, sqlfence.Postgres, table); err == nil {
			t.Errorf("New(%q) error = nil, want an error", table)
		}
	}
	if _, err := sqlfence.New(nil, sqlfence.Dialect(0), "fence"); err == nil {
		t.Errorf("New with the zero Dialect: error = nil, want an error")
	}
}

func TestStore_Migrate_twice(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			s, _ := newStore(t, d.open(t), d.dialect)
			if err := s.Migrate(t.Context()); err != nil {
				t.Errorf("second Migrate = %v, want nil", err)
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
			note := func(text string) func(*sql.Tx) error {
				return func(tx *sql.Tx) error {
					_, err := tx.ExecContext(t.Context(), insert, text)
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
			err := s.Tx(ctx, "r", f11, func(tx *sql.Tx) error {
				if err := note("eleven")(tx); err != nil {
					return err
				}
				return boom
			})
			if err != boom {
				t.Errorf("Tx(%v) with a failing fn = %v, want fn's error as is", f11, err)
			}

			f9 := fence.Fence{Lock: "orders", Token: 9, Lease: "c"}
			called := false
			err = s.Tx(ctx, "r", f9, func(*sql.Tx) error { called = true; return nil })
			var se *fence.StaleError
			if !errors.As(err, &se) || se.Current != f10 || called {
				t.Errorf("Tx(%v) = %v, fn called: %v; want a StaleError with current %v, fn not called", f9, err, called, f10)
			}

			func() {
				defer func() { recover() }()
				s.Tx(ctx, "r", f11, func(tx *sql.Tx) error { note("panic")(tx); panic("fn panicked") })
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
