package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/chaos"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// semaphorePermits is TestSemaphore's N: fewer permits than holders, so
// that one always waits and takes the slot a lost holder leaves.
const semaphorePermits = 2

// staleWritePermit is TestSemaphore's negative control: a stale permit
// holder's write taken, as staleWrite, and with it more than N leases in
// use at the resource at once.
var staleWritePermit = slices.Concat(staleWrite, []string{chaos.InvPermits})

// The faults of TestSemaphore, taken in turn.
const (
	permitPause     = iota // the holder stalls, its lock connection frozen
	permitLostReply        // its lock commands run and their replies are lost
	permitDelay            // its requests to the resource are delayed
	permitFaults
)

var permitFaultNames = [permitFaults]string{"pause", "lost-reply", "delay"}

// TestSemaphore: holderCount holders take permits of a semaphore of
// semaphorePermits, each cycle writing its slot's records (the counter and
// the note keyed by the permit's fence name, SlotName), while the nemesis
// aims, in turn, one of three faults at a holder that has just read: a
// pause of 2–4 TTLs after its read with its lock connection frozen (as
// TestHolderPause), its lock commands' replies lost for 5–7 TTLs while it
// computes for longer than the TTL (as TestLostReply, whose one in four
// lost replies of acquisitions that took a permit also runs throughout),
// or its requests to the resource delayed 6 TTLs for 1–1.5 TTLs while it
// is about to write (as TestDelayedRequest, in this process). Each lost
// holder's slot goes to a waiter; the lost holder then writes. Besides
// the per-slot invariants, the run is checked for chaos.InvPermits (never
// more than semaphorePermits leases in use at the resource at once), and
// every lost acquisition must have been released by its client.
func TestSemaphore(t *testing.T) {
	runScenario(t, scenario{name: "semaphore", adapter: "memory", shortRuns: 3, control: staleWritePermit, setup: func(t *testing.T) *world {
		srv := redistest.New(t)
		lr := &lostReplies{admin: srv.Client(t)}
		var proxies []*redistest.Proxy
		clients := make([]*fencelock.Client, holderCount)
		for i := range holderCount {
			p := redistest.NewProxy(t, srv.Addr())
			rdb := redis.NewClient(redisOptions(p.Addr()))
			t.Cleanup(func() { rdb.Close() })
			h := &dropHook{lr: lr, client: i}
			lr.hooks = append(lr.hooks, h)
			rdb.AddHook(h)
			proxies = append(proxies, p)
			clients[i] = lockClient(rdb)
		}
		d := &delays{latency: make([]atomic.Int64, holderCount)}
		faults := make([]int, permitFaults)
		t.Cleanup(func() {
			lr.requireEveryKind(t)
			line := fmt.Sprintf("semaphore: faults by kind: %s %d, %s %d, %s %d", permitFaultNames[0], faults[0], permitFaultNames[1], faults[1], permitFaultNames[2], faults[2])
			t.Log(line)
			if *runsFlag > 0 {
				fmt.Println(line)
			}
			if *seedFlag != 0 || t.Failed() {
				return
			}
			for k, n := range faults {
				if n == 0 {
					t.Errorf("semaphore: no %s fault in any run (%s), want each kind at least once", permitFaultNames[k], line)
				}
			}
		})
		return &world{
			lock: func(i int) *fencelock.Client { return clients[i] },
			resource: func(r *run) (*chaos.Journal, func(int) fence.Store) {
				lr.reset(r.seed)
				j, _ := memoryResource(r)
				return j, func(i int) fence.Store { return &delayed{Store: j, d: d, client: i} }
			},
			holders: goroutineHolders,
			nemesis: permitNemesis(proxies, lr, d, faults),
			settle: func(t *testing.T) {
				d.inFlight.Wait() // every delayed request lands in its run
				lr.settle(t)
			},
			permits: semaphorePermits,
		}
	}})
}

// permitNemesis is TestSemaphore's: for runFor, it aims its faults in
// turn (from a random one) at a holder that has just read, skipping the
// reads a fault does not fit (lost replies need a computation longer than
// the TTL, a delay a write within it), one at a time, and heals them on
// timers and at the end. faults counts them by kind.
func permitNemesis(proxies []*redistest.Proxy, lr *lostReplies, d *delays, faults []int) func(r *run) {
	return func(r *run) {
		next := r.rand.IntN(permitFaults)
		skip := func(ev readEvent) bool {
			long := ev.compute >= ttl
			return next == permitLostReply && !long || next == permitDelay && long
		}
		aimAtReads(r, skip, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
			v, kind := ev.client, next
			next = (next + 1) % permitFaults
			r.faults++
			faults[kind]++
			switch kind {
			case permitLostReply:
				lr.hooks[v].setDropping(true)
				return nil, between(r.rand, 5, 7), func() { lr.hooks[v].setDropping(false) }
			case permitDelay:
				d.latency[v].Store(int64(6 * ttl))
				return nil, between(r.rand, 1, 1.5), func() { d.latency[v].Store(0) }
			}
			proxies[v].Partition()
			stall := make(chan struct{})
			return stall, between(r.rand, 2, 4), func() {
				proxies[v].Heal()
				close(stall)
			}
		})
	}
}

// delays are the latencies of the holders' requests to the resource, in
// nanoseconds, and the delayed requests not yet landed.
type delays struct {
	latency  []atomic.Int64
	inFlight sync.WaitGroup
}

// delayed is one holder's view of the resource: while its latency is
// set, each request lands that long after it was sent, whether or not
// its caller still waits (a request in the network, as through
// TestDelayedRequest's proxy); the caller waits for it as long as its
// context allows.
type delayed struct {
	fence.Store
	d      *delays
	client int
}

func (s *delayed) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := s.send(ctx, func(ctx context.Context) ([]byte, error) { return nil, s.Store.Put(ctx, resource, f, value) })
	return err
}

func (s *delayed) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.send(ctx, func(ctx context.Context) ([]byte, error) { return s.Store.Get(ctx, resource, f) })
}

func (s *delayed) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := s.send(ctx, func(ctx context.Context) ([]byte, error) { return nil, s.Store.Delete(ctx, resource, f) })
	return err
}

func (s *delayed) send(ctx context.Context, call func(context.Context) ([]byte, error)) ([]byte, error) {
	lat := time.Duration(s.d.latency[s.client].Load())
	if lat == 0 {
		return call(ctx)
	}
	type result struct {
		v   []byte
		err error
	}
	done := make(chan result, 1)
	// The request keeps its operation's tag (the journal's record), not
	// its caller's deadline: it lands though the caller gave up.
	lctx := context.WithoutCancel(ctx)
	s.d.inFlight.Add(1)
	time.AfterFunc(lat, func() {
		defer s.d.inFlight.Done()
		v, err := call(lctx)
		done <- result{v, err}
	})
	select {
	case res := <-done:
		return res.v, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
