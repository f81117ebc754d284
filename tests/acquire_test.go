package tests

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestClient_TryAcquire_race(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const clients = 8
	for round := range 20 {
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won []*fencelock.Lease
		)
		for range clients {
			wg.Go(func() {
				l, err := newClient(t, rdb, nil).TryAcquire(ctx, "contended")
				if err == nil {
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				} else if !errors.Is(err, fencelock.ErrNotAcquired) {
					t.Errorf("TryAcquire error = %v, want nil or ErrNotAcquired", err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d of %d racing clients acquired, want exactly 1", round, len(won), clients)
		}
		if err := won[0].Release(ctx); err != nil {
			t.Fatalf("Release error = %v", err)
		}
	}
}

// A waiter is woken by the release's publish: with the fallback retry a
// minute away and the holder's TTL ten seconds, nothing else could wake
// it within the test's bound.
func TestClient_Acquire_wokenByRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{RetryInterval: time.Minute})
	// The holder's Client is another one (as in another process): only the
	// publish can tell the waiter's Client of the release.
	holder, err := newClient(t, rdb, nil).TryAcquire(ctx, "handoff")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}

	type result struct {
		l   *fencelock.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	go func() {
		l, err := c.Acquire(waitCtx, "handoff")
		got <- result{l, err, time.Now()}
	}()
	// Release once the waiter is subscribed.
	redistest.WaitFor(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return rdb.PubSubNumSub(ctx, "fencelock:{handoff}:released").Val()["fencelock:{handoff}:released"] > 0
	})
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire by waiter error = %v, want woken by the release", r.err)
	}
	t.Logf("handoff took %v", r.at.Sub(released))
	if r.l.Token() <= holder.Token() {
		t.Errorf("waiter's token = %d, want > %d", r.l.Token(), holder.Token())
	}
	r.l.Release(ctx)
}

// A lock that expires publishes nothing; the waiter retries when the
// holder's TTL runs out rather than at the (here, distant) fallback.
func TestClient_Acquire_afterExpiry(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	short := newClient(t, rdb, &fencelock.Options{TTL: 200 * time.Millisecond, RenewInterval: -1})
	holder, err := short.TryAcquire(ctx, "expiring")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer holder.Release(ctx)
	c := newClient(t, rdb, &fencelock.Options{RetryInterval: time.Minute})
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Acquire(waitCtx, "expiring")
	if err != nil {
		t.Fatalf("Acquire error = %v, want the lock once the holder's TTL ran out", err)
	}
	l.Release(ctx)
}

func TestClient_Acquire_contextDone(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	holder, err := c.TryAcquire(ctx, "busy")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer holder.Release(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.Acquire(waitCtx, "busy")
	if !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire error = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}

	_, err = c.TryAcquire(ctx, "busy")
	if !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire of a held lock error = %v, want ErrNotAcquired", err)
	}
}

func TestClient_Do(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	boom := errors.New("boom")
	var seen fence.Fence
	err := c.Do(ctx, "do", func(ctx context.Context, f fence.Fence) error {
		seen = f
		if ctx.Err() != nil {
			t.Errorf("lease context done inside Do: %v", context.Cause(ctx))
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Do error = %v, want f's error", err)
	}
	if seen.Lock != "do" || seen.Token <= 0 || seen.Lease == "" {
		t.Errorf("Do passed fence %+v, want lock %q with a token and lease", seen, "do")
	}
	if n := rdb.Exists(ctx, "fencelock:{do}").Val(); n != 0 {
		t.Errorf("lock still held after Do returned")
	}

	err = c.Do(ctx, "do", func(ctx context.Context, f fence.Fence) error {
		rdb.Del(ctx, "fencelock:{do}")
		return nil
	})
	if !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Do after the lock was deleted: error = %v, want ErrLeaseLost", err)
	}
}

func TestClient_badInput(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	rec := &recorder{}
	rdb.AddHook(rec)
	ctx := t.Context()

	for _, name := range []string{"", string(make([]byte, fencelock.MaxNameLen+1)), "a{b", "a}b", "tab\there", "new\nline", "naïve", "\x7f"} {
		if _, err := newClient(t, rdb, nil).TryAcquire(ctx, name); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("TryAcquire(%q) error = %v, want ErrInvalid", name, err)
		}
		if _, err := newClient(t, rdb, nil).Acquire(ctx, name); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Acquire(%q) error = %v, want ErrInvalid", name, err)
		}
	}
	for _, opts := range []fencelock.Options{
		{TTL: -time.Second},
		{TTL: time.Millisecond},
		{TTL: 25 * time.Hour},
		{TTL: time.Second, RenewInterval: time.Second},
		{RetryInterval: -1},
		{MinReplicas: -1},
		{TTL: time.Second, ReplicaTimeout: 2 * time.Second},
		{TTL: time.Hour, TokenRetention: time.Minute},
		{NodeTimeout: -time.Second},
		{TTL: time.Second, NodeTimeout: time.Second},
	} {
		if _, err := newClient(t, rdb, &opts).TryAcquire(ctx, "ok"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("TryAcquire with Options %+v error = %v, want ErrInvalid", opts, err)
		}
	}
	if _, err := newClient(t, nil, nil).TryAcquire(ctx, "ok"); !errors.Is(err, fencelock.ErrInvalid) {
		t.Errorf("TryAcquire with a nil client error = %v, want ErrInvalid", err)
	}
	if n, names := rec.reset(); n != 0 {
		t.Errorf("bad input sent %d commands %v, want none", n, names)
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Errorf("bad input wrote %d keys, want none", n)
	}
}

