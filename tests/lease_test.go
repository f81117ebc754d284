package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// waitDone waits for ctx to end, failing the test after limit.
func waitDone(t *testing.T, ctx context.Context, limit time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(limit):
		t.Fatalf("lease context not done after %v", limit)
	}
}

func TestLease_roundTrips(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	rec := &recorder{}
	rdb.AddHook(rec)
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	ctx := t.Context()

	// Warm up: load the scripts and detect native commands.
	w, err := c.TryAcquire(ctx, "warm-up")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	if err := errors.Join(w.Renew(ctx), w.Release(ctx)); err != nil {
		t.Fatalf("warm-up Renew/Release error = %v", err)
	}
	rec.reset()

	l, err := c.TryAcquire(ctx, "rt")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	if n, names := rec.reset(); n != 1 {
		t.Errorf("TryAcquire: %d round trips %v, want 1", n, names)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew error = %v", err)
	}
	if n, names := rec.reset(); n != 1 {
		t.Errorf("Renew: %d round trips %v, want 1", n, names)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	if n, names := rec.reset(); n != 1 {
		t.Errorf("Release: %d round trips %v, want 1", n, names)
	}
}

func TestLease_Release(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	c := newClient(t, rdb, nil)
	ctx := t.Context()

	l, err := c.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	if l.ID() == "" || strings.Contains(rdb.Get(ctx, "fencelock:{job}").Val(), l.ID()) {
		t.Errorf("ID() = %q: want a non-empty ID unrelated to the owner value", l.ID())
	}
	if got := l.Fence(); got.Lock != "job" || got.Token != l.Token() || got.Lease != l.ID() {
		t.Errorf("Fence() = %+v, want {job %d %s}", got, l.Token(), l.ID())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{job}").Val(); n != 0 {
		t.Errorf("lock key exists after Release")
	}
	if cause := context.Cause(l.Context()); cause != context.Canceled {
		t.Errorf("Cause(Context()) after Release = %v, want context.Canceled", cause)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("second Release error = %v, want the first result (nil)", err)
	}
	if err := l.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Renew after Release error = %v, want ErrLeaseLost", err)
	}
}

// An expired holder's Renew and Release must not touch the next holder's
// lock, and Renew must never re-create a lock that is gone.
func TestLease_afterExpiry(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	short := newClient(t, rdb, &fencelock.Options{TTL: 50 * time.Millisecond, RenewInterval: -1})
	c := newClient(t, rdb, nil)
	const key = "fencelock:{shared}"

	old, err := short.TryAcquire(ctx, "shared")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	waitDone(t, old.Context(), 5*time.Second) // its deadline passed
	redistest.WaitFor(t, 5*time.Second, "the server to expire the lock", func() bool { return rdb.Exists(ctx, key).Val() == 0 })
	next, err := c.TryAcquire(ctx, "shared")
	if err != nil {
		t.Fatalf("TryAcquire by the next holder error = %v", err)
	}
	defer next.Release(ctx)
	owner := rdb.Get(ctx, key).Val()
	pttl := rdb.PTTL(ctx, key).Val()

	if err := old.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("expired Renew error = %v, want ErrLeaseLost", err)
	}
	if err := old.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("expired Release error = %v, want ErrLeaseLost", err)
	}
	if got := rdb.Get(ctx, key).Val(); got != owner {
		t.Errorf("next holder's lock value changed by expired holder")
	}
	if got := rdb.PTTL(ctx, key).Val(); got > pttl {
		t.Errorf("next holder's PTTL = %v after expired Renew, want <= %v (not extended)", got, pttl)
	}
	if next.Context().Err() != nil {
		t.Errorf("next holder's lease ended: %v", context.Cause(next.Context()))
	}
}

func TestLease_Renew_neverRecreates(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	l, err := c.TryAcquire(ctx, "gone")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	rdb.Del(ctx, "fencelock:{gone}")
	if err := l.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Renew of a deleted lock error = %v, want ErrLeaseLost", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{gone}").Val(); n != 0 {
		t.Errorf("Renew re-created the deleted lock")
	}
	if !errors.Is(context.Cause(l.Context()), fencelock.ErrLeaseLost) {
		t.Errorf("Cause(Context()) = %v, want ErrLeaseLost", context.Cause(l.Context()))
	}
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release of a lost lease error = %v, want ErrLeaseLost", err)
	}

	// A loss that only Release finds ends the lease's context with it too.
	l, err = c.TryAcquire(ctx, "gone")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	rdb.Del(ctx, "fencelock:{gone}")
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release of a deleted lock error = %v, want ErrLeaseLost", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Cause(Context()) after Release found the lock gone = %v, want ErrLeaseLost", cause)
	}
}

