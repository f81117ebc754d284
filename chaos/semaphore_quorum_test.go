package chaos_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The faults of TestSemaphoreQuorum, taken in turn.
const (
	quorumNodePause   = iota // one quorum node stopped (SIGSTOP)
	quorumHolderPause        // the holder stalls, its lock connections frozen
	quorumFaults
)

var quorumFaultNames = []string{"node-pause", "holder-pause"}

// quorumLockDelay is TestSemaphoreQuorum's Options.LockDelay: a slot whose
// permit was lost rather than released stays unavailable a TTL longer.
const quorumLockDelay = ttl

// TestSemaphoreQuorum is TestSemaphore on a quorum: holderCount holders
// take permits of a semaphore of semaphorePermits on NewQuorum over three
// independent servers, each holder through its own proxy to each node,
// with a LockDelay of a TTL. The nemesis aims, in turn, two faults at a
// holder that has just read: a pause (SIGSTOP) of one of the nodes for
// 2–4 TTLs (every renewal and acquisition meanwhile must do with the
// other two; any read fits it, so that the holder pauses, which make
// the stale writes, are not kept waiting for a long computation), or a
// pause of
// the holder for 4–6 TTLs with its connections to every node frozen: its
// permit is lost, not released, so its slot stays under lock-delay for a
// TTL past the lease's end, while the other slot keeps serving; then the
// waiter takes the delayed slot, and the lost holder writes after it.
// Checked as TestSemaphore: the per-slot invariants and chaos.InvPermits;
// also, that some holder pause was seen, by Semaphore.Holders read from
// every node, leaving its slot under lock-delay while another slot was
// held (delaySeen; with LockDelay 0, none is, and the test fails).
func TestSemaphoreQuorum(t *testing.T) {
	runScenario(t, scenario{name: "semaphore-quorum", adapter: "memory", shortRuns: 3, control: staleWritePermit, setup: func(t *testing.T) *world {
		var nodes []*redistest.Server
		for range 3 {
			nodes = append(nodes, redistest.New(t))
		}
		opts := lockOptions()
		opts.LockDelay = quorumLockDelay
		// The default NodeTimeout, TTL/10 (5 ms), is shorter than many a
		// round trip of a loaded machine under -race: with it, three runs
		// beside two busy loops made 0, 2 and 10 operations, all
		// inconclusive.
		opts.NodeTimeout = ttl / 4
		proxies := make([][]*redistest.Proxy, holderCount) // [holder][node]
		clients := make([]*fencelock.Client, holderCount)
		for i := range holderCount {
			var rdbs []redis.UniversalClient
			for _, n := range nodes {
				p := redistest.NewProxy(t, n.Addr())
				rdb := redis.NewClient(redisOptions(p.Addr()))
				t.Cleanup(func() { rdb.Close() })
				proxies[i] = append(proxies[i], p)
				rdbs = append(rdbs, rdb)
			}
			clients[i] = newQuorumLock(t, rdbs, opts)
			// A permit taken and given back now, so that the scripts are
			// loaded and the connections made before the first run: on a
			// loaded machine, a first run whose rounds did that within
			// NodeTimeout took no permit at all. A release that fails leaves
			// the permit to its TTL, on a name no run uses.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			l, err := clients[i].Semaphore("chaos-warm-up", semaphorePermits).Acquire(ctx)
			if err != nil {
				cancel()
				t.Fatalf("holder %d's warm-up permit: %v", i, err)
			}
			l.Release(ctx)
			cancel()
		}
		faults := faultKinds(t, "semaphore-quorum", quorumFaultNames)
		var admins []redis.UniversalClient
		for _, n := range nodes {
			admins = append(admins, n.Client(t))
		}
		seen := &delaySeen{admin: fencelock.NewQuorum(admins, lockOptions())}
		t.Cleanup(func() { seen.report(t) })
		nemesis := func(r *run) {
			fits := func(int, readEvent) bool { return true }
			inTurn(r, faults, fits, func(kind int, ev readEvent) (<-chan struct{}, time.Duration, func()) {
				if kind == quorumHolderPause {
					stall, heal := pauseHolder(proxies[ev.client]...)
					stop := seen.watch(r.name, ev.fence)
					return stall, between(r.rand, 4, 6), func() { heal(); stop() }
				}
				n := nodes[r.rand.IntN(len(nodes))]
				n.Pause(r.t)
				return nil, between(r.rand, 2, 4), func() { n.Resume(r.t) }
			})
		}
		return &world{
			lock:     func(i int) *fencelock.Client { return clients[i] },
			resource: memoryResource,
			holders:  goroutineHolders,
			nemesis:  nemesis,
			permits:  semaphorePermits,
		}
	}})
}

// delaySeen watches, during each holder pause, the semaphore's slots as
// Semaphore.Holders reads them from every node (directly, not through the
// holders' proxies), and counts the pauses in which the paused holder's
// slot was seen under its lock-delay while another slot was held: what
// the scenario exists for. At the end of randomized runs, at least one
// such pause must have been seen.
type delaySeen struct {
	admin          *fencelock.Client
	pauses, served atomic.Int64
}

// watch samples name's slots every 5 ms until the returned stop is
// called, looking for f's slot under the delay of f's lease.
func (d *delaySeen) watch(name string, f fence.Fence) (stop func()) {
	sem := d.admin.Semaphore(name, semaphorePermits)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), ttl)
			hs, err := sem.Holders(ctx)
			cancel()
			if err != nil {
				continue // a paused node, or too few answers: sample again
			}
			var delayed, held bool
			for _, h := range hs {
				switch {
				case fencelock.SlotName(name, h.Slot) == f.Lock && h.Delay > 0 && h.Token == f.Token:
					delayed = true
				case h.Delay == 0:
					held = true
				}
			}
			if delayed && held {
				d.served.Add(1)
				return
			}
		}
	})
	d.pauses.Add(1)
	return func() {
		close(done)
		wg.Wait()
	}
}

// report logs how many holder pauses showed their slot under lock-delay
// while another served, and fails randomized runs that showed none.
func (d *delaySeen) report(t *testing.T) {
	line := fmt.Sprintf("semaphore-quorum: %d of %d holder pauses seen with the holder's slot under lock-delay while another slot was held", d.served.Load(), d.pauses.Load())
	t.Log(line)
	if *runsFlag > 0 {
		fmt.Println(line)
	}
	if *seedFlag == 0 && !t.Failed() && d.pauses.Load() > 0 && d.served.Load() == 0 {
		t.Errorf("%s: want at least one", line)
	}
}
