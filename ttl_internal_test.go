package fencelock

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A WithTTL Client shares its original's subscription hub and keeper:
// waiters of both queue on one subscription, which wakes either at a
// release; both Clients' leases sit in one keeper.
func TestWithTTL_shares(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	// A retry too slow to matter: only the wake-up can be in time.
	base := New(rdb, &Options{TTL: time.Minute, RetryInterval: time.Minute})
	view := base.WithTTL(10 * time.Second)
	if view.hub != base.hub || view.keep != base.keep {
		t.Fatalf("WithTTL hub, keeper = %p, %p; want the original's %p, %p", view.hub, view.keep, base.hub, base.keep)
	}
	holder, err := base.TryAcquire(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *Lease
		err error
	}
	got := make(chan result, 2)
	for _, c := range []*Client{base, view} {
		go func() {
			l, err := c.Acquire(ctx, "shared")
			got <- result{l, err}
		}()
	}
	channel := base.cfg.channel("shared")
	var subs map[string]int64
	redistest.WaitFor(t, 5*time.Second, "2 waiters queued and subscribed", func() bool {
		subs, err = rdb.PubSubNumSub(ctx, channel).Result()
		return err == nil && base.queued("shared") == 2 && subs[channel] > 0
	})
	if subs[channel] != 1 {
		t.Errorf("subscriptions to %s = %d, want 1 for both Clients' waiters", channel, subs[channel])
	}
	if got, want := base.kept(), 1; got != want {
		t.Errorf("leases kept = %d, want %d", got, want)
	}
	// Each release wakes the next waiter at once, whichever Client it
	// waits in; the TTLs (1 minute, 10 seconds) are far off.
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case r := <-got:
			if r.err != nil {
				t.Fatalf("Acquire: %v", r.err)
			}
			if n := view.kept(); n != 1 {
				t.Errorf("leases kept while one is held = %d, want 1", n)
			}
			if err := r.l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no waiter acquired within 5s of a release")
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("both waiters acquired after %v, want well within the view's TTL of 10s", d)
	}
}

// WithTTL is cheap enough to call per acquisition: no request, and a
// few allocations (the Client, its backend, a node or a quorum of them,
// and the TTL and retention boxed once for the scripts).
func TestWithTTL_allocs(t *testing.T) {
	rdb := redistest.New(t).Client(t)
	// WithTTL sends nothing: the quorum's nodes need not be up.
	nodes := []redis.UniversalClient{rdb, rdb, rdb}
	before := *rdb.PoolStats()
	for _, tc := range []struct {
		name string
		c    *Client
		max  float64
	}{
		{"node", New(rdb, nil), 4},
		{"quorum of 3", NewQuorum(nodes, nil), 8},
	} {
		if got := testing.AllocsPerRun(100, func() { tc.c.WithTTL(time.Minute) }); got > tc.max {
			t.Errorf("%s: WithTTL allocations = %v, want at most %v", tc.name, got, tc.max)
		}
	}
	if s := rdb.PoolStats(); s.Hits+s.Misses != before.Hits+before.Misses {
		t.Errorf("connections taken from the pool = %d, want %d: WithTTL sent something", s.Hits+s.Misses, before.Hits+before.Misses)
	}
}
