// Package sqlfence fences access to a SQL database through database/sql:
// a fence table, Tx to run the caller's own statements in the same
// transaction as the fence check, a fence.Store over a table of values,
// and a fence function that applies the same rule in SQL, for shell jobs
// and other programs that are not Go. It imports no driver; pick one and
// a Dialect.
//
// # Why it is atomic
//
// Each resource has one row in the fence table. A fenced access is one
// transaction that first locks that row, then reads the fence, applies
// fence.Check, records the new fence, runs the access and commits. The
// lock is held until commit, so a concurrent access to the same resource
// waits, then reads the fence the first one recorded: no check can be
// separated from its write.
//
//   - PostgreSQL: SELECT ... FOR UPDATE locks the row; after waiting, it
//     returns the latest committed version even under READ COMMITTED.
//     Under REPEATABLE READ or SERIALIZABLE a concurrent change fails
//     the transaction with a serialization error instead: safe, but to
//     be retried by the caller.
//   - MySQL and MariaDB (InnoDB): SELECT ... FOR UPDATE locks the row and
//     is a locking read, which sees the latest committed version even
//     under REPEATABLE READ. The consistent snapshot of the caller's
//     plain SELECTs is taken at their first read, after the lock.
//   - SQLite: there are no row locks, but a single writer. The
//     transaction's first statement is a write, which takes the write
//     lock (as BEGIN IMMEDIATE would) before the fence is read. Open the
//     database with a busy timeout (modernc.org/sqlite:
//     _pragma=busy_timeout(5000)), or concurrent writers fail with
//     SQLITE_BUSY instead of waiting.
//
// A resource's row is created, with no fence (token 0), by its first
// access, in a statement of its own before the transaction: creating it
// there does not decide anything, and it keeps the transaction free of
// insert locks, which deadlock easily on MySQL.
//
// Only statements run inside Tx are fenced. Anything that writes the
// protected tables outside it, or reads there what it will act on, is
// not protected.
//
// # Tables
//
// Tx needs only the fence table, which Migrate creates; the fence.Store
// methods (Put, Get, Load, Delete) also need the value table, which
// MigrateValues creates, and shell jobs the fence function, which
// MigrateFunction installs. Projects that manage their schema with a
// migration tool can take the statements from FencesDDL, ValuesDDL and
// FunctionDDL instead.
//
// # Shell jobs: the fence function
//
// A program that is not Go, such as a job that `fencelock run` starts
// with the lease's fence in FENCELOCK_FENCE, fences its statements with
// the fence function of the fence table, which MigrateFunction installs.
// Called first in the job's transaction, it applies the rule of
// fence.Check to the fence text and records the fence, locking the
// resource's fence row until the transaction ends, exactly as Tx does; a
// refused fence is an error, and the job's client must then stop and not
// commit. For a fence table named fences:
//
//   - PostgreSQL: SELECT fences_fence(resource, fence_text), a PL/pgSQL
//     function. A refusal aborts the transaction: nothing in it commits.
//   - MySQL and MariaDB: CALL fences_fence(resource, fence_text), a
//     procedure (a stored function that writes would need SUPER or
//     log_bin_trust_function_creators where the binary log is on). A refusal ends only the CALL: the client must
//     stop there, as the mysql client does unless given --force.
//   - SQLite, which has no stored functions: INSERT INTO fences_fence
//     VALUES (resource, fence_text), a view whose INSTEAD OF trigger
//     applies the rule. A refusal ends only the INSERT: run sqlite3 with
//     -bail. Begin with BEGIN IMMEDIATE, which takes the write lock
//     first.
//
// Errors carry the texts of package fence: on PostgreSQL and MySQL those
// of fence.StaleError, with the current token, under SQLSTATE FL409
// (SQLStateStale), and "fence: invalid fence: ..." under FL400
// (SQLStateInvalid). SQLite's RAISE takes only a literal before SQLite
// 3.47, and a schema using the newer form cannot be read at all by an
// older sqlite3 (Debian 12's is 3.40), so its refusals say which rule
// refused but not the current fence: read it from the fence table.
//
// The function reads the fence in the form fence.Fence.String writes it,
// as FENCELOCK_FENCE holds it ("TOKEN";lock="NAME";lease="ID", spaces
// around allowed), and gets from it the fence fence.Parse gets; other
// texts that Parse accepts (other parameter orders, unknown parameters,
// the deprecated bare token) it rejects as invalid rather than read them
// with a second parser.
//
// The jobs below mark order 42 shipped, in one transaction with the fence
// of resource orders/42, which a Go service may fence with Tx as well.
// With psql:
//
//	#!/bin/sh
//	# Marks order 42 shipped, if the lease of `fencelock run` is still the
//	# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
//	# psql connects as its environment says (PGHOST, PGDATABASE, ...); it
//	# quotes the fence itself (:'fence'), and stops at the first error.
//	exec psql -X -q -v ON_ERROR_STOP=1 -v fence="$FENCELOCK_FENCE" <<'SQL'
//	BEGIN;
//	SELECT fences_fence('orders/42', :'fence');
//	UPDATE orders SET state = 'shipped' WHERE id = 42;
//	COMMIT;
//	SQL
//
// With mysql:
//
//	#!/bin/sh
//	# Marks order 42 shipped, if the lease of `fencelock run` is still the
//	# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
//	# mysql connects as its option files say (~/.my.cnf), and stops at the
//	# first error. The fence goes in hex, since mysql reads backslashes in
//	# quoted strings and a fence may hold some.
//	fence=$(printf %s "$FENCELOCK_FENCE" | od -An -vtx1 | tr -d ' \n')
//	exec mysql <<SQL
//	BEGIN;
//	CALL fences_fence('orders/42', X'$fence');
//	UPDATE orders SET state = 'shipped' WHERE id = 42;
//	COMMIT;
//	SQL
//
// With sqlite3:
//
//	#!/bin/sh
//	# Marks order 42 shipped, if the lease of `fencelock run` is still the
//	# newest to fence orders/42:  fencelock run orders:42 -- ./ship.sh
//	# -bail stops sqlite3 at the first error; BEGIN IMMEDIATE takes the write
//	# lock before the fence is read. The fence goes in hex, like any bytes.
//	fence=$(printf %s "$FENCELOCK_FENCE" | od -An -vtx1 | tr -d ' \n')
//	exec sqlite3 -bail shop.db <<SQL
//	BEGIN IMMEDIATE;
//	INSERT INTO fences_fence VALUES ('orders/42', X'$fence');
//	UPDATE orders SET state = 'shipped' WHERE id = 42;
//	COMMIT;
//	SQL
//
// A fence holds the lock name, which may hold quotes and backslashes:
// pass it as psql does, in hex, or as another parameter of your client,
// never pasted inside '...'.
//
// # Metrics
//
// Store.WithHooks reports every fenced access, Tx included, to
// fence.Hooks (fenceprom's, fenceotel's): fences := sqlfence.New(db,
// d, "fences").WithHooks(m.FenceHooks()). The fence function's accesses
// happen in the database, where no hook sees them.
//
// # pgx
//
// The Store works on a *sql.DB. A program that uses pgx's own pool
// (github.com/jackc/pgx/v5/pgxpool) gets one over that pool with
// stdlib.OpenDBFromPool (github.com/jackc/pgx/v5/stdlib), so both share
// its connections:
//
//	pool, err := pgxpool.New(ctx, dsn)
//	...
//	db := stdlib.OpenDBFromPool(pool)
//	fences := sqlfence.New(db, sqlfence.Postgres, "fences")
//
// The *sql.DB keeps no idle connections of its own (the pool does), and
// closing it does not close the pool.
//
// # A program
//
// Tx on SQLite, with modernc.org/sqlite as the driver; any other
// database/sql driver is imported the same way:
//
//	package main
//
//	import (
//		"context"
//		"database/sql"
//		"errors"
//		"fmt"
//		"log"
//		"os"
//		"path/filepath"
//
//		_ "modernc.org/sqlite" // the driver: database/sql brings none
//
//		"github.com/fencelock/fencelock/fence"
//		"github.com/fencelock/fencelock/fence/sqlfence"
//	)
//
//	func main() {
//		ctx := context.Background()
//		dir, err := os.MkdirTemp("", "sqlfence")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer os.RemoveAll(dir)
//		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer db.Close()
//
//		fences := sqlfence.New(db, sqlfence.SQLite, "fences")
//		if err := fences.Migrate(ctx); err != nil {
//			log.Fatal(err)
//		}
//		if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT);
//			INSERT INTO orders VALUES (42, 'paid')`); err != nil {
//			log.Fatal(err)
//		}
//
//		setState := func(f fence.Fence, state string) error {
//			return fences.Tx(ctx, "orders/42", f, func(ctx context.Context, tx *sql.Tx) error {
//				_, err := tx.ExecContext(ctx, `UPDATE orders SET state = ? WHERE id = 42`, state)
//				return err
//			})
//		}
//		old := fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"}
//		newer := fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"}
//		fmt.Println(setState(old, "packed"))
//		fmt.Println(setState(newer, "shipped"))
//		err = setState(old, "refunded")
//		fmt.Println(errors.Is(err, fence.ErrStale))
//
//		var state string
//		if err := db.QueryRowContext(ctx, `SELECT state FROM orders WHERE id = 42`).Scan(&state); err != nil {
//			log.Fatal(err)
//		}
//		fmt.Println(state)
//	}
//
// This package imports no driver, and its module requires none: a program
// brings its own, and only that driver's modules enter its go.sum. The
// tests, which use one driver for each database, are a module of their
// own (internal/dbtest).
package sqlfence