func TestClient_wrongTypeKeys(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)

	// A list where the lock should be: a clear error, nothing written.
	rdb.RPush(ctx, "fencelock:{list}", "x")
	_, err := c.TryAcquire(ctx, "list")
	if err == nil || errors.Is(err, fencelock.ErrNotAcquired) || !redis.HasErrorPrefix(errors.Unwrap(err), "WRONGTYPE") {
		t.Errorf("TryAcquire over a list error = %v, want a WRONGTYPE error, not ErrNotAcquired", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{list}:token").Val(); n != 0 {
		t.Errorf("token key written despite the error")
	}
	if got := rdb.LRange(ctx, "fencelock:{list}", 0, -1).Val(); len(got) != 1 || got[0] != "x" {
		t.Errorf("list changed to %v", got)
	}

	// A token key that is not an integer: error, and no lock taken.
	for name, setup := range map[string]func(key string){
		"tokenlist": func(key string) { rdb.RPush(ctx, key, "1") },
		"tokentext": func(key string) { rdb.Set(ctx, key, "twelve", 0) },
	} {
		setup("fencelock:{" + name + "}:token")
		if _, err := c.TryAcquire(ctx, name); err == nil || errors.Is(err, fencelock.ErrNotAcquired) {
			t.Errorf("TryAcquire(%q) with a bad token key error = %v, want a clear error", name, err)
		}
		if n := rdb.Exists(ctx, "fencelock:{"+name+"}").Val(); n != 0 {
			t.Errorf("TryAcquire(%q) took the lock despite the error", name)
		}
	}
}

// A panic in Do's function releases the lock before it goes on up: the
// keeper would otherwise renew it for the life of the process (net/http,
// for one, recovers handler panics).
func TestClient_Do_panic(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the function's panic %q", r, "boom")
			}
		}()
		c.Do(ctx, "panics", func(context.Context, fence.Fence) error { panic("boom") })
		t.Error("Do returned, want the panic to go on")
	}()
	if n := rdb.Exists(ctx, "fencelock:{panics}").Val(); n != 0 {
		t.Errorf("lock still held after Do's function panicked")
	}
	if _, err := c.TryAcquire(ctx, "panics"); err != nil {
		t.Errorf("TryAcquire after the panic error = %v, want nil", err)
	}
}

// Cancelling the context given to Do ends the function's context too, and
// the lease is released when the function returns.
func TestClient_Do_cancel(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	c := newClient(t, rdb, nil)
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("caller stopped")
	err := c.Do(ctx, "cancelled", func(fctx context.Context, f fence.Fence) error {
		cancel(stop)
		select {
		case <-fctx.Done():
			return context.Cause(fctx)
		case <-time.After(10 * time.Second):
			return errors.New("function's context not done 10s after the caller's was cancelled")
		}
	})
	if !errors.Is(err, stop) || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Do error = %v, want the caller's cause and no lease loss", err)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{cancelled}").Val(); n != 0 {
		t.Errorf("lock still held after Do returned")
	}
}

// An acquisition whose reply was lost (the script ran and took the lock;
// the client saw a timeout) leaves no lock behind: the client deletes it
// with the attempt's owner value before returning the error.
func TestClient_TryAcquire_lostReply(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	hook := &loseReplies{match: func(cmd redis.Cmder) bool { return runsScript(cmd, "lua/acquire.lua") }}
	rdb.AddHook(hook)
	c := newClient(t, rdb, nil)

	l, err := c.TryAcquire(ctx, "lost-reply")
	if !errors.Is(err, errLostReply) || errors.Is(err, fencelock.ErrNotAcquired) || l != nil {
		t.Fatalf("TryAcquire = %v, %v; want nil and the lost reply's error", l, err)
	}
	if len(hook.dropped()) == 0 {
		t.Fatal("no reply was dropped: the test's hook did not match the acquire script")
	}
	if n := rdb.Exists(ctx, "fencelock:{lost-reply}").Val(); n != 0 {
		t.Errorf("lock left behind by the acquisition whose reply was lost: EXISTS = %d, want 0", n)
	}
	// The counter stays: the token it issued must never be issued again.
	if n := rdb.Exists(ctx, "fencelock:{lost-reply}:token").Val(); n != 1 {
		t.Errorf("token counter EXISTS = %d, want 1", n)
	}
}

