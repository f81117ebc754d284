package sqlfence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"
)

// The fence function applies the rule of fence.Check inside the caller's
// own transaction, for programs that are not Go: a shell job's psql,
// mysql or sqlite3. MigrateFunction installs it; FunctionDDL gives its
// statements to migration tools.
//
// It reads the fence in the text form that fence.Fence.String writes
// (FENCELOCK_FENCE): "TOKEN";lock="NAME";lease="ID", spaces around it
// allowed. It accepts exactly the texts that are String's output for a
// valid fence, by cutting the text at its first ";lock=" and ";lease="
// and checking that writing the parts again gives the text back; that is
// a subset of what fence.Parse accepts (which also reads other parameter
// orders, unknown parameters and the deprecated bare token), and for it
// the two agree: the same fence, or both refuse. Writing all of RFC 9651
// in three SQL dialects would give three more parsers to keep in step;
// the text of a shell job's fence is always String's.

// functionName is the name of the fence function of table.
func functionName(table string) string { return table + "_fence" }

// Error texts, shared by the dialects: those of package fence where it
// has them.
const (
	msgNull      = "fence: invalid fence: NULL resource or fence"
	msgPrintable = "fence: invalid fence: not printable ASCII"
	msgForm      = `fence: invalid fence: not the text form of a fence ("TOKEN";lock="NAME";lease="ID", as FENCELOCK_FENCE holds it)`
	msgToken     = "fence: invalid fence: token is not a positive 64-bit integer without leading zeros"
	msgLock      = "fence: invalid fence: empty lock name"
	msgLease     = "fence: invalid fence: empty lease"
	// The texts of fence.StaleError, with the values that SQLite, whose
	// RAISE takes only a literal, cannot give.
	msgStaleLockSQLite  = "fence: stale token: resource is fenced by another lock; a resource is bound to the first lock name that writes it: have every writer take that lock (the fence table names it)"
	msgStaleOlderSQLite = "fence: stale token: token is older than the current token"
	msgStaleLeaseSQLite = "fence: stale token: token belongs to another lease"
)

// SQLSTATE codes of the fence function's errors on PostgreSQL and MySQL
// (SQLite has none): a program can tell them from others without reading
// the text.
const (
	// SQLStateStale is the SQLSTATE of a refused fence.
	SQLStateStale = "FL409"
	// SQLStateInvalid is the SQLSTATE of an invalid fence or malformed
	// fence text.
	SQLStateInvalid = "FL400"
)

