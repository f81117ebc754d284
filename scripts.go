package fencelock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script lives in its own file, headed by its KEYS/ARGV/returns
// contract. Script.Run sends EVALSHA and falls back to EVAL on NOSCRIPT,
// which recovers from SCRIPT FLUSH, restarts and failovers.
var (
	//go:embed acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)
