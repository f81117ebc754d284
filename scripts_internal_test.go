package fencelock

import (
	"strconv"
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

// A retried acquire request, whose first run took the lock, gets the
// token it was issued; with a quorum's proposal it gets one issued anew,
// since another client's write-back may have raised the counter since:
// every token a quorum node returns is one it issued to that request.
func TestAcquire_retried(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg, err := (&Options{}).config()
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(rdb, &cfg)
	for _, proposal := range []int64{0, 1} {
		var r lockRef
		cfg.setRef(&r, "retried-"+strconv.FormatInt(proposal, 10), "")
		r.proposal = proposal
		first, _, err := n.acquire(ctx, &r)
		if err != nil || first <= 0 {
			t.Fatalf("proposal %d: acquire = %d, %v; want a token", proposal, first, err)
		}
		again, _, err := n.acquire(ctx, &r)
		switch {
		case err != nil:
			t.Fatalf("proposal %d: retried acquire error = %v", proposal, err)
		case proposal == 0 && again != first:
			t.Errorf("retried acquire = %d, want the token it was issued, %d", again, first)
		case proposal != 0 && again <= first:
			t.Errorf("retried acquire with a proposal = %d, want a token issued anew, > %d", again, first)
		}
		if v, err := rdb.Get(ctx, r.token).Int64(); err != nil || v != again {
			t.Errorf("proposal %d: counter = %d, %v; want %d", proposal, v, err, again)
		}
	}
}
