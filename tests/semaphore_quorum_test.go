package tests

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A quorum permit attempt whose first slot is refused tries the next free
// one within the same attempt: here another holder takes, on every node,
// the very slot the attempt is about to acquire, between its read of the
// slots and its acquisition round. It gets another slot; "all permits
// held" only when every slot was held or refused.
func TestSemaphore_quorumNextSlot(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	var admins []*redis.Client
	for _, s := range servers {
		admins = append(admins, s.Client(t))
	}
	// The first acquire.lua run of the attempt names its slot's lock key:
	// before it goes out to any node, the slot is taken on every node.
	var taken string
	var once sync.Once
	grab := &scriptGate{file: "lua/acquire.lua", before: func(cmd redis.Cmder) {
		once.Do(func() {
			taken, _ = cmd.Args()[3].(string)
			for _, a := range admins {
				a.Set(ctx, taken, "another-holder", time.Minute)
			}
		})
	}}
	for _, rdb := range nodes {
		rdb.AddHook(grab)
	}
	sem := newQuorum(t, nodes, nil).Semaphore("next", 3)
	l, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with one of 3 slots taken under the attempt = %v, want a permit in another slot", err)
	}
	defer l.Release(ctx)
	if taken == "fencelock:{next}:permit:"+strconv.Itoa(l.Slot()) {
		t.Errorf("permit in slot %d, the slot taken under the attempt (%s)", l.Slot(), taken)
	}
	// With every slot taken, the attempt is refused as all held.
	for _, a := range admins {
		for i := range 3 {
			a.Set(ctx, "fencelock:{next}:permit:"+strconv.Itoa(i), "another-holder", time.Minute)
		}
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) || !strings.Contains(err.Error(), "all 3 permits held") {
		t.Errorf("TryAcquire with every slot held = %v, want ErrNotAcquired: all 3 permits held", err)
	}
}

// A slot kept by the lock-delay of a holder that crashed is skipped: the
// other slots are acquired, on a quorum as on one node.
func TestSemaphore_quorumDelayedSlot(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	// A short TTL, so that the crash is over soon, with a NodeTimeout far
	// above its default (TTL/10), which a loaded machine's replies exceed.
	opts := &fencelock.Options{TTL: time.Second, NodeTimeout: 900 * time.Millisecond, RenewInterval: -1, LockDelay: time.Minute}
	crashed, err := newQuorum(t, nodes, opts).Semaphore("delayed", 3).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slot := crashed.Slot()
	// Not released, not renewed: its lock expires, its lock-delay stays.
	lockKey := "fencelock:{delayed}:permit:" + strconv.Itoa(slot)
	redistest.WaitFor(t, 20*time.Second, "the crashed holder's slot to expire", func() bool {
		for _, rdb := range nodes {
			if rdb.Exists(ctx, lockKey).Val() != 0 {
				return false
			}
		}
		return true
	})
	sem := newQuorum(t, nodes, &fencelock.Options{TTL: 10 * time.Second, NodeTimeout: 5 * time.Second}).Semaphore("delayed", 3)
	for range 2 {
		l, err := sem.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire with slot %d under lock-delay and two free = %v, want a permit", slot, err)
		}
		defer l.Release(ctx)
		if l.Slot() == slot {
			t.Errorf("permit in slot %d, which a lock-delay keeps", slot)
		}
	}
}

// The read of the slots is a round like the others: a paused node costs
// it NodeTimeout, not a quarter of the TTL, and the permit is acquired in
// time. The context's deadline (10s) is below TTL/4 (15s), and
// NodeTimeout (1s) far below both, so that a loaded machine's slow
// replies from the nodes that answer do not count as the pause's.
func TestSemaphore_quorumPausedNode(t *testing.T) {
	t.Parallel()
	const ttl, wait = time.Minute, 10 * time.Second
	servers, nodes := quorumNodes(t, 3)
	sem := newQuorum(t, nodes, &fencelock.Options{TTL: ttl, NodeTimeout: time.Second}).Semaphore("paused", 2)
	if l, err := sem.TryAcquire(t.Context()); err != nil { // loads the scripts on every node
		t.Fatal(err)
	} else {
		l.Release(t.Context())
	}
	servers[2].Pause(t)
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	l, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire with one node of three paused = %v, want a permit within %v", err, wait)
	}
	if left := time.Until(l.Deadline()); left < ttl-wait {
		t.Errorf("the permit's lease has %v left of its %v TTL, want at least %v: the read of the slots spent it", left, ttl, ttl-wait)
	}
	rctx, rcancel := context.WithTimeout(t.Context(), wait)
	defer rcancel()
	l.Release(rctx)
}

// Concurrent quorum attempts on a semaphore of as many permits as
// attempts start at different free slots and go on to the next when
// refused: nearly every attempt gets a permit, where one slot per attempt
// gave a quarter of them.
func TestSemaphore_quorumConcurrent(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	const clients, rounds = 4, 10
	var sems []*fencelock.Semaphore
	for range clients {
		sems = append(sems, newQuorum(t, nodes, nil).Semaphore("concurrent", clients))
	}
	got := 0
	for range rounds {
		var wg sync.WaitGroup
		leases := make([]*fencelock.Lease, clients)
		for i, s := range sems {
			wg.Go(func() { leases[i], _ = s.TryAcquire(ctx) })
		}
		wg.Wait()
		for _, l := range leases {
			if l != nil {
				got++
				l.Release(ctx)
			}
		}
	}
	t.Logf("%d of %d attempts got a permit", got, clients*rounds)
	// Contention can still split a slot's votes between attempts, which
	// then go on to the next slot; a quarter was the old rate.
	if got < clients*rounds*3/4 {
		t.Errorf("%d of %d concurrent attempts got one of %d free permits, want at least three quarters", got, clients*rounds, clients)
	}
}

// scriptGate is a go-redis hook that calls before with each command that
// runs the script file (alone or in a pipeline), before it is sent.
type scriptGate struct {
	file   string
	before func(cmd redis.Cmder)
}

func (h *scriptGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if runsScript(cmd, h.file) {
			h.before(cmd)
		}
		return next(ctx, cmd)
	}
}

func (h *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if runsScript(cmd, h.file) {
				h.before(cmd)
			}
		}
		return next(ctx, cmds)
	}
}
