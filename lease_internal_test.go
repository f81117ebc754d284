package fencelock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of what a Lease keeps between its calls: its keeper's schedule,
// its context, and the cost of reporting its events.

// kept returns how many leases c's keeper has scheduled.
func (c *Client) kept() int {
	c.keep.mu.Lock()
	defer c.keep.mu.Unlock()
	return len(c.keep.queue)
}

// One keeper renews many leases of a Client, each on its own schedule,
// past several TTLs; Release takes a lease out of its schedule, and a
// lease lost at its deadline leaves it too.
func TestKeeper_manyLeases(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const (
		ttl    = time.Second
		leases = 50
		hold   = 5 * ttl / 2
	)
	batches := &pipelines{}
	rdb.AddHook(batches)
	c := New(rdb, &Options{TTL: ttl, RenewInterval: ttl / 5})
	var held []*Lease
	for i := range leases {
		l, err := c.TryAcquire(ctx, "many-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("TryAcquire %d error = %v", i, err)
		}
		held = append(held, l)
		if i%10 == 0 { // acquired at different times: schedules interleave
			time.Sleep(ttl / 20)
		}
	}
	if n := c.kept(); n != leases {
		t.Fatalf("keeper schedules %d leases, want %d", n, leases)
	}
	// The premise of the test is the time that passes.
	deadline := time.After(hold)
	for waiting := true; waiting; {
		select {
		case <-deadline:
			waiting = false
		case <-time.After(ttl / 10):
			for _, l := range held {
				if err := l.ended(); err != nil {
					t.Fatalf("lease %s ended while renewed: %v", l.Name(), err)
				}
			}
		}
	}
	for i, l := range held {
		if pttl := rdb.PTTL(ctx, l.ref.Lock).Val(); pttl <= 0 {
			t.Errorf("lease %d: PTTL %v after %v, want > 0 (renewed)", i, pttl, hold)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release %d error = %v", i, err)
		}
	}
	if n := c.kept(); n != 0 {
		t.Errorf("keeper schedules %d leases after every Release, want 0", n)
	}
	// Leases acquired together are renewed together, in one round trip.
	if n := batches.n.Load(); n == 0 {
		t.Errorf("no renewals sent in a pipeline of several, want the keeper to batch them")
	}

	short := New(rdb, &Options{TTL: 50 * time.Millisecond, RenewInterval: -1})
	l, err := short.TryAcquire(ctx, "expiring")
	if err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 5*time.Second, "the lease to be lost at its deadline", func() bool { return l.ended() != nil })
	if n := short.kept(); n != 0 {
		t.Errorf("keeper schedules %d leases after the loss, want 0", n)
	}
}

// A lease's Context is made on first use; one asked for after the lease
// was lost is done at once, with the loss as its cause.
func TestLease_contextAfterLoss(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	lost := make(chan struct{}, 1)
	c := New(rdb, &Options{TTL: 50 * time.Millisecond, RenewInterval: -1, Hooks: &Hooks{
		LeaseLost: func(context.Context, LeaseLostInfo) { lost <- struct{}{} },
	}})
	l, err := c.TryAcquire(ctx, "lost-unasked")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("lease not lost 5s after its 50ms TTL")
	}
	if l.ctx != nil {
		t.Fatal("the lease's context was made before anyone asked for it")
	}
	lctx := l.Context()
	select {
	case <-lctx.Done():
	default:
		t.Fatal("Context() of a lost lease is not done")
	}
	if cause := context.Cause(lctx); !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("Cause = %v, want ErrLeaseLost", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Release error = %v, want ErrLeaseLost", err)
	}
}

// pipelines is a go-redis hook that counts the pipelines of more than one
// command.
type pipelines struct{ n atomic.Int32 }

