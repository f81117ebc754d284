package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A real Cluster failover of the master that serves the locks' slot, with
// that master's last writes lost for certain: the client follows the
// promoted replica, a lease whose lock was lost is reported lost, tokens
// issued afterwards exceed every earlier one, and with MinReplicas an
// acquisition that could not replicate fails closed. All the lock names
// share a slot (hash tag {x}...), so one failover concerns them all.
func TestCluster_failover(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	opts := topologyOptions
	opts.Prefix = "{x}" // every key of every lock in one slot, on one master
	c := newClient(t, rdb, &opts)
	ctx := t.Context()
	old := cl.MasterOf(t, "{x}")
	oldRDB := old.Client(t)
	replica := cl.ReplicaOf(t, old)

	waitOpts := opts
	waitOpts.MinReplicas, waitOpts.ReplicaTimeout = 1, time.Second
	cw := newClient(t, rdb, &waitOpts)
	if l, err := cw.TryAcquire(ctx, "replicated"); err != nil {
		t.Fatalf("TryAcquire with MinReplicas 1 and the replica online: error = %v, want nil", err)
	} else if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	long := opts
	long.TTL = time.Minute
	kept, err := newClient(t, rdb, &long).TryAcquire(ctx, "kept")
	if err != nil {
		t.Fatalf("TryAcquire(kept) error = %v, want nil", err)
	}
	// Replicated before the cut: the replica's counter of t will lag the
	// tokens issued after it, and only the clock floor keeps the promoted
	// replica's next token above them.
	replicated := acquireToken(t, c, "t")
	redistest.WaitReplicasInSync(t, old, 1)

	old.BlockReplication(t)
	var maxLost int64
	for range 5 {
		maxLost = max(maxLost, acquireToken(t, c, "t"))
	}
	lost, err := c.TryAcquire(ctx, "lost")
	if err != nil {
		t.Fatalf("TryAcquire(lost) error = %v, want nil", err)
	}
	_, err = cw.TryAcquire(ctx, "unreplicated")
	if !errors.Is(err, fencelock.ErrNotReplicated) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire with MinReplicas 1 and replication cut: error = %v, want ErrNotReplicated and ErrNotAcquired", err)
	}
	if n, err := oldRDB.Exists(ctx, "{x}{unreplicated}").Result(); err != nil || n != 0 {
		t.Errorf("after the failed acquisition, EXISTS lock = %d, %v; want 0", n, err)
	}
	replicaRDB := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: replica.Addr()})
	t.Cleanup(func() { replicaRDB.Close() })
	replicaRDB.Do(ctx, "READONLY")
	if v, err := replicaRDB.Get(ctx, "{x}{t}:token").Int64(); err != nil || v != replicated {
		t.Fatalf("replica has counter %d, %v; want %d, the last token replicated before the cut", v, err, replicated)
	}

	old.Kill(t)
	start := time.Now()
	m := cl.WaitFailover(t, "{x}", old)
	t.Logf("failover to %s took %v", m.Addr(), time.Since(start).Round(time.Millisecond))
	if m != replica {
		t.Fatalf("new master = %s, want the replica %s", m.Addr(), replica.Addr())
	}

	acqCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := c.Acquire(acqCtx, "t")
	if err != nil {
		v, gerr := m.Client(t).Get(ctx, "{x}{t}").Result()
		pttl, _ := m.Client(t).PTTL(ctx, "{x}{t}").Result()
		t.Fatalf("Acquire after the failover: error = %q, want nil; lock on the new master: %q, %v, pttl %v", err, v, gerr, pttl)
	}
	if l.Token() <= maxLost {
		t.Errorf("token after the failover = %d, want > %d (issued before, lost with the master)", l.Token(), maxLost)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release error = %v, want nil", err)
	}
	select {
	case <-lost.Context().Done():
		if cause := context.Cause(lost.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
			t.Errorf("lost lease's cause = %v, want ErrLeaseLost", cause)
		}
	case <-time.After(2 * opts.TTL):
		t.Errorf("lease whose lock was lost still not lost %v after the failover", 2*opts.TTL)
	}
	if err := kept.Renew(ctx); err != nil {
		t.Errorf("Renew of the replicated lease after the failover: error = %v, want nil", err)
	}
	if err := kept.Release(ctx); err != nil {
		t.Errorf("Release of the replicated lease: error = %v, want nil", err)
	}
	// MinReplicas on the promoted master, which has no replica left.
	if _, err := cw.TryAcquire(ctx, "no-replica"); !errors.Is(err, fencelock.ErrNotReplicated) {
		t.Errorf("TryAcquire with MinReplicas 1 and no replica: error = %v, want ErrNotReplicated", err)
	}
}

// Waiters on a Cluster are woken by a release through sharded pub/sub on
// the lock's shard.
func TestCluster_wake(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t, nil)
	c := newClient(t, rdb, &fencelock.Options{TTL: 20 * time.Second, RetryInterval: time.Minute})
	testWake(t, c, func(ctx context.Context, channel string) int64 {
		// Sharded subscriptions are counted by the shard's master only.
		n, _ := cl.MasterOf(t, channel).Client(t).PubSubShardNumSub(ctx, channel).Result()
		return n[channel]
	})
}

// After a Cluster failover, the first call that reaches the dead master
// makes the client follow the promoted replica, whichever call it is and
// whichever way it runs (Lua, or the native commands of Redis 8.4+ and
// Valkey 9+): a renewal keeps the lease, a release frees the lock, within
// a few attempts rather than at go-redis's periodic reload a minute later.
func TestCluster_failoverFirstCall(t *testing.T) {
	t.Parallel()
	for _, call := range []string{"renew", "release"} {
		t.Run(call, func(t *testing.T) {
			t.Parallel()
			cl := redistest.NewCluster(t)
			rdb := cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
			ctx := t.Context()
			c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RenewInterval: -1})
			l, err := c.TryAcquire(ctx, call)
			if err != nil {
				t.Fatalf("TryAcquire error = %v", err)
			}
			// Detect the natives and load the scripts on the old master.
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("Renew error = %v", err)
			}
			old := cl.MasterOf(t, "{"+call+"}")
			redistest.WaitReplicasInSync(t, old, 1)
			old.Kill(t)
			m := cl.WaitFailover(t, "{"+call+"}", old)

			f := l.Renew
			if call == "release" {
				f = l.Release
			}
			var errs []error
			redistest.WaitFor(t, 10*time.Second, "the first "+call+" after the failover to succeed", func() bool {
				err := f(ctx)
				if err != nil {
					errs = append(errs, err)
				}
				return err == nil || errors.Is(err, fencelock.ErrLeaseLost)
			})
			if len(errs) > 0 && errors.Is(errs[len(errs)-1], fencelock.ErrLeaseLost) {
				t.Fatalf("%s after the failover: %v, want nil (the lock replicated)", call, errs)
			}
			t.Logf("%s succeeded after %d failed attempts: %v", call, len(errs), errs)
			n, err := m.Client(t).Exists(ctx, "fencelock:{"+call+"}").Result()
			if want := int64(map[string]int{"renew": 1, "release": 0}[call]); err != nil || n != want {
				t.Errorf("on the new master, EXISTS lock = %d, %v; want %d", n, err, want)
			}
		})
	}
}
