package fencelock

import (
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Every election script compiles on a real server, campaign.lua as the
// client assembles it from acquire.lua and announce.lua, and the hash
// go-redis sends with EVALSHA is the one the server computes.
func TestElectionScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]*redis.Script{
		"campaign.lua (assembled)": campaignScript,
		"announce.lua":             announceScript,
		"resign.lua":               resignScript,
		"renew_leader.lua":         renewLeaderScript,
		"leader.lua":               leaderScript,
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
