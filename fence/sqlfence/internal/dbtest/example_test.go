package dbtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the driver: database/sql brings none

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/sqlfence"
)

// Store.Tx fences the caller's own statements: the UPDATE commits only
// with a fence the orders table has not seen overtaken. sqlfence's package
// documentation shows this program; TestDoc_example keeps the two equal.
func Example_storeTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlfence")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	fences := sqlfence.New(db, sqlfence.SQLite, "fences")
	if err := fences.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT);
		INSERT INTO orders VALUES (42, 'paid')`); err != nil {
		log.Fatal(err)
	}

	setState := func(f fence.Fence, state string) error {
		return fences.Tx(ctx, "orders/42", f, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE orders SET state = ? WHERE id = 42`, state)
			return err
		})
	}
	old := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
	newer := fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"}
	fmt.Println(setState(old, "packed"))
	fmt.Println(setState(newer, "shipped"))
	err = setState(old, "refunded")
	fmt.Println(errors.Is(err, fence.ErrStale))

	var state string
	if err := db.QueryRowContext(ctx, `SELECT state FROM orders WHERE id = 42`).Scan(&state); err != nil {
		log.Fatal(err)
	}
	fmt.Println(state)
	// Output:
	// <nil>
	// <nil>
	// true
	// shipped
}
