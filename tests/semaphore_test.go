package tests

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Many goroutines of several Clients never hold more than N valid permits
// at once: each counts itself in while it holds (under its lease's
// context) and writes through a fence store keyed by its slot's fence
// name, which must accept every write (tokens increase per slot).
func TestSemaphore_neverMoreThanN(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	const permits, workers, rounds = 3, 12, 4
	var clients []*fencelock.Client
	for range 3 {
		clients = append(clients, newClient(t, s.Client(t), nil))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var store fence.Memory
	var active, most atomic.Int32
	slots := make([]atomic.Int32, permits)
	var wg sync.WaitGroup
	for w := range workers {
		sem := clients[w%len(clients)].Semaphore("race", permits)
		wg.Go(func() {
			for range rounds {
				l, err := sem.Acquire(ctx)
				if err != nil {
					t.Errorf("Acquire error = %v, want nil", err)
					return
				}
				if l.Slot() < 0 || l.Slot() >= permits {
					t.Errorf("Slot() = %d, want in [0, %d)", l.Slot(), permits)
				}
				if n := active.Add(1); n > most.Load() {
					most.Store(max(most.Load(), n))
				}
				if n := slots[l.Slot()].Add(1); n != 1 {
					t.Errorf("slot %d held by %d permits at once, want 1", l.Slot(), n)
				}
				if l.Context().Err() == nil {
					if err := store.Put(ctx, l.Fence().Lock, l.Fence(), []byte("x")); err != nil {
						t.Errorf("Put with %v: %v, want accepted (tokens increase per slot)", l.Fence(), err)
					}
				}
				slots[l.Slot()].Add(-1)
				active.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release error = %v, want nil", err)
				}
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got > permits {
		t.Errorf("at most %d permits held at once, want <= %d", got, permits)
	}
}

// A permit holder paused past its TTL (its keeper stopped: no renewal)
// has its write rejected by a fenced store once its slot was re-issued.
func TestSemaphore_staleHolderRejected(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &fencelock.Options{TTL: 300 * time.Millisecond, RenewInterval: -1, RetryInterval: 50 * time.Millisecond}
	c := newClient(t, s.Client(t), opts)
	ctx := t.Context()
	sem := c.Semaphore("stale", 1)
	old, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	// The next holder gets the slot once the old one's TTL ran out.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next, err := newClient(t, s.Client(t), opts).Semaphore("stale", 1).Acquire(wctx)
	if err != nil {
		t.Fatalf("Acquire error = %v, want nil", err)
	}
	defer next.Release(ctx)
	if next.Slot() != old.Slot() || next.Fence().Lock != old.Fence().Lock || next.Token() <= old.Token() {
		t.Fatalf("next permit %v slot %d, old %v slot %d: want the same slot with a greater token", next, next.Slot(), old, old.Slot())
	}
	if want := "stale{permit 0}"; old.Fence().Lock != want {
		t.Errorf("Fence().Lock = %q, want %q", old.Fence().Lock, want)
	}
	for name, store := range map[string]fence.Store{
		"Memory": &fence.Memory{},
		"Redis":  redisfence.New(s.Client(t), nil),
	} {
		if err := store.Put(ctx, "jobs", next.Fence(), []byte("next")); err != nil {
			t.Fatalf("%s: Put with the next permit's fence: %v, want nil", name, err)
		}
		if err := store.Put(ctx, "jobs", old.Fence(), []byte("late")); !errors.Is(err, fence.ErrStale) {
			t.Errorf("%s: the paused holder's late Put: %v, want ErrStale", name, err)
		}
	}
	if err := old.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("the paused holder's Release: %v, want ErrLeaseLost", err)
	}
}

// go-redis retries a semaphore acquisition whose reply was lost after the
// script ran: the retry must get the same permit back, not a second one.
func TestSemaphore_retriedRequestOnePermit(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	m := redistest.New(t)
	// Retries go to the server itself: they succeed.
	h := &retriedLoss{marker: []byte("{retried-sem}"), retryAddr: m.Addr(), state: lossHealed}
	rdb := retryClient(t, m, h)
	c := newClient(t, rdb, nil)
	ctx := t.Context()
	warm, err := c.Semaphore("warm-up", 2).TryAcquire(ctx)
	if err != nil {
		t.Fatalf("warm-up TryAcquire error = %v", err)
	}
	warm.Release(ctx)
	h.mu.Lock()
	h.state = lossArmed
	h.mu.Unlock()

	sem := c.Semaphore("retried-sem", 3)
	l, err := sem.TryAcquire(ctx)
	if !h.fired() {
		t.Fatalf("the fault did not fire (TryAcquire = %v, %v)", l, err)
	}
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want the retried request's permit", err)
	}
	defer l.Release(ctx)
	hs, err := sem.Holders(ctx)
	if err != nil || len(hs) != 1 || hs[0].Slot != l.Slot() || hs[0].LeaseID != l.ID() || hs[0].Token != l.Token() {
		t.Errorf("Holders() = %+v, %v; want one: slot %d, lease %s, token %d", hs, err, l.Slot(), l.ID(), l.Token())
	}
}

// A waiter is woken at once by a release, its retry interval and the
// TTL being far longer than the test's bound (the next waiter trying at
// once after a head that left holding a permit: semaphore_internal_test).
func TestSemaphore_wake(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute}
	c := newClient(t, s.Client(t), opts)
	ctx := t.Context()
	sem := c.Semaphore("wake", 2)
	var held []*fencelock.Lease
	for range 2 {
		l, err := sem.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire error = %v, want nil", err)
		}
		held = append(held, l)
	}
	admin := s.Client(t)
	const channel = "fencelock:{wake}:permits:released"
	waiters := newClient(t, s.Client(t), opts).Semaphore("wake", 2)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan *fencelock.Lease, 2)
	for range 2 {
		go func() {
			l, err := waiters.Acquire(wctx)
			if err != nil {
				t.Errorf("waiting Acquire error = %v, want nil", err)
			}
			got <- l
		}()
	}
	redistest.WaitFor(t, 5*time.Second, "the waiters to subscribe", func() bool {
		return admin.PubSubNumSub(ctx, channel).Val()[channel] == 1
	})
	// One release wakes one waiter.
	if err := held[0].Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	first := <-got
	if first == nil {
		t.FailNow()
	}
	first.Release(ctx)
	if l := <-got; l != nil { // the other waiter, once first's release woke it
		l.Release(ctx)
	}
	held[1].Release(ctx)
}

