package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A lease whose Context someone follows learns at once that its lock was
// deleted, overwritten or expired under it (the server's tracking of the
// key), not at its next renewal, a minute away here: the Context ends with
// ErrLeaseLost. Its own renewals, and a Release, are no loss.
func TestWatch_lossSeenAtOnce(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	c := newClient(t, s.Client(t), &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute})
	for name, change := range map[string]func(key string) error{
		"deleted":     func(key string) error { return admin.Del(ctx, key).Err() },
		"overwritten": func(key string) error { return admin.Set(ctx, key, "another-owner", time.Minute).Err() },
		"expired":     func(key string) error { return admin.PExpire(ctx, key, time.Millisecond).Err() },
	} {
		l, err := c.TryAcquire(ctx, "watched-"+name)
		if err != nil {
			t.Fatal(err)
		}
		lctx := l.Context()
		// Renewed by hand: the watch sees its own lease's writes as such.
		for range 3 {
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("%s: Renew: %v", name, err)
			}
		}
		if err := change("fencelock:{watched-" + name + "}"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the lease's Context still open 10s after its lock was %s (next renewal in a minute)", name, name)
		}
		if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
			t.Errorf("%s: Context cause = %v, want ErrLeaseLost", name, cause)
		}
		if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
			t.Errorf("%s: Release = %v, want ErrLeaseLost", name, err)
		}
	}
	// A Release ends the Context with context.Canceled, not a loss.
	l, err := c.TryAcquire(ctx, "watched-released")
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if cause := context.Cause(lctx); !errors.Is(cause, context.Canceled) || errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Context cause after Release = %v, want context.Canceled", cause)
	}
}

// On a quorum, the lease is lost once a majority of the nodes lost the
// lock: one node's delete is no loss, a second one's is.
func TestWatch_quorumMajority(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	c := newQuorum(t, nodes, &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute})
	l, err := c.TryAcquire(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	admins := make([]*redis.Client, len(servers))
	for i, s := range servers {
		admins[i] = s.Client(t)
	}
	if err := admins[0].Del(ctx, "fencelock:{watched}").Err(); err != nil {
		t.Fatal(err)
	}
	// The lease holds on two nodes: a renewal says so, and the watch must
	// not have ended it.
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew with the lock on two nodes of three: %v", err)
	}
	if lctx.Err() != nil {
		t.Fatalf("Context ended with the lock on two nodes of three: %v", context.Cause(lctx))
	}
	if err := admins[1].Del(ctx, "fencelock:{watched}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease's Context still open 10s after a majority lost its lock")
	}
	if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Context cause = %v, want ErrLeaseLost", cause)
	}
	l.Release(ctx)
}

// On a Cluster, a lease learns of its loss at once whichever master
// serves its lock, and a loss on one master ends no other lease's
// Context: the tracking follows each key to its master.
func TestWatch_cluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	admin := cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true})
	c := newClient(t, cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true}), &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute})
	ctx := t.Context()
	// Names until two masters serve two each: the hash tags spread them.
	byMaster := map[*redistest.Server][]string{}
	for i := 0; len(byMaster) < 2 || countAtLeast(byMaster, 2) < 2; i++ {
		name := fmt.Sprintf("watched-%d", i)
		m := cl.MasterOf(t, "{"+name+"}")
		byMaster[m] = append(byMaster[m], name)
	}
	type held struct {
		name string
		l    *fencelock.Lease
		ctx  context.Context
	}
	var all []held
	for _, names := range byMaster {
		for _, name := range names {
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire(%s): %v", name, err)
			}
			t.Cleanup(func() { l.Release(context.Background()) })
			all = append(all, held{name, l, l.Context()})
		}
	}
	for i, h := range all {
		if err := admin.Del(ctx, "fencelock:{"+h.name+"}").Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s's lock deleted (its next renewal in a minute)", h.name)
		waitDone(t, h.ctx, 10*time.Second)
		if cause := context.Cause(h.ctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
			t.Errorf("%s: Context cause = %v, want ErrLeaseLost", h.name, cause)
		}
		for _, other := range all[i+1:] {
			if err := other.ctx.Err(); err != nil {
				t.Errorf("%s's Context ended (%v) when %s's lock was deleted: got a loss, want none", other.name, context.Cause(other.ctx), h.name)
			}
		}
	}
}

// countAtLeast returns how many of m's lists hold n names or more.
func countAtLeast(m map[*redistest.Server][]string, n int) int {
	k := 0
	for _, names := range m {
		if len(names) >= n {
			k++
		}
	}
	return k
}

// A watched lease on a Cluster whose master fails over: its lock,
// replicated before, is still its own on the promoted replica, so its
// Context stays open; and the watch follows the lock there, so a DEL on
// the new master ends the Context at once, not at the next renewal a
// minute away. Whether the watch tracks again before or after the DEL,
// it reads the lock gone.
func TestWatch_clusterFailover(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	rdb := cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
	c := newClient(t, rdb, &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "watched")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	lctx := l.Context()
	old := cl.MasterOf(t, "{watched}")
	redistest.WaitReplicasInSync(t, old, 1)
	old.Kill(t)
	m := cl.WaitFailover(t, "{watched}", old)
	if err := lctx.Err(); err != nil {
		t.Fatalf("after the failover the lease's Context ended (%v), want it open: its lock was replicated", context.Cause(lctx))
	}
	if err := m.Client(t).Del(ctx, "fencelock:{watched}").Err(); err != nil {
		t.Fatal(err)
	}
	t.Log("the lock deleted on the promoted master (its next renewal in a minute)")
	waitDone(t, lctx, 30*time.Second)
	if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Context cause = %v, want ErrLeaseLost", cause)
	}
}
