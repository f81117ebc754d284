package tests

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// topologyOptions are the Options of the failover tests: a TTL short
// enough that a lease whose lock was lost is reported lost within the
// test, long enough for a loaded machine.
var topologyOptions = fencelock.Options{TTL: 3 * time.Second, RetryInterval: 100 * time.Millisecond}

// A real Sentinel failover, with the master's last writes lost for
// certain: the client follows the new master, a lease whose lock was lost
// is reported lost, tokens issued afterwards exceed every earlier one
// (those lost with the master included), for a lock and for a semaphore's
// slot, and with MinReplicas an acquisition that could not replicate
// fails closed.
func TestSentinel_failover(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	rdb := sentinelClient(t, g, &redis.FailoverOptions{ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	c := newClient(t, rdb, &topologyOptions)
	ctx := t.Context()
	old := g.Master(t)
	oldRDB := old.Client(t)

	// Replicated before the cut: this lock survives the failover. Its TTL
	// outlasts the failover.
	long := topologyOptions
	long.TTL = time.Minute
	kept, err := newClient(t, rdb, &long).TryAcquire(ctx, "kept")
	if err != nil {
		t.Fatalf("TryAcquire(kept) error = %v, want nil", err)
	}
	waitOpts := topologyOptions
	waitOpts.MinReplicas, waitOpts.ReplicaTimeout = 1, time.Second
	cw := newClient(t, rdb, &waitOpts)
	if l, err := cw.TryAcquire(ctx, "replicated"); err != nil {
		t.Fatalf("TryAcquire with MinReplicas 1 and replicas online: error = %v, want nil", err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	// Replicated before the cut: the replicas' counter of x will lag the
	// tokens issued after it, and only the clock floor keeps the promoted
	// replica's next token above them.
	replicated := acquireToken(t, c, "x")
	redistest.WaitReplicasInSync(t, old, 2)

	old.BlockReplication(t)
	// Issued on the master only: several tokens, and a lease held.
	var maxLost int64
	for range 5 {
		maxLost = max(maxLost, acquireToken(t, c, "x"))
	}
	lost, err := c.TryAcquire(ctx, "lost")
	if err != nil {
		t.Fatalf("TryAcquire(lost) error = %v, want nil", err)
	}
	// A semaphore's slot 0, issued on the master only, and a permit held.
	sem := c.Semaphore("s", 2)
	var maxLostPermit int64
	for range 3 {
		p, err := sem.TryAcquire(ctx)
		if err != nil || p.Slot() != 0 {
			t.Fatalf("permit before the failover = %v, %v; want slot 0", p, err)
		}
		maxLostPermit = max(maxLostPermit, p.Token())
		if err := p.Release(ctx); err != nil {
			t.Fatalf("permit Release error = %v", err)
		}
	}
	lostPermit, err := sem.TryAcquire(ctx)
	if err != nil || lostPermit.Slot() != 0 {
		t.Fatalf("held permit before the failover = %v, %v; want slot 0", lostPermit, err)
	}
	maxLostPermit = max(maxLostPermit, lostPermit.Token())
	// MinReplicas: no replica acknowledges, so the acquisition fails
	// closed and leaves no lock.
	_, err = cw.TryAcquire(ctx, "unreplicated")
	if !errors.Is(err, fencelock.ErrNotReplicated) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire with MinReplicas 1 and replication cut: error = %v, want ErrNotReplicated and ErrNotAcquired", err)
	}
	if n, err := oldRDB.Exists(ctx, "fencelock:{unreplicated}").Result(); err != nil || n != 0 {
		t.Errorf("after the failed acquisition, EXISTS lock = %d, %v; want 0", n, err)
	}
	// The loss is certain: no replica has the tokens or the lock.
	for _, s := range g.Servers[1:] {
		r := s.Client(t)
		if v, err := r.Get(ctx, "fencelock:{x}:token").Int64(); err != nil || v != replicated {
			t.Fatalf("replica %s has counter %d, %v; want %d, the last token replicated before the cut", s.Addr(), v, err, replicated)
		}
		if n, _ := r.Exists(ctx, "fencelock:{lost}", "fencelock:{s}:permit:0").Result(); n != 0 {
			t.Fatalf("replica %s has the lock or the permit that must be lost", s.Addr())
		}
	}

	old.Kill(t)
	start := time.Now()
	m := g.WaitFailover(t, old)
	t.Logf("failover to %s took %v", m.Addr(), time.Since(start).Round(time.Millisecond))

	// Followed: the client acquires on the new master.
	acqCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := c.Acquire(acqCtx, "x")
	if err != nil {
		t.Fatalf("Acquire(x) after the failover: error = %v, want nil", err)
	}
	if l.Token() <= maxLost {
		t.Errorf("token after the failover = %d, want > %d (issued before, lost with the master)", l.Token(), maxLost)
	}
	if v, err := m.Client(t).Get(ctx, "fencelock:{x}").Result(); err != nil || v == "" {
		t.Errorf("lock key on the new master: %q, %v; want it set", v, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release(x) error = %v, want nil", err)
	}
	// The lease whose lock was lost is reported lost by its keeper.
	select {
	case <-lost.Context().Done():
		if cause := context.Cause(lost.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
			t.Errorf("lost lease's cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(2 * topologyOptions.TTL):
		t.Errorf("lease whose lock was lost still not lost %v after the failover", 2*topologyOptions.TTL)
	}
	if err := lost.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release of the lost lease: error = %v, want ErrLeaseLost", err)
	}
	// The permit lost with the master: its slot is issued anew with a
	// greater token, and the lost permit is reported lost, so slot 0 never
	// has two valid holders.
	p, err := sem.Acquire(acqCtx)
	if err != nil || p.Slot() != 0 {
		t.Fatalf("permit after the failover = %v, %v; want slot 0 (lost with the master)", p, err)
	}
	if p.Token() <= maxLostPermit {
		t.Errorf("slot 0's token after the failover = %d, want > %d (issued before, lost with the master)", p.Token(), maxLostPermit)
	}
	select {
	case <-lostPermit.Context().Done():
		if cause := context.Cause(lostPermit.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
			t.Errorf("lost permit's cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(2 * topologyOptions.TTL):
		t.Errorf("permit whose slot was lost still not lost %v after the failover", 2*topologyOptions.TTL)
	}
	if err := p.Release(ctx); err != nil {
		t.Errorf("permit Release after the failover: %v", err)
	}
	// The replicated lease survives and renews on the new master.
	if err := kept.Renew(ctx); err != nil {
		t.Errorf("Renew of the replicated lease after the failover: error = %v, want nil", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Errorf("Release of the replicated lease: error = %v, want nil", err)
	}
}

// Waiters on a Sentinel-managed master are woken by a release.
func TestSentinel_wake(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	rdb := sentinelClient(t, g, nil)
	c := newClient(t, rdb, &fencelock.Options{TTL: 20 * time.Second, RetryInterval: time.Minute})
	testWake(t, c, func(ctx context.Context, channel string) int64 {
		n, _ := rdb.PubSubNumSub(ctx, channel).Result()
		return n[channel]
	})
}

// testWake holds a lock, starts a waiter, and releases once the waiter is
// subscribed (numSub); the waiter must get the lock through the publish,
// its retry interval being far longer than the test's bound.
func testWake(t *testing.T, c *fencelock.Client, numSub func(ctx context.Context, channel string) int64) {
	t.Helper()
	ctx := t.Context()
	for i := range 3 {
		name := "wake" + strconv.Itoa(i)
		l, err := c.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("TryAcquire error = %v, want nil", err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got := make(chan error, 1)
		go func() {
			w, err := c.Acquire(waitCtx, name)
			if err == nil {
				err = w.Release(context.WithoutCancel(waitCtx))
			}
			got <- err
		}()
		channel := "fencelock:{" + name + "}:released"
		redistest.WaitFor(t, 5*time.Second, "the waiter to subscribe", func() bool { return numSub(ctx, channel) == 1 })
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release error = %v, want nil", err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiting Acquire error = %v, want nil (the release must wake it)", err)
		}
		cancel()
	}
}