// N is kept with the semaphore: an acquisition that asks for another N
// is refused (ErrInvalid, naming both, at once even from Acquire, and even
// with every permit held) and takes nothing; Client.Permits reads it;
// Resize changes it on purpose. After a shrink, a permit at or above the
// smaller N stays valid until released, and is not issued again; growing
// is immediate. On one node and on a quorum.
func TestSemaphore_permitsChange(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	for name, c := range map[string]*fencelock.Client{
		"node":   newClient(t, s.Client(t), nil),
		"quorum": newQuorum(t, nodes, nil),
	} {
		if n, err := c.Permits(ctx, "resize"); err != nil || n != 0 {
			t.Fatalf("%s: Permits before any acquisition = %d, %v; want 0", name, n, err)
		}
		big, small := c.Semaphore("resize", 3), c.Semaphore("resize", 1)
		var held [3]*fencelock.Lease // by slot
		for i := range held {
			l, err := big.TryAcquire(ctx)
			if err != nil {
				t.Fatalf("%s: TryAcquire %d = %v", name, i, err)
			}
			held[l.Slot()] = l
		}
		if n, err := c.Permits(ctx, "resize"); err != nil || n != 3 {
			t.Errorf("%s: Permits = %d, %v; want 3", name, n, err)
		}
		for what, try := range map[string]func() error{
			"TryAcquire": func() error { _, err := small.TryAcquire(ctx); return err },
			// No deadline: an Acquire that waited would not return.
			"Acquire": func() error { _, err := small.Acquire(ctx); return err },
		} {
			err := try()
			if !errors.Is(err, fencelock.ErrInvalid) || !strings.Contains(err.Error(), "has 3 permits, not 1") {
				t.Errorf("%s: Semaphore(1).%s on a semaphore of 3 = %v, want ErrInvalid naming both", name, what, err)
			}
		}
		// Free slots do not change the refusal.
		held[2].Release(ctx)
		if _, err := c.Semaphore("resize", 5).TryAcquire(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("%s: Semaphore(5).TryAcquire on a semaphore of 3 = %v, want ErrInvalid", name, err)
		}
		// A shrink on purpose.
		if err := small.Resize(ctx); err != nil {
			t.Fatalf("%s: Resize to 1 = %v", name, err)
		}
		if n, err := c.Permits(ctx, "resize"); err != nil || n != 1 {
			t.Errorf("%s: Permits after Resize = %d, %v; want 1", name, n, err)
		}
		if _, err := big.TryAcquire(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("%s: Semaphore(3).TryAcquire after the shrink to 1 = %v, want ErrInvalid", name, err)
		}
		if _, err := small.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
			t.Fatalf("%s: Semaphore(1).TryAcquire with slot 0 held: %v, want ErrNotAcquired", name, err)
		}
		// Slots 1 and up stay valid under the smaller N.
		if err := held[1].Renew(ctx); err != nil {
			t.Errorf("%s: Renew of slot %d after the shrink: %v, want nil", name, held[1].Slot(), err)
		}
		held[0].Release(ctx)
		l, err := small.TryAcquire(ctx)
		if err != nil || l.Slot() != 0 {
			t.Fatalf("%s: Semaphore(1).TryAcquire with slot 0 free = %v, %v; want slot 0", name, l, err)
		}
		// Growing is immediate.
		grown := c.Semaphore("resize", 4)
		if err := grown.Resize(ctx); err != nil {
			t.Fatalf("%s: Resize to 4 = %v", name, err)
		}
		l3, err := grown.TryAcquire(ctx)
		if err != nil || l3.Slot() == 0 || l3.Slot() == 1 {
			t.Fatalf("%s: Semaphore(4).TryAcquire = %v, %v; want a free slot", name, l3, err)
		}
		for _, l := range []*fencelock.Lease{l, l3, held[1]} {
			if err := l.Release(ctx); err != nil {
				t.Errorf("%s: Release %v: %v", name, l, err)
			}
		}
	}
}

