package redisfence

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// check.lua holds the rule once; the scripts that apply it start with it,
// since one Lua script cannot call another.
var (
	//go:embed check.lua
	checkLua string
	//go:embed put.lua
	putLua string
	//go:embed get.lua
	getLua string
	//go:embed delete.lua
	deleteLua string
	//go:embed load.lua
	loadLua string

	putScript    = redis.NewScript(checkLua + putLua)
	getScript    = redis.NewScript(checkLua + getLua)
	deleteScript = redis.NewScript(checkLua + deleteLua)
	loadScript   = redis.NewScript(loadLua)
)
