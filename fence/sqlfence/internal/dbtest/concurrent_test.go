package dbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// txFunc is the shape of Store.Tx, so the test can run the same load
// through Tx and through the non-atomic variant below.
type txFunc func(ctx context.Context, resource string, f fence.Fence, fn func(context.Context, *sql.Tx) error) error

// TestStore_Tx_concurrent runs many transactions with mixed tokens and
// leases against one resource. Each accepted transaction appends its fence
// to a history table, in the same transaction, so the history is in the
// order the database let them take the fence row. Through Tx the history
// must keep the rule; through checkThenWrite, which checks in one
// statement and writes in another transaction, the same load must break
// it, or the test could not tell atomic from not.
func TestStore_Tx_concurrent(t *testing.T) {
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			s, table := newStore(t, db, d.dialect)
			h := newHistory(t, db, d.dialect, table)
			var clock atomic.Int64
			for round := range 2 {
				load(t, s.Tx, h, &clock, round)
			}
			v, n := h.violation(t)
			if v != "" {
				t.Errorf("Tx let the history break the rule: %s", v)
			}
			t.Logf("%d transactions accepted, in order", n)
		})
		t.Run(d.name+"/checkThenWrite", func(t *testing.T) {
			db := d.open(t)
			s, table := newStore(t, db, d.dialect)
			h := newHistory(t, db, d.dialect, table)
			// Create the fence row, so both variants start alike.
			seed := fence.Fence{Lock: "orders", Token: 1, Lease: "seed"}
			if err := s.Tx(t.Context(), "r", seed, func(context.Context, *sql.Tx) error { return nil }); err != nil {
				t.Fatalf("Tx(%v) = %v", seed, err)
			}
			var clock atomic.Int64
			const maxRounds = 20
			for round := range maxRounds {
				load(t, checkThenWrite(db, d.dialect, table), h, &clock, round)
				if v, _ := h.violation(t); v != "" {
					t.Logf("round %d: checkThenWrite broke the rule, as it must: %s", round, v)
					return
				}
			}
			t.Errorf("checkThenWrite kept the rule for %d rounds: the load is too weak to show that Tx is atomic", maxRounds)
		})
	}
}

// load runs one round: 8 goroutines, each doing 30 fenced transactions
// that append to the history.
func load(t *testing.T, tx txFunc, h *history, clock *atomic.Int64, round int) {
	t.Helper()
	loadN(t, tx, h, clock, round, 8, 30)
}

// loadN is load with writers goroutines doing perWriter transactions each.
func loadN(t *testing.T, tx txFunc, h *history, clock *atomic.Int64, round, writers, perWriter int) {
	t.Helper()
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), uint64(round)))
			for range perWriter {
				// Tokens mostly rise but arrive out of order, and each is
				// tried with two leases.
				f := fence.Fence{Lock: "orders", Token: clock.Add(1)/4 + 2 + r.Int64N(3), Lease: []string{"x", "y"}[r.IntN(2)]}
				err := tx(t.Context(), "r", f, func(ctx context.Context, tx *sql.Tx) error { return h.append(ctx, tx, f) })
				if err != nil && !errors.Is(err, fence.ErrStale) {
					errs[w] = fmt.Errorf("fenced transaction with %v: %w", f, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// checkThenWrite is what Tx must not be: the fence is read and checked in
// one statement, then written with the caller's statements in a separate
// transaction, so another writer can come in between.
func checkThenWrite(db *sql.DB, d sqlfence.Dialect, table string) txFunc {
	p := func(n int) string { return "?" }
	if d == sqlfence.Postgres {
		p = func(n int) string { return fmt.Sprintf("$%d", n) }
	}
	read := fmt.Sprintf("SELECT lock_name, token, lease FROM %s WHERE resource = %s", table, p(1))
	write := fmt.Sprintf("UPDATE %s SET lock_name = %s, token = %s, lease = %s WHERE resource = %s", table, p(1), p(2), p(3), p(4))
	return func(ctx context.Context, resource string, f fence.Fence, fn func(context.Context, *sql.Tx) error) error {
		var cur fence.Fence
		if err := db.QueryRowContext(ctx, read, []byte(resource)).Scan(&cur.Lock, &cur.Token, &cur.Lease); err != nil {
			return err
		}
		if err := fence.Check(cur, f); err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, write, f.Lock, f.Token, f.Lease, []byte(resource)); err != nil {
			return err
		}
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return tx.Commit()
	}
}

// history is a table of accepted fences in the order they were accepted.
type history struct {
	db            *sql.DB
	insert, query string
}

func newHistory(t *testing.T, db *sql.DB, d sqlfence.Dialect, table string) *history {
	t.Helper()
	name := table + "_history"
	id := map[sqlfence.Dialect]string{
		sqlfence.Postgres: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
		sqlfence.MySQL:    "BIGINT AUTO_INCREMENT PRIMARY KEY",
		sqlfence.SQLite:   "INTEGER PRIMARY KEY AUTOINCREMENT",
	}[d]
	create := fmt.Sprintf("CREATE TABLE %s (id %s, token BIGINT NOT NULL, lease VARCHAR(10) NOT NULL)", name, id)
	if _, err := db.ExecContext(t.Context(), create); err != nil {
		t.Fatalf("%s: %v", create, err)
	}
	t.Cleanup(func() { dropTables(t, db, name) })
	insert := fmt.Sprintf("INSERT INTO %s (token, lease) VALUES (?, ?)", name)
	if d == sqlfence.Postgres {
		insert = fmt.Sprintf("INSERT INTO %s (token, lease) VALUES ($1, $2)", name)
	}
	return &history{db: db, insert: insert, query: "SELECT token, lease FROM " + name + " ORDER BY id"}
}

func (h *history) append(ctx context.Context, tx *sql.Tx, f fence.Fence) error {
	_, err := tx.ExecContext(ctx, h.insert, f.Token, f.Lease)
	return err
}

// violation returns the first break of the rule in the history, or "",
// and the number of entries.
func (h *history) violation(t *testing.T) (string, int) {
	t.Helper()
	rows, err := h.db.QueryContext(t.Context(), h.query)
	if err != nil {
		t.Fatalf("%s: %v", h.query, err)
	}
	defer rows.Close()
	leaseOf := map[int64]string{}
	var last fence.Fence
	n := 0
	for rows.Next() {
		var f fence.Fence
		if err := rows.Scan(&f.Token, &f.Lease); err != nil {
			t.Fatalf("scan history: %v", err)
		}
		n++
		switch l, seen := leaseOf[f.Token]; {
		case f.Token < last.Token:
			return fmt.Sprintf("entry %d: token %d accepted after %d", n, f.Token, last.Token), n
		case seen && l != f.Lease:
			return fmt.Sprintf("entry %d: token %d accepted for leases %q and %q", n, f.Token, l, f.Lease), n
		}
		leaseOf[f.Token] = f.Lease
		last = f
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read history: %v", err)
	}
	if n < 10 {
		t.Fatalf("history has %d entries, want many: the load accepted too little to test anything", n)
	}
	return "", n
}
