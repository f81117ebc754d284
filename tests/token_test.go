package tests

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// acquireToken acquires and releases name, returning the token issued.
func acquireToken(t *testing.T, c *fencelock.Client, name string) int64 {
	t.Helper()
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q) error = %v, want nil", name, err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) error = %v, want nil", name, err)
	}
	return l.Token()
}

func TestToken_increases(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	c := newClient(t, rdb, nil)
	ctx := t.Context()
	const name = "orders"
	tokenKey := "fencelock:{" + name + "}:token"

	last := int64(0)
	next := func(step string) {
		t.Helper()
		tok := acquireToken(t, c, name)
		if tok <= last {
			t.Fatalf("%s: token = %d, want > %d", step, tok, last)
		}
		last = tok
	}
	for range 5 {
		next("acquire/release cycle")
	}
	if last < 1<<40 {
		t.Errorf("token = %d, want a microsecond clock floor above 2^40", last)
	}

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	next("after FLUSHALL")

	s.Restart(t, false)
	next("after a restart without persistence")

	if err := rdb.Del(ctx, tokenKey).Err(); err != nil {
		t.Fatal(err)
	}
	next("after the counter key was deleted")

	// Expire the counter for real and wait until the server has dropped it.
	if err := rdb.PExpire(ctx, tokenKey, time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 5*time.Second, "the counter key to expire", func() bool { return rdb.Exists(ctx, tokenKey).Val() == 0 })
	next("after the counter key expired")

	// A counter behind the clock, as a replica promoted while it lagged
	// has: the clock floor, not the counter, keeps the token above the
	// last one issued.
	if err := rdb.Set(ctx, tokenKey, last-1_000_000, 0).Err(); err != nil {
		t.Fatal(err)
	}
	next("after the counter was set 1s behind the last token")

	// Tokens for another name are independent, and tokens of a name are
	// ahead of its counter's last value by exactly one when the counter is
	// ahead of the clock: exact integer arithmetic far above 2^40.
	const ahead = int64(1)<<52 + 12345
	if err := rdb.Set(ctx, tokenKey, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := acquireToken(t, c, name); got != ahead+1 {
		t.Errorf("token after counter %d = %d, want %d", ahead, got, ahead+1)
	}
	stored, err := rdb.Get(ctx, tokenKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.FormatInt(ahead+1, 10); stored != want {
		t.Errorf("stored counter = %q, want %q (exact decimal, no float formatting)", stored, want)
	}
}

func TestToken_retention(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	for _, tc := range []struct {
		retention    time.Duration
		minMS, maxMS int64 // bounds on the counter's PTTL (the TTL, 10s, plus the retention); -1 means none
	}{
		{0, 24*3600*1000 + 9*1000, 24*3600*1000 + 10*1000}, // the default, 24h
		{time.Minute, 69 * 1000, 70 * 1000},
		{-1, -1, -1}, // kept forever
	} {
		prefix := fmt.Sprintf("retention%d:", tc.retention)
		c := newClient(t, rdb, &fencelock.Options{TokenRetention: tc.retention, Prefix: prefix})
		acquireToken(t, c, "x")
		pttl, err := rdb.Do(t.Context(), "PTTL", prefix+"{x}:token").Int64()
		if err != nil || pttl < tc.minMS || pttl > tc.maxMS {
			t.Errorf("TokenRetention %v: counter PTTL = %dms, %v; want in [%d, %d]", tc.retention, pttl, err, tc.minMS, tc.maxMS)
		}
	}
}

// A lease renewed for longer than TokenRetention keeps its token counter:
// the retention runs from the last acquisition or renewal, so a counter
// lapses only once its lock has been unused that long. The counters start
// ahead of the servers' clocks (a clock that ran ahead and was corrected),
// so only they, not the clock floor, keep the next token above the held
// one.
func TestToken_retentionRenewed(t *testing.T) {
	t.Parallel()
	const (
		ttl  = time.Second
		hold = 3*ttl + ttl/2 // several retentions
		name = "long-hold"
	)
	opts := &fencelock.Options{TTL: ttl, TokenRetention: ttl, RenewInterval: ttl / 5}
	for _, tc := range []struct {
		name  string
		nodes int
	}{{"single", 1}, {"quorum", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			servers := make([]*redistest.Server, tc.nodes)
			for i := range servers {
				servers[i] = redistest.New(t)
			}
			nodes := quorumClients(t, servers)
			c := newClient(t, nodes[0], opts)
			if tc.nodes > 1 {
				c = newQuorum(t, nodes, opts)
			}
			ctx := t.Context()
			tokenKey := "fencelock:{" + name + "}:token"
			ahead := time.Now().Add(time.Hour).UnixMicro()
			for _, rdb := range nodes {
				if err := rdb.Set(ctx, tokenKey, ahead, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire error = %v, want nil", err)
			}
			if l.Token() <= ahead {
				t.Fatalf("token = %d, want > %d (the counter)", l.Token(), ahead)
			}
			// Held, and renewed by the keeper, for several retentions: the
			// premise of the test is the time that passes.
			select {
			case <-l.Context().Done():
				t.Fatalf("lease lost while renewed: %v", context.Cause(l.Context()))
			case <-time.After(hold):
			}
			for i, rdb := range nodes {
				v, err := rdb.Get(ctx, tokenKey).Int64()
				if err != nil || v < l.Token() {
					t.Errorf("node %d: counter after a %v hold = %d, %v; want >= %d (kept while the lease is renewed)", i, hold, v, err, l.Token())
				}
				if pttl := rdb.PTTL(ctx, tokenKey).Val(); pttl <= ttl/2 || pttl > 2*ttl {
					t.Errorf("node %d: counter PTTL = %v, want in (%v, %v]: refreshed by the renewals (TTL plus retention), still expiring", i, pttl, ttl/2, 2*ttl)
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release error = %v, want nil", err)
			}
			if got := acquireToken(t, c, name); got <= l.Token() {
				t.Errorf("next token = %d, want > %d (the long-held lease's)", got, l.Token())
			}
		})
	}
}