// Bad input is reported, wrapping ErrInvalid, by every call, and nothing
// is sent.
func TestSemaphore_invalid(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	c := newClient(t, s.Client(t), nil)
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		permits int
	}{
		{"n", 0}, {"n", -1}, {"n", fencelock.MaxPermits + 1}, {"", 1}, {"a{b", 2}, {"a}b", 2}, {"tab\t", 2},
		{strings.Repeat("x", fencelock.MaxNameLen+1), 1},
	} {
		sem := c.Semaphore(tc.name, tc.permits)
		_, err1 := sem.TryAcquire(ctx)
		_, err2 := sem.Acquire(ctx)
		_, err3 := sem.Holders(ctx)
		err4 := sem.Do(ctx, func(context.Context, fence.Fence) error { return nil })
		_, err5 := sem.Attach(0, "secret", 1)
		for i, err := range []error{err1, err2, err3, err4, err5} {
			if !errors.Is(err, fencelock.ErrInvalid) {
				t.Errorf("Semaphore(%q, %d): call %d error = %v, want ErrInvalid", tc.name, tc.permits, i+1, err)
			}
		}
	}
	sem := c.Semaphore("ok", 2)
	for _, slot := range []int{-1, 2} {
		if _, err := sem.Attach(slot, "secret", 1); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Attach(slot %d) error = %v, want ErrInvalid", slot, err)
		}
	}
	if n := admin.DBSize(ctx).Val(); n != 0 {
		t.Errorf("DBSIZE = %d after invalid calls, want 0", n)
	}
	// The largest semaphore works.
	l, err := c.Semaphore("most", fencelock.MaxPermits).TryAcquire(ctx)
	if err != nil || l.Slot() != 0 {
		t.Fatalf("Semaphore(MaxPermits).TryAcquire = %v, %v; want slot 0", l, err)
	}
	l.Release(ctx)
}

