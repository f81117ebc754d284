package node

import (
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
)

// A retried acquire request, whose first run took the lock, gets the
// token it was issued; with a quorum's proposal it gets one issued anew,
// since another client's write-back may have raised the counter since:
// every token a quorum node returns is one it issued to that request.
func TestAcquire_retried(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg := testConfig()
	n := New(transport.GoRedis(rdb), cfg)
	for _, proposal := range []int64{0, 1} {
		var r Ref
		cfg.SetRef(&r, Lock, "retried-"+strconv.FormatInt(proposal, 10), "")
		r.Proposal = proposal
		first, _, err := n.Acquire(ctx, &r)
		if err != nil || first <= 0 {
			t.Fatalf("proposal %d: acquire = %d, %v; want a token", proposal, first, err)
		}
		again, _, err := n.Acquire(ctx, &r)
		switch {
		case err != nil:
			t.Fatalf("proposal %d: retried acquire error = %v", proposal, err)
		case proposal == 0 && again != first:
			t.Errorf("retried acquire = %d, want the token it was issued, %d", again, first)
		case proposal != 0 && again <= first:
			t.Errorf("retried acquire with a proposal = %d, want a token issued anew, > %d", again, first)
		}
		if v, err := rdb.Get(ctx, r.Token).Int64(); err != nil || v != again {
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
	cfg := testConfig()
	n := New(transport.GoRedis(rdb), cfg)
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
		var r Ref
		cfg.SetRef(&r, Lock, name, "")
		r.Proposal = proposal
		token, _, err := n.Acquire(ctx, &r)
		if err != nil || token <= 0 {
			t.Fatalf("%s: acquire = %d, %v; want a token", name, token, err)
		}
		if v, err := rdb.Get(ctx, r.Token).Int64(); err != nil || v != token {
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
	if err := rdb.Set(ctx, cfg.TokenKey("behind"), stored, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if token := acquire("behind", clock()+time.Hour.Microseconds()); token != stored+1 {
		t.Errorf("proposal below the counter %d: token = %d, want %d", stored, token, stored+1)
	}
}

// A lock in its last millisecond reads PTTL 0; the acquisition still
// reports a wait of at least a millisecond, not "no TTL", which the
// client would wait its RetryInterval for. Keys that expire within 2ms
// are tried until they are gone, many times over: the last millisecond
// is met in most runs.
func TestAcquire_lastMillisecond(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg := testConfig()
	n := New(transport.GoRedis(rdb), cfg)
	for i := range 50 {
		name := "last-ms-" + strconv.Itoa(i)
		if err := rdb.Set(ctx, cfg.LockKey(name), "another-owner", 2*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		var r Ref
		cfg.SetRef(&r, Lock, name, "")
		for {
			token, held, err := n.Acquire(ctx, &r)
			if err != nil {
				t.Fatal(err)
			}
			if token > 0 {
				n.Release(ctx, &r)
				break
			}
			if held <= 0 {
				t.Fatalf("%s: acquire of a lock that expires within 2ms = no token, wait %v; want a wait of at least 1ms", name, held)
			}
		}
	}
}