// The keeper renews the lease past its TTL, and notices a deleted lock at
// its next renewal, long before the local deadline.
func TestLease_keeper(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	renewed := make(chan struct{}, 100)
	rdb.AddHook(&recorder{notify: func(name string) {
		if name == "evalsha" || name == "set" {
			select {
			case renewed <- struct{}{}:
			default:
			}
		}
	}})
	ctx := t.Context()
	const ttl = time.Second
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl, RenewInterval: 100 * time.Millisecond})
	start := time.Now()
	l, err := c.TryAcquire(ctx, "kept")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer l.Release(ctx)
	for first := true; first || time.Since(start) < 2*ttl; first = false { // the first is the acquire itself
		select {
		case <-renewed:
		case <-time.After(ttl):
			t.Fatalf("no renewal for %v, %v after the acquisition", ttl, time.Since(start))
		}
	}
	if l.Context().Err() != nil {
		t.Fatalf("lease lost while renewed: %v", context.Cause(l.Context()))
	}
	if pttl := rdb.PTTL(ctx, "fencelock:{kept}").Val(); pttl <= 0 {
		t.Fatalf("PTTL after %v = %v, want > 0 (renewed)", time.Since(start), pttl)
	}

	c2 := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RenewInterval: 20 * time.Millisecond})
	l2, err := c2.TryAcquire(ctx, "deleted")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	rdb.Del(ctx, "fencelock:{deleted}")
	waitDone(t, l2.Context(), 10*time.Second) // the deadline is a minute away
	if cause := context.Cause(l2.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) || !strings.Contains(cause.Error(), "gone") {
		t.Errorf("Cause = %v, want ErrLeaseLost found by a renewal", cause)
	}
	l2.Release(ctx)
}

// A server that stops answering cannot renew: the lease is lost at its
// local deadline, which comes before the server could expire the lock and
// grant it to another holder.
func TestLease_serverPaused(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := t.Context()
	// The drift allowance (TTL/100 + 2ms) must also absorb the timer's
	// latency on a loaded machine: a longer TTL gives it more room.
	const ttl = 3 * time.Second
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl})

	before := time.Now()
	l, err := c.TryAcquire(ctx, "paused")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	after := time.Now()
	if d := l.Deadline(); d.Before(before.Add(ttl/2)) || !d.Before(after.Add(ttl)) {
		t.Errorf("Deadline() = acquire + %v, want within (TTL/2, TTL) of the request", d.Sub(before))
	}
	s.Pause(t)
	waitDone(t, l.Context(), 10*time.Second)
	s.Resume(t)
	// The lease ends at its own deadline, which is before the server's
	// expiry, and not when the hanging renewal gives up: when the context
	// ended is the scheduler's business, what ended it is the library's.
	cause := context.Cause(l.Context())
	if !errors.Is(cause, fencelock.ErrLeaseLost) || !strings.Contains(cause.Error(), "not renewed before its deadline") {
		t.Fatalf("Cause = %v, want ErrLeaseLost: not renewed before its deadline", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release error = %v, want ErrLeaseLost", err)
	}
}

// A Release that reached no decision (the server did not answer) can be
// retried; one that did is idempotent and sends nothing more.
func TestLease_Release_retry(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	rec := &recorder{}
	rdb.AddHook(rec)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute})
	l, err := c.TryAcquire(ctx, "retried")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	s.Pause(t)
	err = l.Release(ctx)
	s.Resume(t)
	var nerr interface{ Timeout() bool }
	if !errors.As(err, &nerr) || !nerr.Timeout() || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release with the server paused: error = %v, want a timeout, not ErrLeaseLost", err)
	}
	if l.Context().Err() == nil {
		t.Errorf("lease context not done after Release, which stops its renewal")
	}
	if err := l.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Renew after Release error = %v, want ErrLeaseLost", err)
	}
	check := s.Client(t)
	if n := check.Exists(ctx, "fencelock:{retried}").Val(); n != 1 {
		t.Fatalf("lock EXISTS = %d after the failed Release, want 1 (nothing reached the server)", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("second Release error = %v, want nil: the first reached no decision", err)
	}
	if n := check.Exists(ctx, "fencelock:{retried}").Val(); n != 0 {
		t.Errorf("lock EXISTS = %d after the retried Release, want 0", n)
	}
	rec.reset()
	if err := l.Release(ctx); err != nil {
		t.Errorf("third Release error = %v, want the decided result (nil)", err)
	}
	if n, names := rec.reset(); n != 0 {
		t.Errorf("Release after a decided one sent %d round trips %v, want none", n, names)
	}
}

