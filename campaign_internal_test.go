package fencelock

import (
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// Every election script compiles on a real server, campaign.lua as the
// client assembles it from acquire.lua and announce.lua, and the hash
// go-redis sends with EVALSHA is the one the server computes.
func TestElectionScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]runner{
		"campaign.lua (assembled)": campaignRun,
		"announce.lua":             announceRun,
		"resign.lua":               resignRun,
		"renew_leader.lua":         renewLeaderRun,
		"leader.lua":               leaderRun,
	} {
		loadRunner(t, rdb, name, s)
	}
}
