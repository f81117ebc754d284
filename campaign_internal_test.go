package fencelock

import (
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// Every election script compiles on a real server, lua/campaign.lua as the
// client assembles it from lua/acquire.lua and lua/announce.lua, and the hash
// go-redis sends with EVALSHA is the one the server computes.
func TestElectionScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]runner{
		"lua/campaign.lua (assembled)": campaignRun,
		"lua/announce.lua":             announceRun,
		"lua/resign.lua":               resignRun,
		"lua/renew_leader.lua":         renewLeaderRun,
		"lua/leader.lua":               leaderRun,
	} {
		loadRunner(t, rdb, name, s)
	}
}
