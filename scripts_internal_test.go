package fencelock

import (
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Every embedded script compiles on a real server, and the hash go-redis
// sends with EVALSHA is the one the server computes.
func TestScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]*redis.Script{
		"acquire.lua":          acquireScript,
		"renew.lua":            renewScript,
		"release.lua":          releaseScript,
		"quorum_writeback.lua": writebackScript,
	} {
		sha, err := s.Load(t.Context(), rdb).Result()
		if err != nil {
			t.Errorf("SCRIPT LOAD %s error = %v", name, err)
			continue
		}
		if sha != s.Hash() {
			t.Errorf("SCRIPT LOAD %s = %s, want %s", name, sha, s.Hash())
		}
	}
}
