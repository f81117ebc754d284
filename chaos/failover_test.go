package chaos_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// idle answers the holders' reads with no fault for d.
func idle(r *run, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case ev := <-r.reads:
			ev.reply <- nil
		}
	}
}

// idleUntil answers reads with no fault until cond holds, polled, or
// bound passes; it reports whether cond held.
func idleUntil(r *run, bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		idle(r, ttl/5)
	}
	return true
}

// failover is the nemesis of the failover scenarios: it cuts the master
// off from its replicas, waits for a holder to read the counter under a
// lease taken after the cut (a lease only the master knows of), stalls
// that holder, crashes the master, waits for a replica to take over and
// for a newer holder to read the counter, and then lets the stalled
// holder write with its old fence. The old master restarts empty and
// rejoins as a replica.
type failover struct {
	master func(r *run) *redistest.Server                        // the lock's master now
	wait   func(r *run, old *redistest.Server) *redistest.Server // the new master
}

func (fo failover) nemesis(r *run) {
	t := r.t
	idle(r, between(r.rand, 2, 6))
	m := fo.master(r)
	m.BlockReplication(t)
	var ev readEvent
	got := false
	select {
	case ev = <-r.reads:
		got = true
	case <-time.After(2 * time.Second):
	}
	stall := make(chan struct{})
	release := sync.OnceFunc(func() { close(stall) })
	defer release() // also when a wait below fails the test
	if got {
		ev.reply <- stall
	}
	m.Kill(t)
	fo.wait(r, m)
	if got {
		r.faults++
		idleUntil(r, 10*time.Second, func() bool {
			return r.rec.Any(func(op chaos.Op) bool {
				return op.Input.Resource == chaos.Counter && op.Input.Op == chaos.OpGet &&
					op.Output.Result == chaos.ResultOK && op.Input.Fence.Token > ev.fence.Token
			})
		})
		release()
	}
	m.Start(t) // empty: nothing was saved; it rejoins as a replica
	idle(r, 6*ttl)
}

// TestSentinelFailover crashes a Sentinel group's master whose replicas
// were cut off, so the lock and the token counter that the new master
// has lag behind: two holders may then both believe they hold the lock.
func TestSentinelFailover(t *testing.T) {
	runScenario(t, scenario{name: "sentinel-failover", adapter: "memory", shortRuns: 1, setup: func(t *testing.T) *world {
		g := redistest.NewSentinelGroup(t)
		noSyncDelay(t, g.Servers...)
		var clients []*fencelock.Client
		for range holderCount {
			o := redisOptions("")
			rdb := g.Client(t, &redis.FailoverOptions{
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
				ContextTimeoutEnabled: true, PoolSize: o.PoolSize,
			})
			clients = append(clients, lockClient(rdb))
		}
		fo := failover{
			master: func(r *run) *redistest.Server { return g.Master(r.t) },
			wait:   func(r *run, old *redistest.Server) *redistest.Server { return g.WaitFailover(r.t, old) },
		}
		return &world{
			lock:     func(i int) *fencelock.Client { return clients[i] },
			resource: memoryResource,
			holders:  goroutineHolders,
			nemesis:  fo.nemesis,
			settle: func(t *testing.T) {
				// The sentinels may still be reconfiguring, or have failed
				// over once more under load: wait until they agree on a
				// master that has both replicas in sync.
				redistest.WaitFor(t, time.Minute, "the Sentinel group to settle", func() bool { return settled(t, g) })
			},
		}
	}})
}

// TestClusterFailover does the same to the Cluster master that serves the
// lock's slot.
func TestClusterFailover(t *testing.T) {
	runScenario(t, scenario{name: "cluster-failover", adapter: "memory", shortRuns: 1, setup: func(t *testing.T) *world {
		c := redistest.NewCluster(t)
		noSyncDelay(t, c.Servers...)
		var clients []*fencelock.Client
		for range holderCount {
			o := redisOptions("")
			rdb := c.Client(t, &redis.ClusterOptions{
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
				ContextTimeoutEnabled: true, PoolSize: o.PoolSize,
			})
			clients = append(clients, lockClient(rdb))
		}
		var lastKey string
		key := func(r *run) string { return "{" + r.name + "}" }
		fo := failover{
			master: func(r *run) *redistest.Server { return c.MasterOf(r.t, key(r)) },
			wait: func(r *run, old *redistest.Server) *redistest.Server {
				lastKey = key(r)
				return c.WaitFailover(r.t, lastKey, old)
			},
		}
		return &world{
			lock:     func(i int) *fencelock.Client { return clients[i] },
			resource: memoryResource,
			holders:  goroutineHolders,
			nemesis:  fo.nemesis,
			settle: func(t *testing.T) {
				if lastKey != "" {
					c.WaitHealthy(t)
					redistest.WaitReplicasInSync(t, c.MasterOf(t, lastKey), 1)
				}
			},
		}
	}})
}

// noSyncDelay makes the servers, when masters, start a full sync to a
// (re)joining replica at once rather than after the default 5 s.
func noSyncDelay(t *testing.T, servers ...*redistest.Server) {
	for _, s := range servers {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
		err := rdb.ConfigSet(t.Context(), "repl-diskless-sync-delay", "0").Err()
		rdb.Close()
		if err != nil {
			t.Fatalf("CONFIG SET repl-diskless-sync-delay on %s: %v", s.Addr(), err)
		}
	}
}

// settled reports whether every sentinel names the same master, and that
// server is a master whose two replicas have its replication offset.
func settled(t *testing.T, g *redistest.SentinelGroup) bool {
	ctx := t.Context()
	var master string
	for _, addr := range g.SentinelAddrs() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		hp, err := sc.GetMasterAddrByName(ctx, redistest.MasterName).Result()
		sc.Close()
		if err != nil {
			return false
		}
		if m := hp[0] + ":" + hp[1]; master == "" {
			master = m
		} else if m != master {
			return false
		}
	}
	rdb := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1})
	defer rdb.Close()
	info, err := rdb.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "role:master") {
		return false
	}
	var offset string
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_repl_offset:"); ok {
			offset = v
		}
	}
	return offset != "" && strings.Count(info, "state=online,offset="+offset+",") == 2
}
