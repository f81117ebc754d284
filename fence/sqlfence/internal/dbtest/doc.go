// Package dbtest holds no code, only the tests of package sqlfence that
// need a database: they run on real PostgreSQL, MariaDB and SQLite
// servers, through the database/sql drivers
//
//   - github.com/jackc/pgx/v5/stdlib for PostgreSQL,
//   - github.com/go-sql-driver/mysql for MySQL and MariaDB,
//   - modernc.org/sqlite for SQLite,
//
// chosen because each is the well-kept, widely used driver for its
// database, written in pure Go (no cgo, so `go test` needs no C
// toolchain or system library), and made for database/sql.
//
// It is a module of its own so that those drivers are in neither the
// library's go.mod nor sqlfence's: sqlfence imports only database/sql,
// and a program that uses it brings its own driver, whose modules alone
// then enter its go.sum. The runnable example of sqlfence.Store.Tx, with
// its driver imported, is here too (example_test.go); sqlfence's package
// documentation shows it, and a test keeps the two the same.
package dbtest
