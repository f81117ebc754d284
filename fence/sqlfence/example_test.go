package sqlfence_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/fencelock/fencelock/fence/sqlfence"
)

// The fence table's statement, for a migration tool's schema file.
func ExampleFencesDDL() {
	ddl, err := sqlfence.FencesDDL(sqlfence.Postgres, "fences")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl + ";")
	// Output:
	// CREATE TABLE IF NOT EXISTS fences (
	//   resource  BYTEA PRIMARY KEY,
	//   lock_name TEXT NOT NULL,
	//   token     BIGINT NOT NULL,
	//   lease     TEXT NOT NULL
	// );
}

// The fence function's statements, for a migration tool's schema file;
// here the first line of each, on MySQL.
func ExampleFunctionDDL() {
	stmts, err := sqlfence.FunctionDDL(sqlfence.MySQL, "fences")
	if err != nil {
		log.Fatal(err)
	}
	for _, stmt := range stmts {
		first, _, _ := strings.Cut(stmt, "\n")
		fmt.Println(first)
	}
	// Output:
	// DROP PROCEDURE IF EXISTS fences_fence
	// CREATE PROCEDURE fences_fence(IN resource_name VARBINARY(1024), IN fence_text BLOB)
}
