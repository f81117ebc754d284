package dbtest_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// TestStore_pgxPool runs the conformance suite and a Tx on a *sql.DB over
// a pgxpool.Pool, as the package documentation shows.
func TestStore_pgxPool(t *testing.T) {
	dsn := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if v := os.Getenv("FENCELOCK_POSTGRES_DSN"); v != "" {
		dsn = v
	}
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("pgxpool.New(%q): %v", dsn, err)
	}
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL %q unreachable: %v", dsn, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })

	fencetest.Run(t, func(t *testing.T) fence.Store {
		s, _ := newStore(t, db, sqlfence.Postgres)
		return s
	})

	s, table := newTxStore(t, db, sqlfence.Postgres)
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	var inTx bool
	err = s.Tx(t.Context(), "r", f, func(ctx context.Context, tx *sql.Tx) error {
		// The fence row, as this transaction sees it: recorded, not yet
		// committed.
		var token int64
		err := tx.QueryRowContext(ctx, "SELECT token FROM "+table+" WHERE resource = $1", []byte("r")).Scan(&token)
		inTx = token == f.Token
		return err
	})
	if err != nil || !inTx {
		t.Errorf("Tx over a pgxpool = %v, fence recorded in the transaction: %v; want nil, true", err, inTx)
	}
	if stat := pool.Stat(); stat.AcquiredConns() != 0 {
		t.Errorf("pool has %d connections acquired after the Store's calls returned, want 0", stat.AcquiredConns())
	}
}
