package fencelock

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
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
	deadline := time.Now().Add(5 * time.Second)
	var subs map[string]int64
	for base.queued("shared") < 2 || subs[channel] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: waiters queued = %d, subscriptions %v; want 2 waiters subscribed", base.queued("shared"), subs)
		}
		time.Sleep(5 * time.Millisecond)
		if subs, err = rdb.PubSubNumSub(ctx, channel).Result(); err != nil {
			t.Fatal(err)
		}
	}
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
