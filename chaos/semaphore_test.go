package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	skipOnTransport(t, skipHooked)
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
			clients[i] = lockClient(t, rdb)
		}
		d := &delays{latency: make([]atomic.Int64, holderCount)}
		faults := faultKinds(t, "semaphore", permitFaultNames[:])
		t.Cleanup(func() { lr.requireEveryKind(t) }) // runs before faultKinds's check
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
		fits := func(kind int, ev readEvent) bool {
			long := ev.compute >= ttl
			return !(kind == permitLostReply && !long || kind == permitDelay && long)
		}
		inTurn(r, faults, fits, func(kind int, ev readEvent) (<-chan struct{}, time.Duration, func()) {
			v := ev.client
			switch kind {
			case permitLostReply:
				lr.hooks[v].setDropping(true)
				return nil, between(r.rand, 5, 7), func() { lr.hooks[v].setDropping(false) }
			case permitDelay:
				d.latency[v].Store(int64(6 * ttl))
				return nil, between(r.rand, 1, 1.5), func() { d.latency[v].Store(0) }
			}
			stall, heal := pauseHolder(proxies[v])
			return stall, between(r.rand, 2, 4), heal
		})
	}
}

// inTurn is the loop of the nemeses that aim kinds of faults (len(faults)
// of them) in turn, from a random one, at a holder that has just read,
// as aimAtReads does: a read that the next kind does not fit is skipped.
// aim injects kind at the read and returns as aimAtReads's aim does.
// faults counts the faults by kind.
func inTurn(r *run, faults []int, fits func(kind int, ev readEvent) bool, aim func(kind int, ev readEvent) (<-chan struct{}, time.Duration, func())) {
	next := r.rand.IntN(len(faults))
	skip := func(ev readEvent) bool { return !fits(next, ev) }
	aimAtReads(r, skip, func(ev readEvent) (<-chan struct{}, time.Duration, func()) {
		kind := next
		next = (next + 1) % len(faults)
		r.faults++
		faults[kind]++
		return aim(kind, ev)
	})
}

// faultKinds returns the counts, by kind (names), of the faults of a
// scenario's runs, and registers their report when the test ends: a log
// line, and, for randomized runs of a test not failed otherwise, an error
// if a kind was never injected.
func faultKinds(t *testing.T, scenario string, names []string) []int {
	faults := make([]int, len(names))
	t.Cleanup(func() {
		var parts []string
		for k, name := range names {
			parts = append(parts, fmt.Sprintf("%s %d", name, faults[k]))
		}
		line := fmt.Sprintf("%s: faults by kind: %s", scenario, strings.Join(parts, ", "))
		t.Log(line)
		if *runsFlag > 0 {
			fmt.Println(line)
		}
		if *seedFlag != 0 || t.Failed() {
			return
		}
		for k, n := range faults {
			if n == 0 {
				t.Errorf("%s: no %s fault in any run (%s), want each kind at least once", scenario, names[k], line)
			}
		}
	})
	return faults
}

// pauseHolder freezes a holder's lock connections, each of its proxies
// partitioned with the bytes held, as a stalled process's would be; the
// holder waits on stall before its write, and heal ends the pause.
func pauseHolder(proxies ...*redistest.Proxy) (stall <-chan struct{}, heal func()) {
	for _, p := range proxies {
		p.Partition()
	}
	c := make(chan struct{})
	return c, func() {
		for _, p := range proxies {
			p.Heal()
		}
		close(c)
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
