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

// BenchmarkWatch_lossSeen: from an admin's DEL of a held lease's lock key
// to the lease's Context ending with ErrLeaseLost (the server's tracking
// of the key, not a renewal: the next one is a minute away). Reported as
// p50 and p99. FENCELOCK_TRANSPORT chooses the transport.
func BenchmarkWatch_lossSeen(b *testing.B) {
	b.Run("standalone", func(b *testing.B) {
		s := redistest.New(b)
		benchLossSeen(b, newClient(b, s.Client(b), watchBenchOptions()), []redis.Cmdable{s.Client(b)}, 1)
	})
	b.Run("cluster", func(b *testing.B) {
		cl := redistest.NewCluster(b)
		opts := &redis.ClusterOptions{ContextTimeoutEnabled: true}
		benchLossSeen(b, newClient(b, cl.Client(b, opts), watchBenchOptions()), []redis.Cmdable{cl.Client(b, opts)}, 1)
	})
	b.Run("quorum-3", func(b *testing.B) {
		servers, nodes := quorumNodes(b, 3)
		admins := make([]redis.Cmdable, len(servers))
		for i, s := range servers {
			admins[i] = s.Client(b)
		}
		// The loss is a majority's: the keys on two nodes deleted.
		benchLossSeen(b, newQuorum(b, nodes, watchBenchOptions()), admins, 2)
	})
}

func watchBenchOptions() *fencelock.Options {
	return &fencelock.Options{TTL: 10 * time.Minute, RenewInterval: time.Minute}
}

func benchLossSeen(b *testing.B, c *fencelock.Client, admins []redis.Cmdable, deletes int) {
	ctx := b.Context()
	var ds []time.Duration
	i := 0
	for b.Loop() {
		name := "seen-" + strconv.Itoa(i)
		i++
		l, err := c.TryAcquire(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		lctx := l.Context()
		// A renewal first, as a lease held for longer would have had: the
		// watch is armed on goroutines of its own (a tracking connection,
		// a read of the key), mostly done by the time it returns. A DEL
		// before that is seen by the arming read, also at once.
		if err := l.Renew(ctx); err != nil {
			b.Fatal(err)
		}
		// On a quorum, the acquisition returns once a majority answered;
		// a node's acquire may land after a DEL sent now, and the lease
		// then rightly holds there. The DELs follow every node's lock.
		key := "fencelock:{" + name + "}"
		for _, a := range admins {
			redistest.WaitFor(b, 10*time.Second, "the lock on every node", func() bool { return a.Exists(ctx, key).Val() == 1 })
		}
		start := time.Now()
		for _, a := range admins[:deletes] {
			if err := a.Del(ctx, key).Err(); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-lctx.Done():
		case <-time.After(10 * time.Second):
			b.Fatalf("%s: the lease's Context still open 10s after its lock was deleted", name)
		}
		ds = append(ds, time.Since(start))
		if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
			b.Fatalf("Context cause = %v, want ErrLeaseLost", cause)
		}
		l.Release(ctx)
	}
	reportPercentiles(b, "", ds)
}

// BenchmarkAcquireReleaseParallel_watched: as BenchmarkAcquireReleaseParallel,
// each lease's Context asked for (so that its key is watched) before its
// release: what the watch costs a short lease.
func BenchmarkAcquireReleaseParallel_watched(b *testing.B) { benchAcquireReleaseParallel(b, true) }
