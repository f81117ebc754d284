package redisfence

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/redistest"
)

// TestScripts loads every script into a real server, so a Lua syntax error
// fails here by name, and checks the hash Script.Run will send.
func TestScripts(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]*redis.Script{
		"put": putScript, "get": getScript, "delete": deleteScript, "load": loadScript,
	} {
		sha, err := s.Load(t.Context(), rdb).Result()
		if err != nil || sha != s.Hash() {
			t.Errorf("SCRIPT LOAD %s = %q, %v; want %q, nil", name, sha, err, s.Hash())
		}
	}
}