// Release stops the keeper and waits for a renewal in flight before it
// sends the release: no renewal overlaps the release or follows it, and
// the lease ends with context.Canceled, never as lost to its own
// release. Renewal and release replies are slow, so that a keeper left
// running, or a renewal not waited for, overlaps the release for certain.
func TestLease_Release_stopsKeeper(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	const name = "kept-then-released"
	rdb := redistest.New(t).Client(t)
	order := &callOrder{channel: "fencelock:{" + name + "}:released", delay: 100 * time.Millisecond, renewing: make(chan struct{}, 1)}
	rdb.AddHook(order)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{TTL: 10 * time.Second, RenewInterval: 5 * time.Millisecond})
	l, err := c.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	order.armed.Store(true)
	select {
	case <-order.renewing:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal within 10s of the acquisition, with RenewInterval 5ms")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	if cause := context.Cause(l.Context()); cause != context.Canceled {
		t.Errorf("Cause(Context()) after Release = %v, want context.Canceled", cause)
	}
	events := order.log()
	released := slices.Index(events, "release sent")
	if released < 0 {
		t.Fatalf("calls = %v, want a release", events)
	}
	if i := slices.Index(events[released:], "renewal sent"); i >= 0 {
		t.Errorf("calls = %v: a renewal sent after the release (Release must stop the keeper)", events)
	}
	sent, returned := 0, 0
	for _, e := range events[:released] {
		switch e {
		case "renewal sent":
			sent++
		case "renewal returned":
			returned++
		}
	}
	if sent != returned {
		t.Errorf("calls = %v: the release sent while a renewal was in flight (Release must wait for it)", events)
	}
}

// callOrder is a go-redis hook that, once armed, logs when renewals and
// the release of the lock whose channel it knows are sent and return, and
// delays their replies, as a slow network would.
type callOrder struct {
	channel  string
	delay    time.Duration
	armed    atomic.Bool
	renewing chan struct{} // gets a value when a renewal is sent

	mu     sync.Mutex
	events []string
}

func (h *callOrder) log() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func (h *callOrder) add(event string) {
	h.mu.Lock()
	h.events = append(h.events, event)
	h.mu.Unlock()
}

// kind returns "release" or "renewal" for the commands that the lease
// sends once armed (a Lua script, or the native commands in a pipeline),
// "" for the rest.
func (h *callOrder) kind(cmds ...redis.Cmder) string {
	if !h.armed.Load() {
		return ""
	}
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "delex", "delifeq":
			return "release"
		case "set":
			return "renewal"
		case "evalsha", "eval":
			if slices.Contains(cmd.Args(), any(h.channel)) {
				return "release"
			}
			return "renewal"
		}
	}
	return ""
}

func (h *callOrder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *callOrder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around(h.kind(cmd), func() error { return next(ctx, cmd) })
	}
}

func (h *callOrder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(h.kind(cmds...), func() error { return next(ctx, cmds) })
	}
}

func (h *callOrder) around(kind string, call func() error) error {
	if kind == "" {
		return call()
	}
	h.add(kind + " sent")
	if kind == "renewal" {
		select {
		case h.renewing <- struct{}{}:
		default:
		}
	}
	err := call()
	time.Sleep(h.delay) // the simulated slow reply, not a synchronisation
	h.add(kind + " returned")
	return err
}