// functionDDL returns the statements that install the fence function of
// table, in order, and the marker by which an installed function of
// exactly these statements is known.
func functionDDL(d Dialect, table string) (stmts []string, marker string) {
	var tmpl []string
	switch d {
	case Postgres:
		tmpl = []string{postgresFunction}
	case MySQL:
		tmpl = []string{"DROP PROCEDURE IF EXISTS {fn}", mysqlProcedure}
	case SQLite:
		tmpl = []string{"DROP TRIGGER IF EXISTS {fn}_apply", "DROP VIEW IF EXISTS {fn}", sqliteView, sqliteTrigger()}
	}
	h := sha256.New()
	for _, t := range tmpl {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	marker = "sqlfence " + hex.EncodeToString(h.Sum(nil))[:16]
	r := strings.NewReplacer(
		"{fn}", functionName(table),
		"{table}", table,
		"{marker}", marker,
		"{msgNull}", msgNull,
		"{msgPrintable}", msgPrintable,
		"{msgForm}", sqlString(msgForm),
		"{msgToken}", msgToken,
		"{msgLock}", msgLock,
		"{msgLease}", msgLease,
		"{msgStaleLockSQLite}", msgStaleLockSQLite,
		"{msgStaleOlderSQLite}", msgStaleOlderSQLite,
		"{msgStaleLeaseSQLite}", msgStaleLeaseSQLite,
		"{stale}", SQLStateStale,
		"{invalid}", SQLStateInvalid,
	)
	for _, t := range tmpl {
		stmts = append(stmts, r.Replace(t))
	}
	return stmts, marker
}

// sqlString returns s for use inside a '...' literal: ' doubled.
func sqlString(s string) string { return strings.ReplaceAll(s, "'", "''") }

// postgresFunction is the fence function on PostgreSQL, in PL/pgSQL. The
// fence row is created if missing, then locked with FOR UPDATE, so a
// first fence racing another waits for it: ON CONFLICT waits for the
// other's insert to commit or roll back, and FOR UPDATE, under READ
// COMMITTED, then reads the latest committed fence.
const postgresFunction = `CREATE OR REPLACE FUNCTION {fn}(resource_name text, fence_text text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $sqlfence$
-- {marker}: sqlfence's fence function for table {table}
DECLARE
	s text := btrim(fence_text, ' ');
	p1 integer;
	p2 integer;
	tok text;
	rest text;
	f_lock text;
	f_lease text;
	f_token bigint;
	key bytea;
	cur_lock text;
	cur_token bigint;
	cur_lease text;
BEGIN
	IF resource_name IS NULL OR fence_text IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgNull}';
	END IF;
	IF s !~ E'^[\\x20-\\x7e]*$' THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgPrintable}';
	END IF;
	p1 := strpos(s, '";lock="');
	IF left(s, 1) <> '"' OR p1 < 2 THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgForm}';
	END IF;
	tok := substr(s, 2, p1 - 2);
	rest := substr(s, p1 + 8);
	p2 := strpos(rest, '";lease="');
	IF p2 < 1 OR length(rest) < p2 + 9 OR right(rest, 1) <> '"' THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgForm}';
	END IF;
	f_lock := replace(replace(replace(substr(rest, 1, p2 - 1), E'\\\\', chr(1)), E'\\"', '"'), chr(1), E'\\');
	f_lease := replace(replace(replace(substr(rest, p2 + 9, length(rest) - p2 - 9), E'\\\\', chr(1)), E'\\"', '"'), chr(1), E'\\');
	IF '"' || tok || '";lock="' || replace(replace(f_lock, E'\\', E'\\\\'), '"', E'\\"') || '";lease="' || replace(replace(f_lease, E'\\', E'\\\\'), '"', E'\\"') || '"' <> s THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgForm}';
	END IF;
	IF tok !~ '^[1-9][0-9]{0,18}$' OR tok::numeric > 9223372036854775807 THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgToken}';
	END IF;
	f_token := tok::bigint;
	IF f_lock = '' THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgLock}';
	END IF;
	IF f_lease = '' THEN
		RAISE EXCEPTION USING ERRCODE = '{invalid}', MESSAGE = '{msgLease}';
	END IF;

	key := convert_to(resource_name, 'UTF8');
	INSERT INTO {table} (resource, lock_name, token, lease) VALUES (key, '', 0, '') ON CONFLICT (resource) DO NOTHING;
	SELECT f.lock_name, f.token, f.lease INTO cur_lock, cur_token, cur_lease FROM {table} f WHERE f.resource = key FOR UPDATE;
	IF cur_token <> 0 THEN
		IF f_lock <> cur_lock THEN
			RAISE EXCEPTION USING ERRCODE = '{stale}', MESSAGE = format(
				'fence: stale token: resource is fenced by lock "%s" (current token %s), not "%s"; a resource is bound to the first lock name that writes it: have every writer take lock "%s"',
				replace(replace(cur_lock, E'\\', E'\\\\'), '"', E'\\"'), cur_token, replace(replace(f_lock, E'\\', E'\\\\'), '"', E'\\"'), replace(replace(cur_lock, E'\\', E'\\\\'), '"', E'\\"'));
		ELSIF f_token = cur_token AND f_lease <> cur_lease THEN
			RAISE EXCEPTION USING ERRCODE = '{stale}', MESSAGE = format(
				'fence: stale token: token %s belongs to lease "%s", not "%s" (current token %s)',
				cur_token, replace(replace(cur_lease, E'\\', E'\\\\'), '"', E'\\"'), replace(replace(f_lease, E'\\', E'\\\\'), '"', E'\\"'), cur_token);
		ELSIF f_token < cur_token THEN
			RAISE EXCEPTION USING ERRCODE = '{stale}', MESSAGE = format(
				'fence: stale token: token %s is older than current token %s', f_token, cur_token);
		END IF;
	END IF;
	IF cur_token = 0 OR f_token <> cur_token THEN
		UPDATE {table} SET lock_name = f_lock, token = f_token, lease = f_lease WHERE resource = key;
	END IF;
END
$sqlfence$`

// mysqlProcedure is the fence function on MySQL and MariaDB, a procedure
// (CALL): a stored function that writes needs SUPER or
// log_bin_trust_function_creators where the binary log is on. Strings
// are handled as bytes (BLOB), as Go handles them. The fence row is
// created first, with an insert that locks it (ON DUPLICATE KEY UPDATE
// takes an exclusive lock even on an existing row), before anything is
// read: a first fence racing another waits for it, and no plain read
// takes the transaction's snapshot before the lock. MESSAGE_TEXT holds
// 128 characters on MySQL, 512 on MariaDB.
const mysqlProcedure = `CREATE PROCEDURE {fn}(IN resource_name VARBINARY(1024), IN fence_text BLOB)
MODIFIES SQL DATA SQL SECURITY INVOKER COMMENT '{marker}'
BEGIN
	DECLARE s, tok, rest, f_lock, f_lease, cur_lock, cur_lease BLOB;
	DECLARE msg TEXT;
	DECLARE p1, p2, i INT;
	DECLARE f_token, cur_token BIGINT;
	IF resource_name IS NULL OR fence_text IS NULL THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgNull}';
	END IF;
	SET s = TRIM(BOTH ' ' FROM fence_text);
	SET i = 1;
	WHILE i <= LENGTH(s) DO
		IF ORD(SUBSTRING(s, i, 1)) NOT BETWEEN 32 AND 126 THEN
			SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgPrintable}';
		END IF;
		SET i = i + 1;
	END WHILE;
	SET p1 = LOCATE('";lock="', s);
	IF LEFT(s, 1) <> X'22' OR p1 < 2 THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgForm}';
	END IF;
	SET tok = SUBSTRING(s, 2, p1 - 2);
	SET rest = SUBSTRING(s, p1 + 8);
	SET p2 = LOCATE('";lease="', rest);
	IF p2 < 1 OR LENGTH(rest) < p2 + 9 OR RIGHT(rest, 1) <> X'22' THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgForm}';
	END IF;
	SET f_lock = REPLACE(REPLACE(REPLACE(SUBSTRING(rest, 1, p2 - 1), X'5C5C', CHAR(1)), X'5C22', X'22'), CHAR(1), X'5C');
	SET f_lease = REPLACE(REPLACE(REPLACE(SUBSTRING(rest, p2 + 9, LENGTH(rest) - p2 - 9), X'5C5C', CHAR(1)), X'5C22', X'22'), CHAR(1), X'5C');
	IF CONCAT(X'22', tok, '";lock="', REPLACE(REPLACE(f_lock, X'5C', X'5C5C'), X'22', X'5C22'),
			'";lease="', REPLACE(REPLACE(f_lease, X'5C', X'5C5C'), X'22', X'5C22'), X'22') <> s THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgForm}';
	END IF;
	IF LENGTH(tok) NOT BETWEEN 1 AND 19 OR ORD(tok) = 48 OR (LENGTH(tok) = 19 AND tok > '9223372036854775807') THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgToken}';
	END IF;
	SET i = 1;
	WHILE i <= LENGTH(tok) DO
		IF ORD(SUBSTRING(tok, i, 1)) NOT BETWEEN 48 AND 57 THEN
			SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgToken}';
		END IF;
		SET i = i + 1;
	END WHILE;
	SET f_token = CAST(tok AS SIGNED);
	IF f_lock = X'' THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgLock}';
	END IF;
	IF f_lease = X'' THEN
		SIGNAL SQLSTATE '{invalid}' SET MESSAGE_TEXT = '{msgLease}';
	END IF;

	INSERT INTO {table} (resource, lock_name, token, lease) VALUES (resource_name, '', 0, '') ON DUPLICATE KEY UPDATE resource = resource;
	SELECT f.lock_name, f.token, f.lease INTO cur_lock, cur_token, cur_lease FROM {table} f WHERE f.resource = resource_name FOR UPDATE;
	IF cur_token <> 0 THEN
		IF f_lock <> cur_lock THEN
			SET msg = CONCAT('fence: stale token: resource is fenced by lock "', REPLACE(REPLACE(cur_lock, X'5C', X'5C5C'), X'22', X'5C22'),
				'" (current token ', cur_token, '), not "', REPLACE(REPLACE(f_lock, X'5C', X'5C5C'), X'22', X'5C22'),
				'"; a resource is bound to the first lock name that writes it: have every writer take lock "',
				REPLACE(REPLACE(cur_lock, X'5C', X'5C5C'), X'22', X'5C22'), '"');
		ELSEIF f_token = cur_token AND f_lease <> cur_lease THEN
			SET msg = CONCAT('fence: stale token: token ', cur_token, ' belongs to lease "', REPLACE(REPLACE(cur_lease, X'5C', X'5C5C'), X'22', X'5C22'),
				'", not "', REPLACE(REPLACE(f_lease, X'5C', X'5C5C'), X'22', X'5C22'), '" (current token ', cur_token, ')');
		ELSEIF f_token < cur_token THEN
			SET msg = CONCAT('fence: stale token: token ', f_token, ' is older than current token ', cur_token);
		END IF;
		IF msg IS NOT NULL THEN
			SET msg = LEFT(msg, IF(VERSION() LIKE '%MariaDB%', 512, 128));
			SIGNAL SQLSTATE '{stale}' SET MESSAGE_TEXT = msg;
		END IF;
	END IF;
	IF cur_token = 0 OR f_token <> cur_token THEN
		UPDATE {table} SET lock_name = f_lock, token = f_token, lease = f_lease WHERE resource = resource_name;
	END IF;
END`

// sqliteView is what a shell job inserts its fence into on SQLite, which
// has no stored functions: INSERT INTO {fn} VALUES (resource, fence).
const sqliteView = `CREATE VIEW {fn} (resource, fence) AS SELECT NULL, NULL WHERE 0`

// sqliteTrigger returns the trigger that applies the rule for each row
// inserted into the view. SQLite has no row locks but one writer: the
// INSERT takes the database's write lock before the trigger reads the
// fence, and holds it to the end of the transaction. RAISE takes only a
// literal before SQLite 3.47, and a schema that used the newer form could
// not be read at all by an older sqlite3 (Debian 12 ships 3.40), so the
// stale errors do not tell the current fence: the fence table does.
func sqliteTrigger() string {
	// parsed is a subquery of one row: the fence text of NEW.fence cut
	// into its parts, and whether it is printable, in String's form, and
	// its token valid.
	parsed := `(SELECT s, tok, lock, lease, CAST(tok AS INTEGER) AS token,
			s NOT GLOB '*[^ -~]*' AND length(CAST(s AS BLOB)) = length(s) AS printable,
			substr(s, 1, 1) = '"' AND p1 > 1 AND p2 > 0 AND
				'"' || tok || '";lock="' || replace(replace(lock, '\', '\\'), '"', '\"') || '";lease="' || replace(replace(lease, '\', '\\'), '"', '\"') || '"' = s AS canonical,
			tok GLOB '[1-9]*' AND tok NOT GLOB '*[^0-9]*' AND length(tok) <= 19 AND (length(tok) < 19 OR tok <= '9223372036854775807') AS tokenok
		FROM (SELECT s, p1, p2, tok,
				replace(replace(replace(substr(rest, 1, p2 - 1), '\\', char(1)), '\"', '"'), char(1), '\') AS lock,
				replace(replace(replace(substr(rest, p2 + 9, length(rest) - p2 - 9), '\\', char(1)), '\"', '"'), char(1), '\') AS lease
			FROM (SELECT s, p1, tok, rest, instr(rest, '";lease="') AS p2
				FROM (SELECT s, p1, substr(s, 2, p1 - 2) AS tok, substr(s, p1 + 8) AS rest
					FROM (SELECT s, instr(s, '";lock="') AS p1
						FROM (SELECT trim(CAST(NEW.fence AS TEXT), ' ') AS s))))))`
	key := `CAST(NEW.resource AS BLOB)`
	return `CREATE TRIGGER {fn}_apply INSTEAD OF INSERT ON {fn}
BEGIN
	-- {marker}: sqlfence's fence function for table {table}
	SELECT CASE
		WHEN NEW.resource IS NULL OR NEW.fence IS NULL THEN RAISE(ABORT, '{msgNull}')
		WHEN NOT printable THEN RAISE(ABORT, '{msgPrintable}')
		WHEN NOT canonical THEN RAISE(ABORT, '{msgForm}')
		WHEN NOT tokenok THEN RAISE(ABORT, '{msgToken}')
		WHEN lock = '' THEN RAISE(ABORT, '{msgLock}')
		WHEN lease = '' THEN RAISE(ABORT, '{msgLease}')
	END FROM ` + parsed + `;
	INSERT INTO {table} (resource, lock_name, token, lease) VALUES (` + key + `, '', 0, '') ON CONFLICT (resource) DO NOTHING;
	SELECT CASE
		WHEN f.token = 0 THEN NULL
		WHEN p.lock <> f.lock_name THEN RAISE(ABORT, '{msgStaleLockSQLite}')
		WHEN p.token = f.token AND p.lease <> f.lease THEN RAISE(ABORT, '{msgStaleLeaseSQLite}')
		WHEN p.token < f.token THEN RAISE(ABORT, '{msgStaleOlderSQLite}')
	END FROM {table} f, ` + parsed + ` p WHERE f.resource = ` + key + `;
	UPDATE {table} SET (lock_name, token, lease) = (SELECT lock, token, lease FROM ` + parsed + `)
		WHERE resource = ` + key + `;
END`
}

// FunctionDDL returns the statements, in order, that install the fence
// function of the fence table named table in dialect d, replacing an
// earlier version: what MigrateFunction runs, for migration tools that
// keep their own schema files. On MySQL the procedure's body holds
// semicolons: a tool that splits a file at each one needs the statement
// marked as one (the mysql client: DELIMITER). Errors are those of
// FencesDDL.
func FunctionDDL(d Dialect, table string) ([]string, error) {
	if err := validate(d, table); err != nil {
		return nil, err
	}
	stmts, _ := functionDDL(d, table)
	return stmts, nil
}

// MigrateFunction installs the fence function, with which programs that
// are not Go apply the fence to their own statements in SQL (see the
// package documentation), unless the one installed is this version's. Call
// it after Migrate. Concurrent calls are safe: they take turns, under a
// PostgreSQL advisory lock, a MySQL named lock (GET_LOCK), or SQLite's
// write lock. It needs the right to create functions (PostgreSQL: CREATE
// on the schema, as for tables; MySQL: CREATE ROUTINE, and ALTER ROUTINE
// to replace an older version).
func (s *Store) MigrateFunction(ctx context.Context) error {
	if s.err != nil {
		return fmt.Errorf("sqlfence: migrate function: %w", s.err)
	}
	stmts, marker := functionDDL(s.dialect, s.table)
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlfence: migrate function %s: %w", functionName(s.table), err)
	}
	defer conn.Close()
	err = s.installFunction(ctx, conn, stmts, marker)
	if err != nil {
		return fmt.Errorf("sqlfence: migrate function %s: %w", functionName(s.table), err)
	}
	return nil
}

