package fencelock

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of what a Client keeps for its calls: its waiters' queues, what
// WithTTL shares, the Options it derives.

// queued returns how many of c's Acquire calls wait for name.
func (c *Client) queued(name string) int {
	n, _ := c.hub.Queued(c.cfg.Channel(name))
	return n
}

// A Client's waiters get the lock in the order they started waiting, and
// a new Acquire queues behind them rather than barging in.
func TestClient_Acquire_fifo(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := New(rdb, &Options{RetryInterval: time.Minute})
	holder, err := c.TryAcquire(ctx, "fifo")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}

	const waiters = 4
	got := make(chan int, waiters)
	leases := make(chan *Lease, waiters)
	for i := range waiters {
		go func() {
			l, err := c.Acquire(ctx, "fifo")
			if err != nil {
				t.Errorf("waiter %d: Acquire error = %v", i, err)
				got <- -1
				return
			}
			got <- i
			leases <- l
		}()
		for c.queued("fifo") < i+1 { // wait until it is queued
			time.Sleep(time.Millisecond)
		}
	}
	// Each release wakes the next waiter at once: the retry interval is a
	// minute, so a waiter left to its timer would show.
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	for want := range waiters {
		if i := <-got; i != want {
			t.Fatalf("waiter %d acquired next, want waiter %d (FIFO)", i, want)
		}
		if d := time.Since(released); d > 5*time.Second {
			t.Errorf("waiter %d acquired %v after the release, want < 5s (woken, RetryInterval 1m)", want, d)
		}
		released = time.Now()
		if err := (<-leases).Release(ctx); err != nil {
			t.Fatalf("Release error = %v", err)
		}
	}
	if n := c.queued("fifo"); n != 0 {
		t.Errorf("%d waiters still queued after all acquired, want 0", n)
	}
}

// When the head of a semaphore's queue leaves holding a permit, the next
// waiter tries at once: another permit may be free with no message to
// say so (two permits freed, one message). The retry interval and the TTL
// are far longer than the test's bound.
func TestSemaphore_promotedTries(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &Options{TTL: time.Minute, RetryInterval: time.Minute}
	ctx := t.Context()
	holders := New(s.Client(t), opts).Semaphore("promoted", 2)
	for range 2 {
		if _, err := holders.TryAcquire(ctx); err != nil {
			t.Fatalf("TryAcquire error = %v", err)
		}
	}
	c := New(s.Client(t), opts)
	sem := c.Semaphore("promoted", 2)
	channel := sem.want.sem.Channel
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The waiters hold their permits until both have one: a release
	// would wake the other.
	got := make(chan *Lease, 2)
	for range 2 {
		go func() {
			l, err := sem.Acquire(wctx)
			if err != nil {
				t.Errorf("waiting Acquire error = %v, want a permit", err)
			}
			got <- l
		}()
	}
	redistest.WaitFor(t, 5*time.Second, "both waiters queued and subscribed", func() bool {
		n, ready := c.hub.Queued(channel)
		return n == 2 && ready
	})
	admin := s.Client(t)
	if err := admin.Del(ctx, sem.want.sem.Locks[0], sem.want.sem.Locks[1]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Publish(ctx, channel, "").Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if l := <-got; l != nil {
			defer l.Release(ctx)
		}
	}
}

// A semaphore's waiters in one Client get their permits in the order they
// queued.
func TestSemaphore_fifo(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &Options{TTL: time.Minute, RetryInterval: time.Minute}
	ctx := t.Context()
	c := New(s.Client(t), opts)
	sem := c.Semaphore("fifo", 1)
	first, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	const waiters = 4
	order := make(chan int, waiters)
	queued := func(n int) func() bool {
		return func() bool {
			queued, _ := c.hub.Queued(sem.want.sem.Channel)
			return queued == n
		}
	}
	for i := range waiters {
		go func() {
			l, err := sem.Acquire(wctx)
			if err != nil {
				t.Errorf("waiter %d: Acquire error = %v", i, err)
				order <- -1
				return
			}
			order <- i
			l.Release(ctx)
		}()
		redistest.WaitFor(t, 5*time.Second, "the waiter to queue", queued(i+1))
	}
	first.Release(ctx)
	for want := range waiters {
		if got := <-order; got != want {
			t.Fatalf("permit %d went to waiter %d, want %d (FIFO)", want, got, want)
		}
	}
}

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
	channel := base.cfg.Channel("shared")
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

// A quorum node's request timeout is small against the TTL by default,
// and leaves room for WAIT with MinReplicas.
func TestOptions_nodeTimeoutDefault(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want time.Duration
	}{
		{Options{TTL: time.Second}, 100 * time.Millisecond},
		{Options{}, 500 * time.Millisecond},
		{Options{TTL: time.Minute}, 500 * time.Millisecond},
		{Options{TTL: time.Minute, MinReplicas: 1}, 1500 * time.Millisecond},
		{Options{TTL: time.Minute, NodeTimeout: 3 * time.Second}, 3 * time.Second},
	} {
		cfg, err := tc.opts.config()
		if err != nil || cfg.NodeTimeout != tc.want {
			t.Errorf("Options %+v: nodeTimeout = %v, %v; want %v, nil", tc.opts, cfg.NodeTimeout, err, tc.want)
		}
	}
}