// The deadline is measured from before the request that acquired or
// renewed the lease, less the drift allowance (TTL/100 + 2ms): a reply
// that comes late must not move it later. Replies are delayed by far more
// than the bounds' slack, and the drift is larger than it, so measuring
// from the reply or dropping the drift both miss the bounds.
func TestLease_Deadline(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	const (
		ttl   = 10 * time.Second
		drift = ttl/100 + 2*time.Millisecond
		delay = 300 * time.Millisecond
		slack = 50 * time.Millisecond // the timer, the scheduler
	)
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl, RenewInterval: -1})
	// Warm up: load the scripts, detect the natives.
	w, err := c.TryAcquire(ctx, "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.Renew(ctx), w.Release(ctx)); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(&slowReplies{delay: delay, match: func(cmd redis.Cmder) bool {
		return cmd.Name() == "evalsha" || cmd.Name() == "set"
	}})
	check := func(what string, before time.Time, l *fencelock.Lease) {
		t.Helper()
		got := l.Deadline().Sub(before)
		if lo, hi := ttl-drift, ttl-drift+slack; got < lo || got > hi {
			t.Errorf("%s: Deadline() = request + %v, want in [%v, %v] (TTL %v less drift %v, from before the request)", what, got, lo, hi, ttl, drift)
		}
	}
	before := time.Now()
	l, err := c.TryAcquire(ctx, "deadline")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer l.Release(ctx)
	if time.Since(before) < delay {
		t.Fatalf("TryAcquire took %v, want the reply delayed by %v", time.Since(before), delay)
	}
	check("after TryAcquire", before, l)
	for i := range 2 {
		before = time.Now()
		if err := l.Renew(ctx); err != nil {
			t.Fatalf("Renew error = %v", err)
		}
		check(fmt.Sprintf("after renewal %d", i+1), before, l)
	}
}

// Release returns by its context even while a background renewal is in
// flight to a server that answers nothing (SIGSTOP): it does not wait for
// the renewal's read. The lease is then not released: the error wraps the
// context's, not ErrLeaseLost, its Deadline still holds, and a later
// Release, once the server answers, deletes the lock. Leases renewed one
// by one and in one pipeline alike.
func TestLease_Release_byContextWhileRenewing(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	for _, tc := range []struct {
		name   string
		leases int
	}{{"single", 1}, {"batched", 8}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.New(t)
			// The renewal's read is bounded by its context's deadline
			// (the lease's, ~10s away) and ReadTimeout (3s): far longer
			// than the release's context.
			rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			inflight := &renewalsSent{sent: make(chan int, 1)}
			rdb.AddHook(inflight)
			ctx := t.Context()
			c := newClient(t, rdb, &fencelock.Options{TTL: 10 * time.Second, RenewInterval: time.Second})
			var leases []*fencelock.Lease
			for i := range tc.leases {
				l, err := c.TryAcquire(ctx, fmt.Sprintf("in-flight-%d", i))
				if err != nil {
					t.Fatalf("TryAcquire error = %v", err)
				}
				leases = append(leases, l)
			}
			s.Pause(t)
			t.Cleanup(func() { s.Resume(t) })
			inflight.armed.Store(true)
			select {
			case n := <-inflight.sent:
				if tc.leases > 1 && n < 2 {
					t.Fatalf("renewal sent for %d lease, want a pipeline of several", n)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no renewal within 10s, with RenewInterval 1s")
			}
			deadlines := make([]time.Time, len(leases))
			errs := make([]error, len(leases))
			took := make([]time.Duration, len(leases))
			var wg sync.WaitGroup
			for i, l := range leases {
				deadlines[i] = l.Deadline()
				wg.Go(func() {
					rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					defer cancel()
					start := time.Now()
					errs[i] = l.Release(rctx)
					took[i] = time.Since(start)
				})
			}
			wg.Wait()
			for i, l := range leases {
				if took[i] > 2*time.Second {
					t.Errorf("lease %d: Release with a 200ms context took %v, want < 2s", i, took[i])
				}
				if !errors.Is(errs[i], context.DeadlineExceeded) || errors.Is(errs[i], fencelock.ErrLeaseLost) {
					t.Errorf("lease %d: Release error = %v, want one wrapping context.DeadlineExceeded, not ErrLeaseLost", i, errs[i])
				}
				if d := l.Deadline(); !d.Equal(deadlines[i]) {
					t.Errorf("lease %d: Deadline moved from %v to %v by a Release that decided nothing", i, deadlines[i], d)
				}
			}
			s.Resume(t)
			for i, l := range leases {
				if err := l.Release(ctx); err != nil {
					t.Errorf("lease %d: Release once the server answers: error = %v, want nil", i, err)
				}
				if n := rdb.Exists(ctx, fmt.Sprintf("fencelock:{in-flight-%d}", i)).Val(); n != 0 {
					t.Errorf("lease %d: lock EXISTS = %d after the second Release, want 0", i, n)
				}
			}
		})
	}
}