// An Acquire whose attempts keep failing waits the retry interval between
// them: the release that cleans up an attempt whose reply was lost wakes
// the waiters of the lock, the failed one included, and must not become
// a loop that hammers the server as fast as it answers.
func TestClient_Acquire_backsOffAfterErrors(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	hook := &loseReplies{match: func(cmd redis.Cmder) bool { return runsScript(cmd, "lua/acquire.lua") }}
	rdb.AddHook(hook)
	c := newClient(t, rdb, &fencelock.Options{RetryInterval: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := c.Acquire(ctx, "lost-replies")
	if !errors.Is(err, errLostReply) || !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire error = %v, want the lost reply's, ErrNotAcquired and the deadline", err)
	}
	// One attempt before joining the waiters, one as their head; the
	// next only after the retry interval, long after the deadline.
	if got, want := len(hook.dropped()), 2; got > want {
		t.Errorf("%d attempts within 2s, want at most %d with a one-minute retry interval", got, want)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{lost-replies}").Val(); n != 0 {
		t.Errorf("lock left behind by the failed attempts: EXISTS = %d, want 0", n)
	}
}

// An acquisition whose context ends while its request is in flight leaves
// no lock behind either.
func TestClient_TryAcquire_cancelledMidRequest(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The hook cancels the attempt's context once the script has run,
	// before the caller sees the reply.
	hook := &loseReplies{match: func(cmd redis.Cmder) bool {
		if runsScript(cmd, "lua/acquire.lua") {
			cancel()
			return true
		}
		return false
	}}
	rdb.AddHook(hook)
	c := newClient(t, rdb, nil)
	if _, err := c.TryAcquire(ctx, "cancelled"); err == nil {
		t.Fatalf("TryAcquire error = nil, want the cancelled attempt's error")
	}
	if len(hook.dropped()) == 0 {
		t.Fatal("the acquire script's reply was not intercepted")
	}
	// With the caller's context ended, the cleanup goes on in the
	// background (for up to a second): TryAcquire returns at once.
	admin := s.Client(t)
	redistest.WaitFor(t, 10*time.Second, "the cancelled acquisition's lock released", func() bool {
		return admin.Exists(t.Context(), "fencelock:{cancelled}").Val() == 0
	})
}

// go-redis bounds a request by its context's deadline only with
// ContextTimeoutEnabled; without it, a request on a server that answers
// nothing takes the client's ReadTimeout whatever the context, and the
// library's deadlines (a renewal's before the lease's, Release's by its
// context) would not hold. New and NewQuorum refuse such a client:
// every call reports ErrInvalid naming the option, and nothing is sent.
func TestNew_contextTimeoutRequired(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	rec := &recorder{}
	without := redis.NewClient(&redis.Options{Addr: s.Addr()})
	without.AddHook(rec)
	t.Cleanup(func() { without.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr()}})
	t.Cleanup(func() { cluster.Close() })
	type wrapped struct{ *redis.Client }
	for name, c := range map[string]*fencelock.Client{
		"New":                       newClient(t, without, nil),
		"New(ClusterClient)":        newClient(t, cluster, nil),
		"New(a type embedding one)": newClient(t, wrapped{without}, nil),
		"NewQuorum":                 newQuorum(t, []redis.UniversalClient{s.Client(t), without, s.Client(t)}, nil),
	} {
		_, err := c.TryAcquire(ctx, "refused")
		if !errors.Is(err, fencelock.ErrInvalid) || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
			t.Errorf("%s: TryAcquire error = %v, want ErrInvalid naming ContextTimeoutEnabled", name, err)
		}
	}
	if n, names := rec.reset(); n != 0 {
		t.Errorf("refused clients sent %d commands %v, want none", n, names)
	}
	with := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { with.Close() })
	l, err := newClient(t, with, nil).TryAcquire(ctx, "accepted")
	if err != nil {
		t.Fatalf("TryAcquire with ContextTimeoutEnabled: error = %v, want nil", err)
	}
	l.Release(ctx)
}
