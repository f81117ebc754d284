package chaos_test

import (
	"context"
	"errors"
	"fmt"
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
// lease taken after the cut (a lease only the master knows of), checks
// that the replicas' token counter is indeed behind that lease's token,
// stalls that holder, crashes the master, waits for a replica to take
// over and for a newer holder to read the counter, and then lets the
// stalled holder write with its old fence. The old master restarts empty
// and rejoins as a replica. A step that does not happen within its bound
// is noted: the run is inconclusive, not a pass.
type failover struct {
	master func(r *run) *redistest.Server                        // the lock's master now
	wait   func(r *run, old *redistest.Server) *redistest.Server // the new master
	// replicas returns clients that read from m's replicas (a Cluster's
	// with READONLY), to be closed by the caller.
	replicas func(r *run, m *redistest.Server) []*redis.Client
}

// Bounds of the failover nemesis's waits.
const (
	victimWithin = 5 * time.Second  // a read under a lease taken after the cut
	newerWithin  = 10 * time.Second // a newer holder's read after the failover
)

func (fo failover) nemesis(r *run) {
	t := r.t
	idle(r, between(r.rand, 2, 6))
	m := fo.master(r)
	m.BlockReplication(t)
	ev, got := victim(r, time.Now().UnixNano(), victimWithin)
	stall := make(chan struct{})
	release := sync.OnceFunc(func() { close(stall) })
	defer release() // also when a wait below fails the test
	if got {
		ev.reply <- stall
		if err := fo.behind(r, m, ev.fence.Token); err != nil {
			r.note("failover: %v", err)
			got = false
		}
	} else {
		r.note("failover: no holder read under a lease taken after the replication cut within %v", victimWithin)
	}
	m.Kill(t)
	fo.wait(r, m)
	if got {
		newer := idleUntil(r, newerWithin, func() bool {
			return r.rec.Any(func(op chaos.Op) bool {
				return op.Input.Resource == chaos.Counter && op.Input.Op == chaos.OpGet &&
					op.Output.Result == chaos.ResultOK && op.Input.Fence.Token > ev.fence.Token
			})
		})
		if newer {
			r.faults++
		} else {
			r.note("failover: no newer holder read the counter within %v of the failover", newerWithin)
		}
		release()
	}
	m.Start(t) // empty: nothing was saved; it rejoins as a replica
	idle(r, 6*ttl)
}

// victim waits, answering the other reads with no fault, for a read under
// a lease acquired after cut (ns), and returns it unanswered.
func victim(r *run, cut int64, bound time.Duration) (readEvent, bool) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		select {
		case <-timer.C:
			return readEvent{}, false
		case ev := <-r.reads:
			if a, ok := r.rec.AcquisitionOf(ev.fence.Lease); ok && a.Call > cut {
				return ev, true
			}
			ev.reply <- nil
		}
	}
}

// behind checks the failover's precondition: every replica of m has a
// token counter below token, the victim's, so the lease and its token
// are on m alone. A replica that cannot be read (a MOVED reply, a
// timeout) fails the check rather than read as 0.
func (fo failover) behind(r *run, m *redistest.Server, token int64) error {
	key := "fencelock:{" + r.name + "}:token"
	replicas := fo.replicas(r, m)
	defer func() {
		for _, rdb := range replicas {
			rdb.Close()
		}
	}()
	if len(replicas) == 0 {
		return fmt.Errorf("no replica of %s to check", m.Addr())
	}
	for _, rdb := range replicas {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := rdb.Get(ctx, key).Int64()
		cancel()
		if errors.Is(err, redis.Nil) {
			n, err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("replica %s: GET %s: %v", rdb.Options().Addr, key, err)
		}
		if n >= token {
			return fmt.Errorf("replica %s has counter %d, want < %d (the victim's token): replication was not cut", rdb.Options().Addr, n, token)
		}
	}
	return nil
}

// TestSentinelFailover crashes a Sentinel group's master whose replicas
// were cut off, so the lock and the token counter that the new master
// has lag behind: two holders may then both believe they hold the lock.
func TestSentinelFailover(t *testing.T) {
	skipOnTransport(t, "its lock clients are go-redis failover clients, which do not say where the sentinels are")
	runScenario(t, scenario{name: "sentinel-failover", adapter: "memory", shortRuns: 1, control: staleWrite, setup: func(t *testing.T) *world {
		g := redistest.NewSentinelGroup(t)
		noSyncDelay(t, g.Servers...)
		var clients []*fencelock.Client
		for range holderCount {
			o := redisOptions("")
			rdb := g.Client(t, &redis.FailoverOptions{
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
				ContextTimeoutEnabled: true, PoolSize: o.PoolSize,
			})
			clients = append(clients, lockClient(t, rdb))
		}
		fo := failover{
			master: func(r *run) *redistest.Server { return g.Master(r.t) },
			wait:   func(r *run, old *redistest.Server) *redistest.Server { return g.WaitFailover(r.t, old) },
			replicas: func(r *run, m *redistest.Server) []*redis.Client {
				var out []*redis.Client
				for _, s := range g.Servers {
					if s != m {
						out = append(out, redis.NewClient(s.ClientOptions()))
					}
				}
				return out
			},
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
	runScenario(t, scenario{name: "cluster-failover", adapter: "memory", shortRuns: 1, control: staleWrite, setup: func(t *testing.T) *world {
		c := redistest.NewCluster(t)
		noSyncDelay(t, c.Servers...)
		var clients []*fencelock.Client
		for range holderCount {
			o := redisOptions("")
			rdb := c.Client(t, &redis.ClusterOptions{
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
				ContextTimeoutEnabled: true, PoolSize: o.PoolSize,
			})
			clients = append(clients, lockClient(t, rdb))
		}
		var lastKey string
		key := func(r *run) string { return "{" + r.name + "}" }
		fo := failover{
			master: func(r *run) *redistest.Server { return c.MasterOf(r.t, key(r)) },
			wait: func(r *run, old *redistest.Server) *redistest.Server {
				lastKey = key(r)
				return c.WaitFailover(r.t, lastKey, old)
			},
			replicas: func(r *run, m *redistest.Server) []*redis.Client {
				o := c.ReplicaOf(r.t, m).ClientOptions()
				o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
				return []*redis.Client{redis.NewClient(o)}
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
		rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr()})
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
		sc := redis.NewSentinelClient(&redis.Options{ContextTimeoutEnabled: true, Addr: addr, MaxRetries: -1})
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
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: master, MaxRetries: -1})
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
