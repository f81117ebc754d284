package sqlfence

import "fmt"

// Dialect selects the SQL spoken to the database. The zero Dialect is not
// valid.
type Dialect int

const (
	// Postgres is PostgreSQL, with any database/sql driver (e.g. pgx's
	// stdlib package).
	Postgres Dialect = iota + 1
	// MySQL is MySQL or MariaDB with InnoDB tables.
	MySQL
	// SQLite is SQLite 3.24 or later.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "Postgres"
	case MySQL:
		return "MySQL"
	case SQLite:
		return "SQLite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// queries are the statements of one Store, for one dialect and table.
type queries struct {
	createFences, createValues string

	// ensure creates a resource's fence row with the zero fence
	// (token 0) if it has none, outside any transaction.
	ensure string
	// writeLock, if set, is run first in every transaction to take the
	// database's write lock before anything is read (SQLite).
	writeLock string
	// current reads the fence row, locking it where the dialect can.
	current string
	record  string

	load, getValue, putValue, deleteValue string
}

func newQueries(d Dialect, table string) queries {
	// p(n) is the n-th placeholder.
	p := func(n int) string { return "?" }
	if d == Postgres {
		p = func(n int) string { return fmt.Sprintf("$%d", n) }
	}
	values := table + "_values"
	q := queries{
		ensure: fmt.Sprintf(`INSERT INTO %s (resource, lock_name, token, lease) VALUES (%s, '', 0, '') ON CONFLICT (resource) DO NOTHING`,
			table, p(1)),
		current: fmt.Sprintf(`SELECT lock_name, token, lease FROM %s WHERE resource = %s FOR UPDATE`, table, p(1)),
		record: fmt.Sprintf(`UPDATE %s SET lock_name = %s, token = %s, lease = %s WHERE resource = %s`,
			table, p(1), p(2), p(3), p(4)),
		load: fmt.Sprintf(`SELECT f.lock_name, f.token, f.lease, v.value FROM %s f LEFT JOIN %s v ON v.resource = f.resource WHERE f.resource = %s`,
			table, values, p(1)),
		getValue:    fmt.Sprintf(`SELECT value FROM %s WHERE resource = %s`, values, p(1)),
		deleteValue: fmt.Sprintf(`DELETE FROM %s WHERE resource = %s`, values, p(1)),
		putValue: fmt.Sprintf(`INSERT INTO %s (resource, value) VALUES (%s, %s) ON CONFLICT (resource) DO UPDATE SET value = excluded.value`,
			values, p(1), p(2)),
	}
	switch d {
	case Postgres:
		q.createFences = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource  BYTEA PRIMARY KEY,\n" +
			"  lock_name TEXT NOT NULL,\n" +
			"  token     BIGINT NOT NULL,\n" +
			"  lease     TEXT NOT NULL\n" +
			")"
		q.createValues = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource BYTEA PRIMARY KEY,\n" +
			"  value    BYTEA NOT NULL\n" +
			")"
	case MySQL:
		// InnoDB, since only it has row locks and transactions;
		// VARBINARY, since a character column's collation would make
		// "a", "A" and "a " one resource.
		q.createFences = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource  VARBINARY(1024) NOT NULL PRIMARY KEY,\n" +
			"  lock_name BLOB NOT NULL,\n" +
			"  token     BIGINT NOT NULL,\n" +
			"  lease     BLOB NOT NULL\n" +
			") ENGINE=InnoDB"
		q.createValues = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource VARBINARY(1024) NOT NULL PRIMARY KEY,\n" +
			"  value    LONGBLOB NOT NULL\n" +
			") ENGINE=InnoDB"
		// A no-op update, since INSERT IGNORE would also ignore
		// truncation and other errors.
		q.ensure = fmt.Sprintf(`INSERT INTO %s (resource, lock_name, token, lease) VALUES (?, '', 0, '') ON DUPLICATE KEY UPDATE resource = resource`, table)
		q.putValue = fmt.Sprintf(`INSERT INTO %s (resource, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`, values)
	case SQLite:
		q.createFences = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource  BLOB NOT NULL PRIMARY KEY,\n" +
			"  lock_name TEXT NOT NULL,\n" +
			"  token     INTEGER NOT NULL,\n" +
			"  lease     TEXT NOT NULL\n" +
			")"
		q.createValues = "CREATE TABLE IF NOT EXISTS %s (\n" +
			"  resource BLOB NOT NULL PRIMARY KEY,\n" +
			"  value    BLOB NOT NULL\n" +
			")"
		// SQLite has no row locks: a write as the first statement takes
		// the database's single write lock (as BEGIN IMMEDIATE would)
		// before the fence is read, and holds it until commit.
		q.writeLock = fmt.Sprintf(`UPDATE %s SET token = token WHERE resource = ?`, table)
		q.current = fmt.Sprintf(`SELECT lock_name, token, lease FROM %s WHERE resource = ?`, table)
	}
	q.createFences = fmt.Sprintf(q.createFences, table)
	q.createValues = fmt.Sprintf(q.createValues, values)
	return q
}
