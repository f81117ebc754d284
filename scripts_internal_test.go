package fencelock

import (
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Every embedded script compiles on a real server, and the hash go-redis
// sends with EVALSHA is the one the server computes.
func TestScripts_load(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for name, s := range map[string]runner{
		"lua/acquire.lua":          acquireRun,
		"lua/renew.lua":            renewRun,
		"lua/release.lua":          releaseRun,
		"lua/quorum_writeback.lua": writebackRun,
		"lua/holder.lua":           holderRun,
	} {
		loadRunner(t, rdb, name, s)
	}
}

// loadRunner loads s's script on rdb and checks that the server computes
// the hash s sends with EVALSHA.
func loadRunner(t *testing.T, rdb *redis.Client, name string, s runner) {
	t.Helper()
	sha, err := rdb.ScriptLoad(t.Context(), s.src.(string)).Result()
	if err != nil {
		t.Errorf("SCRIPT LOAD %s error = %v", name, err)
		return
	}
	if sha != s.sha {
		t.Errorf("SCRIPT LOAD %s = %s, want %s", name, sha, s.sha)
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

// A node issues max(stored + 1, its clock, the proposal), the proposal
// capped at 250 ms ahead of its clock: a proposal within the cap is issued
// as it is, so that nodes which agree on time issue the same token; one
// further ahead, from a client whose clock runs fast, is not, so that no
// client can push a lock's tokens ahead of time; a counter ahead of the
// proposal wins.
func TestAcquire_proposal(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg, err := (&Options{}).config()
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(rdb, &cfg)
	clock := func() int64 {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMicro()
	}
	const capped = 250_000 // µs
	acquire := func(name string, proposal int64) int64 {
		t.Helper()
		var r lockRef
		cfg.setRef(&r, name, "")
		r.proposal = proposal
		token, _, err := n.acquire(ctx, &r)
		if err != nil || token <= 0 {
			t.Fatalf("%s: acquire = %d, %v; want a token", name, token, err)
		}
		if v, err := rdb.Get(ctx, r.token).Int64(); err != nil || v != token {
			t.Errorf("%s: counter = %d, %v; want the token issued, %d", name, v, err, token)
		}
		return token
	}

	before := clock()
	proposal := before + 200_000
	token := acquire("within", proposal)
	after := clock()
	// The node's clock passes the proposal only if the request took 200ms.
	if lo, hi := proposal, max(proposal, after); token < lo || token > hi {
		t.Errorf("proposal at clock + 200ms: token = clock + %dµs, want the proposal, clock + 200000µs", token-before)
	}

	before = clock()
	token = acquire("ahead", before+time.Hour.Microseconds())
	after = clock()
	if lo, hi := before, after+capped; token < lo || token > hi {
		t.Errorf("proposal at clock + 1h: token = clock + %dµs, want in [clock, clock + %dµs]: at most 250ms ahead of the node's clock", token-before, after-before+capped)
	}

	stored := clock() + 2*time.Hour.Microseconds()
	if err := rdb.Set(ctx, cfg.tokenKey("behind"), stored, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if token := acquire("behind", clock()+time.Hour.Microseconds()); token != stored+1 {
		t.Errorf("proposal below the counter %d: token = %d, want %d", stored, token, stored+1)
	}
}
