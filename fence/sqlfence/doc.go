// This package is its own module so that the database drivers its tests
// need never enter the library's go.mod. The package itself imports only
// database/sql; the tests use, as database/sql drivers:
//
//   - github.com/jackc/pgx/v5/stdlib for PostgreSQL,
//   - github.com/go-sql-driver/mysql for MySQL and MariaDB,
//   - modernc.org/sqlite for SQLite,
//
// chosen because each is the well-kept, widely used driver for its
// database, written in pure Go (no cgo, so `go test` needs no C
// toolchain or system library), and made for database/sql.

package sqlfence