// A slot whose key holds the wrong type fails the acquisition with a
// clear error, and nothing is written.
func TestSemaphore_wrongType(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	c := newClient(t, s.Client(t), nil)
	ctx := t.Context()
	for _, tc := range []struct{ name, key string }{
		{"wt1", "fencelock:{wt1}:permit:1"},       // a lock key, a slot above the free one
		{"wt2", "fencelock:{wt2}:permit:0:token"}, // the free slot's counter
	} {
		if err := admin.RPush(ctx, tc.key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		_, err := c.Semaphore(tc.name, 2).TryAcquire(ctx)
		if err == nil || errors.Is(err, fencelock.ErrNotAcquired) || !errorHasPrefix(err, "WRONGTYPE") {
			t.Errorf("TryAcquire with %s a list: %v, want a WRONGTYPE error", tc.key, err)
		}
		if keys := admin.Keys(ctx, "fencelock:{"+tc.name+"}*").Val(); len(keys) != 1 {
			t.Errorf("keys after the failed attempt: %v, want only %s", keys, tc.key)
		}
	}
}

// Hooks see a permit as a lease of the semaphore's name.
func TestSemaphore_hooks(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	var mu sync.Mutex
	var events []string
	note := func(e string) { mu.Lock(); events = append(events, e); mu.Unlock() }
	c := newClient(t, s.Client(t), &fencelock.Options{Hooks: &fencelock.Hooks{
		AcquireDone: func(_ context.Context, i fencelock.AcquireDoneInfo) { note("acquired " + i.Name) },
		ReleaseDone: func(_ context.Context, i fencelock.ReleaseDoneInfo) { note("released " + i.Name) },
	}})
	ctx := t.Context()
	err := c.Semaphore("hooked", 2).Do(ctx, func(ctx context.Context, f fence.Fence) error {
		if f.Lock != "hooked{permit 0}" {
			t.Errorf("Do's fence %v, want lock %q", f, "hooked{permit 0}")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do error = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(events, ", "), "acquired hooked, released hooked"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// semaphoreLifeCycle runs what every deployment must support for
// semaphores: permits up to N, Holders, a waiter in another Client woken
// by a release, release.
func semaphoreLifeCycle(t *testing.T, dial func() redis.UniversalClient, opts *fencelock.Options) {
	t.Helper()
	ctx := t.Context()
	o := *opts
	o.TTL, o.RetryInterval = time.Minute, time.Minute
	c := newClient(t, dial(), &o)
	sem := c.Semaphore("life", 2)
	var held []*fencelock.Lease
	for i := range 2 {
		l, err := sem.TryAcquire(ctx)
		if err != nil || l.Slot() != i {
			t.Fatalf("TryAcquire %d = %v, %v; want slot %d", i, l, err, i)
		}
		held = append(held, l)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with all held: %v, want ErrNotAcquired", err)
	}
	hs, err := sem.Holders(ctx)
	if err != nil || len(hs) != 2 || hs[0].LeaseID != held[0].ID() || hs[1].Token != held[1].Token() {
		t.Fatalf("Holders() = %+v, %v; want both permits", hs, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	waiter := newClient(t, dial(), &o).Semaphore("life", 2)
	go func() {
		l, err := waiter.Acquire(wctx)
		if err == nil && l.Slot() != 1 {
			err = errors.New("waiter got slot " + l.Fence().Lock)
		}
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	// Whether the waiter subscribed before the release or tried after
	// it, it must get the permit long before its retry interval.
	time.AfterFunc(100*time.Millisecond, func() { held[1].Release(ctx) })
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire: %v, want the released permit", err)
	}
	if err := held[0].Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
}

func TestSemaphore_cluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	semaphoreLifeCycle(t, func() redis.UniversalClient { return cl.Client(t, nil) }, &fencelock.Options{})
}

func TestSemaphore_sentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	semaphoreLifeCycle(t, func() redis.UniversalClient { return sentinelClient(t, g, nil) }, &fencelock.Options{MinReplicas: 1})
}

// On a quorum, a slot is free only where no lease holds it on a majority:
// a slot held on two nodes of three is skipped, one held on one node only
// (a leftover) is taken.
func TestSemaphore_quorum(t *testing.T) {
	t.Parallel()
	servers, rdbs := quorumNodes(t, 3)
	c := newQuorum(t, rdbs, &fencelock.Options{TTL: time.Minute})
	ctx := t.Context()
	// Slot 0 held by a foreign owner on a majority, slot 1 on a minority.
	for i, s := range servers {
		admin := s.Client(t)
		if i < 2 {
			admin.Set(ctx, "fencelock:{q-sem}:permit:0", "foreign", time.Minute)
		} else {
			admin.Set(ctx, "fencelock:{q-sem}:permit:1", "foreign", time.Minute)
		}
	}
	sem := c.Semaphore("q-sem", 2)
	l, err := sem.TryAcquire(ctx)
	if err != nil || l.Slot() != 1 {
		t.Fatalf("TryAcquire = %v, %v; want slot 1 (slot 0 held on a majority)", l, err)
	}
	if _, err := sem.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with both slots held: %v, want ErrNotAcquired", err)
	}
	hs, err := sem.Holders(ctx)
	if err != nil || len(hs) != 2 || hs[1].LeaseID != l.ID() {
		t.Errorf("Holders() = %+v, %v; want slots 0 and 1, slot 1 this lease's", hs, err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	l, err = sem.TryAcquire(ctx)
	if err != nil || l.Slot() != 1 {
		t.Fatalf("TryAcquire after release = %v, %v; want slot 1", l, err)
	}
	l.Release(ctx)
}

// A permit acquisition whose reply is lost and whose retry by go-redis
// fails (refused, or READONLY) took a slot at the first try, unknown to
// the client: the attempt must release it before returning the error.
func TestSemaphore_lostReplyRetryFails(t *testing.T) {
	t.Parallel()
	for _, tc := range retryCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, h, rdb, arm := retrySetup(t, tc, 0, "{sem-retried}")
			c := newClient(t, rdb, nil)
			ctx := t.Context()
			warm, err := c.Semaphore("warm-up", 2).TryAcquire(ctx)
			if err != nil {
				t.Fatalf("warm-up TryAcquire error = %v", err)
			}
			warm.Release(ctx)
			arm()
			l, err := c.Semaphore("sem-retried", 2).TryAcquire(ctx)
			if !h.fired() {
				t.Fatalf("the fault did not fire (TryAcquire = %v, %v)", l, err)
			}
			if err == nil || l != nil {
				t.Fatalf("TryAcquire = %v, %v; want an error", l, err)
			}
			if keys := m.Client(t).Keys(ctx, "fencelock:{sem-retried}:permit:?").Val(); len(keys) != 0 {
				t.Errorf("slots left behind by the attempt whose retry failed: %v, want none", keys)
			}
		})
	}
}