// renewalsSent is a go-redis hook that, once armed, reports how many
// renewals (scripts, or SET for the native renewal) the first request
// that carries any has; the capabilities probe is not one.
type renewalsSent struct {
	armed atomic.Bool
	sent  chan int
}

func (h *renewalsSent) report(cmds ...redis.Cmder) {
	n := 0
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "evalsha", "eval", "set":
			n++
		}
	}
	if n > 0 && h.armed.Load() {
		select {
		case h.sent <- n:
		default:
		}
	}
}

func (h *renewalsSent) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewalsSent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.report(cmd)
		return next(ctx, cmd)
	}
}

func (h *renewalsSent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.report(cmds...)
		return next(ctx, cmds)
	}
}

// After a failed background renewal the keeper retries at a quarter of
// RenewInterval, not a whole one: a lease whose server hiccups gets
// several more tries before its deadline.
func TestLease_keeperRetriesEarly(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	fail := &failRenewals{}
	rdb.AddHook(fail)
	const every = time.Second
	var mu sync.Mutex
	var failed []time.Time
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RenewInterval: every, Hooks: &fencelock.Hooks{
		RenewDone: func(_ context.Context, i fencelock.RenewDoneInfo) {
			if i.Err != nil {
				mu.Lock()
				failed = append(failed, time.Now())
				mu.Unlock()
			}
		},
	}})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "retried-early")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	fail.armed.Store(true)
	redistest.WaitFor(t, 20*time.Second, "four failed renewals", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failed) >= 4
	})
	fail.armed.Store(false)
	mu.Lock()
	var gaps []time.Duration
	for i := 1; i < 4; i++ {
		gaps = append(gaps, failed[i].Sub(failed[i-1]))
	}
	mu.Unlock()
	slices.Sort(gaps)
	if median := gaps[1]; median > every/2 {
		t.Errorf("retries after failed renewals %v apart (median %v), want about RenewInterval/4 = %v (< %v)", gaps, median, every/4, every/2)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release error = %v", err)
	}
}

// failRenewals is a go-redis hook that, once armed, fails every command
// at once without sending it: in these tests, only renewals are sent
// while it is armed.
type failRenewals struct{ armed atomic.Bool }

var errInjected = errors.New("injected failure")

func (h *failRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *failRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.Load() {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}

func (h *failRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errInjected)
			}
			return errInjected
		}
		return next(ctx, cmds)
	}
}

// A lease is lost at its deadline even while a background renewal is in
// flight and does not end (a client that ignores the request's context):
// the keeper does not wait for the renewal to learn of the loss.
func TestLease_lostWhileRenewalHangs(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	hang := &hangRenewals{release: make(chan struct{}), sent: make(chan struct{}, 1)}
	rdb.AddHook(hang)
	t.Cleanup(func() { close(hang.release) })
	const ttl = time.Second
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl, RenewInterval: 100 * time.Millisecond})
	l, err := c.TryAcquire(t.Context(), "hung")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	hang.armed.Store(true)
	select {
	case <-hang.sent:
	case <-time.After(10 * time.Second):
		t.Fatal("no renewal within 10s, with RenewInterval 100ms")
	}
	deadline := l.Deadline()
	waitDone(t, l.Context(), 10*time.Second)
	if late := time.Since(deadline); late > 2*time.Second {
		t.Errorf("lease lost %v after its deadline while a renewal hung, want < 2s", late)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("Cause = %v, want ErrLeaseLost", cause)
	}
}

// hangRenewals is a go-redis hook that, once armed, holds every command
// until release is closed, whatever its context.
type hangRenewals struct {
	armed   atomic.Bool
	release chan struct{}
	sent    chan struct{}
}

func (h *hangRenewals) hold() {
	if h.armed.Load() {
		select {
		case h.sent <- struct{}{}:
		default:
		}
		<-h.release
	}
}

func (h *hangRenewals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hangRenewals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold()
		return next(ctx, cmd)
	}
}

func (h *hangRenewals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold()
		return next(ctx, cmds)
	}
}