// installFunction runs stmts on conn unless the function installed holds
// marker, taking turns with other migrations.
func (s *Store) installFunction(ctx context.Context, conn *sql.Conn, stmts []string, marker string) (err error) {
	name := functionName(s.table)
	var (
		begin     string   // starts the transaction, if the DDL can be in one
		first     []string // runs first in it
		installed string   // reads the installed function's text or comment
		args      []any
	)
	switch s.dialect {
	case Postgres:
		begin = "BEGIN"
		// Replacing a function that another session replaces at once
		// fails with "tuple concurrently updated": take turns.
		h := fnv.New64a()
		h.Write([]byte("sqlfence function " + name))
		first = []string{fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", int64(h.Sum64()))}
		installed = `SELECT coalesce((SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure($1)), '')`
		args = []any{name + "(text,text)"}
	case MySQL:
		// DDL commits at once on MySQL: a named lock, held by this
		// connection, makes concurrent migrations take turns. The wait
		// is bounded by ctx (the driver closes the connection), not by
		// GET_LOCK's timeout: a year, since MariaDB refuses -1.
		lock := "sqlfence:" + s.table
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 31536000)", lock).Scan(&got); err != nil {
			return err
		}
		if got.Int64 != 1 {
			return fmt.Errorf("GET_LOCK(%q) returned %v", lock, got)
		}
		defer func() {
			if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", lock); rerr != nil {
				// The lock ends with the connection, which is then
				// closed rather than returned to the pool.
				conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
		installed = `SELECT coalesce((SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES
			WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ? AND ROUTINE_TYPE = 'PROCEDURE'), '')`
		args = []any{name}
	case SQLite:
		// The write lock first: a migration that read the schema, then
		// wrote, could fail with SQLITE_BUSY when another wrote between.
		begin = "BEGIN IMMEDIATE"
		installed = `SELECT coalesce((SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?), '')`
		args = []any{name + "_apply"}
	}
	if begin != "" {
		if _, err := conn.ExecContext(ctx, begin); err != nil {
			return err
		}
		defer func() {
			if err == nil {
				_, err = conn.ExecContext(ctx, "COMMIT")
			}
			if err != nil {
				if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
					conn.Raw(func(any) error { return driver.ErrBadConn })
				}
			}
		}()
	}
	for _, q := range first {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	var have string
	if err := conn.QueryRowContext(ctx, installed, args...).Scan(&have); err != nil {
		return err
	}
	if strings.Contains(have, marker) {
		return nil
	}
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}