func (h *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 2 { // a native renewal alone is SET and PEXPIRE
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// Renewals sent together, in one pipeline, report each lock on its own:
// a lease whose lock is gone, or held by another owner, is lost (with a
// cause wrapping ErrLeaseLost) and its lock is not re-created or
// overwritten, while the other leases of the batch stay held. On Redis
// 8.4+ and Valkey 9+ the batch is SET IFEQ and PEXPIRE, elsewhere the
// renew script. The losses are seen through Hooks.LeaseLost, not the
// leases' Context: a lease whose Context is followed watches its lock,
// and the watch would see the loss before the renewals do.
func TestKeeper_batchLost(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const (
		ttl    = 2 * time.Second
		leases = 8
	)
	batches := &pipelines{}
	rdb.AddHook(batches)
	lost := map[string]chan error{}
	for i := range leases {
		lost["batch-"+strconv.Itoa(i)] = make(chan error, 1)
	}
	hooks := &Hooks{LeaseLost: func(_ context.Context, info LeaseLostInfo) { lost[info.Name] <- info.Cause }}
	c := New(rdb, &Options{TTL: ttl, RenewInterval: ttl / 10, Hooks: hooks})
	var held []*Lease
	for i := range leases {
		l, err := c.TryAcquire(ctx, "batch-"+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("TryAcquire %d error = %v", i, err)
		}
		held = append(held, l)
	}
	defer func() {
		for _, l := range held {
			l.Release(ctx)
		}
	}()
	// Renewed together before the locks go: the renewals that find them
	// gone are batched too.
	redistest.WaitFor(t, 5*time.Second, "renewals sent in a pipeline", func() bool { return batches.n.Load() >= 2 })
	const other = "someone-else"
	for i, l := range held {
		switch i % 4 {
		case 0:
			if err := rdb.Del(ctx, l.ref.Lock).Err(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := rdb.Set(ctx, l.ref.Lock, other, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, l := range held {
		if i%4 > 1 {
			continue
		}
		select {
		case cause := <-lost[l.Name()]:
			if !errors.Is(cause, ErrLeaseLost) {
				t.Errorf("lease %d: LeaseLost cause = %v, want ErrLeaseLost", i, cause)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("lease %d, lock deleted or replaced: not lost within 5s, with renewals every %v", i, ttl/10)
		}
	}
	// A few renewal intervals more: the lost leases' locks stay as they were.
	since := batches.n.Load()
	redistest.WaitFor(t, 5*time.Second, "more batches of renewals", func() bool { return batches.n.Load() >= since+3 })
	for i, l := range held {
		v, err := rdb.Get(ctx, l.ref.Lock).Result()
		switch i % 4 {
		case 0:
			if !errors.Is(err, redis.Nil) {
				t.Errorf("lease %d: deleted lock = %q, %v; want it gone, never re-created by a renewal", i, v, err)
			}
		case 1:
			if err != nil || v != other {
				t.Errorf("lease %d: lock replaced by another owner = %q, %v; want %q, untouched by renewals", i, v, err, other)
			}
		default:
			if err := l.ended(); err != nil {
				t.Errorf("lease %d, lock untouched: ended while renewed in the same batches: %v", i, err)
			}
			if err != nil || v != l.ref.Owner {
				t.Errorf("lease %d: lock = %q, %v; want the lease's owner value", i, v, err)
			}
		}
	}
}

// benchmarkDispatch measures what the hooks add to one acquisition
// without Redis: an attempt and its result, as TryAcquire reports them.
func benchmarkDispatch(b *testing.B, opts *Options) {
	cfg, err := opts.config()
	if err != nil {
		b.Fatal(err)
	}
	l := &Lease{ref: node.Ref{Name: "bench", Owner: "owner"}, token: 1}
	// The ID is derived on first use: once, before the loop.
	l.ID()
	start := time.Now() // try reads the clock anyway, hooks or not
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		var t acquireTrace
		t.attempt(ctx, &cfg, "bench", start, 1, 0, nil)
		t.done(ctx, &cfg, "bench", l, nil)
	}
}

// BenchmarkHooks_dispatchNil: no hooks, the cost is a nil check.
func BenchmarkHooks_dispatchNil(b *testing.B) { benchmarkDispatch(b, nil) }

// BenchmarkHooks_dispatchNoop: every hook set to a function that does
// nothing: reading the clock and building the events.
func BenchmarkHooks_dispatchNoop(b *testing.B) {
	benchmarkDispatch(b, &Options{Hooks: &Hooks{
		AcquireAttempt: func(context.Context, AcquireAttemptInfo) {},
		AcquireDone:    func(context.Context, AcquireDoneInfo) {},
	}})
}
