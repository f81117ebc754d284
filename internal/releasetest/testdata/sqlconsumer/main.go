// A consumer of package sqlfence alone, which brings its own driver (none
// here): its go.sum must not gain the drivers that sqlfence's tests use.
package main

import (
	"fmt"

	"github.com/fencelock/fencelock/fence/sqlfence"
)

func main() {
	ddl, err := sqlfence.FencesDDL(sqlfence.Postgres, "fences")
	fmt.Println("sqlfence:", err == nil && ddl != "")
}
