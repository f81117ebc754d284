package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// gone polls until key no longer exists on rdb: an expiry is waited for on
// the server's state, never by sleeping a guessed time.
func gone(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := t.Context()
	for deadline := time.Now().Add(5 * time.Second); ; {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", key, err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after 5s", key)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval, not a synchronisation
	}
}

// A lease that expires leaves its lock-delay behind: the lock is free, but
// every acquirer, one without a LockDelay of its own included, is refused
// until the delay key, which outlived the lock by LockDelay, expires.
func TestLockDelay_afterExpiry(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const ttl, delay = 100 * time.Millisecond, 400 * time.Millisecond
	holder := newClient(t, rdb, &fencelock.Options{TTL: ttl, LockDelay: delay, RenewInterval: -1})
	other := newClient(t, rdb, nil)
	l, err := holder.TryAcquire(ctx, "crash")
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.Get(ctx, "fencelock:{crash}:delay").Val(); got != l.Secret() {
		t.Fatalf("delay key holds %q, want the lease's owner value", got)
	}
	if lock, dk := rdb.PTTL(ctx, "fencelock:{crash}").Val(), rdb.PTTL(ctx, "fencelock:{crash}:delay").Val(); dk-lock < delay-20*time.Millisecond || dk > ttl+delay {
		t.Fatalf("delay key PTTL %v with the lock's %v, want about the lock's + %v", dk, lock, delay)
	}
	// The holder never releases: its lock expires.
	gone(t, rdb, "fencelock:{crash}")
	left := rdb.PTTL(ctx, "fencelock:{crash}:delay").Val()
	if left <= 0 {
		t.Fatalf("delay key PTTL %v after the lock expired, want > 0", left)
	}
	if _, err := other.TryAcquire(ctx, "crash"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire within the delay: error = %v, want ErrNotAcquired", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{crash}").Val(); n != 0 {
		t.Fatal("a refused acquisition wrote the lock")
	}
	gone(t, rdb, "fencelock:{crash}:delay")
	l2, err := other.TryAcquire(ctx, "crash")
	if err != nil {
		t.Fatalf("TryAcquire after the delay: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("token after the delay %d, want > %d", l2.Token(), l.Token())
	}
	if n := rdb.Exists(ctx, "fencelock:{crash}:delay").Val(); n != 0 {
		t.Error("a lease without LockDelay wrote a delay key")
	}
}

// Release skips the delay: the delay key goes with the lock, and the next
// acquirer takes the lock at once. A Release that comes after the lease
// expired deletes nothing: the delay its expiry started stands.
func TestLockDelay_releaseSkips(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	// A TTL that a loaded machine's pause between TryAcquire and Release
	// does not reach, short enough to wait for its expiry below.
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Second, LockDelay: time.Minute, RenewInterval: -1})
	l, err := c.TryAcquire(ctx, "clean")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "fencelock:{clean}", "fencelock:{clean}:delay").Val(); n != 0 {
		t.Fatalf("%d of the lock and delay key left after Release, want none", n)
	}
	l, err = c.TryAcquire(ctx, "clean")
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	gone(t, rdb, "fencelock:{clean}")
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release after expiry: error = %v, want ErrLeaseLost", err)
	}
	if got := rdb.PTTL(ctx, "fencelock:{clean}:delay").Val(); got < 50*time.Second {
		t.Errorf("delay key PTTL %v after a late Release, want the minute's delay to stand", got)
	}
}

// A renewal writes the delay key anew with the lock: it outlives the
// renewed lock by LockDelay again, even if it had been lost meanwhile.
func TestLockDelay_renewTracksLease(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const ttl, delay = 30 * time.Second, 30 * time.Second
	c := newClient(t, rdb, &fencelock.Options{TTL: ttl, LockDelay: delay, RenewInterval: -1})
	l, err := c.TryAcquire(ctx, "renewed")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	rdb.PExpire(ctx, "fencelock:{renewed}:delay", 10*time.Millisecond)
	gone(t, rdb, "fencelock:{renewed}:delay")
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rdb.PTTL(ctx, "fencelock:{renewed}:delay").Val(); got <= ttl+delay-time.Second {
		t.Errorf("delay key PTTL %v after Renew, want about %v", got, ttl+delay)
	}
	if got := rdb.Get(ctx, "fencelock:{renewed}:delay").Val(); got != l.Secret() {
		t.Errorf("delay key holds %q after Renew, want the lease's owner value", got)
	}
}

// An election's leader that expires delays the next Campaign; one that
// resigns does not.
func TestLockDelay_election(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{TTL: 100 * time.Millisecond, LockDelay: time.Minute, RenewInterval: -1})
	if _, err := c.Election("crashed").Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	gone(t, rdb, "fencelock:{crashed}")
	if rdb.PTTL(ctx, "fencelock:{crashed}:delay").Val() <= 0 {
		t.Fatal("no lock-delay after the leader's lease expired")
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := c.Election("crashed").Campaign(cctx, "b"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("Campaign within the delay: error = %v, want ErrNotAcquired", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{crashed}", "fencelock:{crashed}:leader").Val(); n != 0 {
		t.Fatal("a Campaign within the delay wrote the lock or the record")
	}

	// A leader's renewal writes its delay key anew, as a lease's does.
	led, err := c.Election("renewed").Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "fencelock:{renewed}:delay")
	if err := led.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rdb.PTTL(ctx, "fencelock:{renewed}:delay").Val(); got < 59*time.Second {
		t.Errorf("delay key PTTL %v after the leader's Renew, want about TTL + 1m", got)
	}
	led.Release(ctx)

	e := c.Election("resigned")
	if _, err := e.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, "fencelock:{resigned}:delay").Val(); n != 0 {
		t.Fatal("delay key left after Resign")
	}
	if _, err := c.Election("resigned").Campaign(ctx, "b"); err != nil {
		t.Fatalf("Campaign after Resign: %v", err)
	}
}

// On a quorum each node keeps the delay: an expired lease's delay refuses
// the next acquisition on the majority that holds it; Release clears it
// on every node.
func TestLockDelay_quorum(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	// A NodeTimeout far above its default (TTL/10), which a loaded
	// machine's replies exceed.
	c := newQuorum(t, nodes, &fencelock.Options{TTL: time.Second, NodeTimeout: 900 * time.Millisecond, LockDelay: time.Minute, RenewInterval: -1})
	l, err := c.TryAcquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns once a majority answered; the last node's release
	// may still be on its way.
	for _, n := range nodes {
		gone(t, n, "fencelock:{q}:delay")
	}
	if _, err = c.TryAcquire(ctx, "q"); err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	for _, n := range nodes {
		gone(t, n, "fencelock:{q}")
	}
	if _, err := newQuorum(t, nodes, nil).TryAcquire(ctx, "q"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire within the delay: error = %v, want ErrNotAcquired", err)
	}
	// A node that let it in is released in the background.
	for _, n := range nodes {
		gone(t, n, "fencelock:{q}")
	}
}

func TestLockDelay_invalid(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{-time.Second, time.Microsecond, fencelock.MaxLockDelay + time.Second} {
		if err := (&fencelock.Options{LockDelay: d}).Validate(); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("LockDelay %v: Validate error = %v, want ErrInvalid", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Millisecond, fencelock.MaxLockDelay} {
		if err := (&fencelock.Options{LockDelay: d}).Validate(); err != nil {
			t.Errorf("LockDelay %v: Validate error = %v, want nil", d, err)
		}
	}
}

// The keeper's background renewals, batched in one pipeline, write the
// delay key anew as Renew does.
func TestLockDelay_backgroundRenewals(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	// Renewed every 30 ms, with a TTL that a loaded machine's late
	// renewals do not reach.
	c := newClient(t, rdb, &fencelock.Options{TTL: 3 * time.Second, RenewInterval: 30 * time.Millisecond, LockDelay: 30 * time.Second})
	for _, name := range []string{"bg1", "bg2"} {
		l, err := c.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		key := "fencelock:{" + name + "}:delay"
		rdb.Del(ctx, key)
		for deadline := time.Now().Add(5 * time.Second); rdb.Exists(ctx, key).Val() == 0; {
			if time.Now().After(deadline) || l.Context().Err() != nil {
				t.Fatalf("%s: no renewal wrote the delay key again", name)
			}
			time.Sleep(5 * time.Millisecond) // a poll interval
		}
		if got := rdb.PTTL(ctx, key).Val(); got < 29*time.Second {
			t.Errorf("%s: delay key PTTL %v after a background renewal, want about TTL + 30s", name, got)
		}
	}
}

// A permit's lease keeps its slot's lock-delay as a lock's lease does: an
// expired permit's slot is refused to the next acquirer until its delay
// key expires, and a released permit's slot is not.
func TestLockDelay_permit(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const ttl, delay = 100 * time.Millisecond, 400 * time.Millisecond
	holder := newClient(t, rdb, &fencelock.Options{TTL: ttl, LockDelay: delay, RenewInterval: -1}).Semaphore("jobs", 1)
	other := newClient(t, rdb, nil).Semaphore("jobs", 1)
	const slotKey, delayKey = "fencelock:{jobs}:permit:0", "fencelock:{jobs}:permit:0:delay"

	l, err := holder.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.Get(ctx, delayKey).Val(); got != l.Secret() {
		t.Fatalf("slot's delay key holds %q, want the permit's owner value", got)
	}
	gone(t, rdb, slotKey) // the holder never releases: its permit expires
	if _, err := other.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire within the slot's delay: error = %v, want ErrNotAcquired", err)
	}
	gone(t, rdb, delayKey)
	l2, err := holder.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire after the delay: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Errorf("slot token after the delay %d, want > %d", l2.Token(), l.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := rdb.Exists(ctx, delayKey).Val(); n != 0 {
		t.Fatal("Release left the slot's delay key")
	}
	if _, err := other.TryAcquire(ctx); err != nil {
		t.Fatalf("TryAcquire after a Release: %v, want the slot at once", err)
	}
}

// A lease released by a Client without its LockDelay (Attach) deletes its
// lock but not its delay key, on every server alike: the Lua release of
// such a Client reads no delay key, as the native one never did. The delay
// then runs out LockDelay after the lock would have expired
// (FAILURE_MODEL.md, "mixed Options").
func TestLockDelay_releasedWithout(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	with := newClient(t, rdb, &fencelock.Options{LockDelay: time.Minute, RenewInterval: -1})
	l, err := with.TryAcquire(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	without := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	attached, err := without.Attach("mixed", l.Secret(), l.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := attached.Release(ctx); err != nil {
		t.Fatalf("Release by a Client without LockDelay: %v", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{mixed}").Val(); n != 0 {
		t.Fatal("lock left after Release, want it deleted")
	}
	if got := rdb.PTTL(ctx, "fencelock:{mixed}:delay").Val(); got < 50*time.Second {
		t.Errorf("delay key PTTL %v after the Release, want the minute's delay still standing", got)
	}
	if _, err := without.TryAcquire(ctx, "mixed"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire during the delay: error = %v, want ErrNotAcquired", err)
	}
}

// Holder sees a lock-delay: a lock whose lease expired without a release
// is not free while its delay stands, and Holder names that lease and how
// long the delay has left, on one node and on a quorum; Semaphore.Holders
// lists a delayed slot the same way. Once the delay is over, the lock is
// free (ErrNotHeld).
func TestLockDelay_holderSeesIt(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	const delay = 30 * time.Second
	// A short TTL, to expire soon, and most of it for a quorum node's
	// request: a new connection on a loaded machine takes more than the
	// default TTL/10.
	opts := &fencelock.Options{TTL: 300 * time.Millisecond, RenewInterval: -1, LockDelay: delay, NodeTimeout: 250 * time.Millisecond}
	for name, c := range map[string]*fencelock.Client{
		"node":   newClient(t, s.Client(t), opts),
		"quorum": newQuorum(t, nodes, opts),
	} {
		l, err := c.TryAcquire(ctx, "seen")
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", name, err)
		}
		permit, err := c.Semaphore("seen", 2).TryAcquire(ctx)
		if err != nil {
			t.Fatalf("%s: Semaphore.TryAcquire: %v", name, err)
		}
		// Not released, not renewed: both expire, their delays stand.
		redistest.WaitFor(t, 10*time.Second, "the leases to expire", func() bool {
			h, err := c.Holder(ctx, "seen")
			return err == nil && h.Delay > 0
		})
		h, err := c.Holder(ctx, "seen")
		if err != nil || h.LeaseID != l.ID() || h.Delay <= 0 || h.Delay > delay || h.TTL != 0 || h.Token != l.Token() {
			t.Errorf("%s: Holder = %+v, %v; want lease %s, token %d, TTL 0, a Delay in (0, %v]", name, h, err, l.ID(), l.Token(), delay)
		}
		var hs []fencelock.PermitHolder
		redistest.WaitFor(t, 10*time.Second, "the permit to expire", func() bool {
			hs, err = c.Semaphore("seen", 2).Holders(ctx)
			return err == nil && len(hs) == 1 && hs[0].Delay > 0
		})
		if hs[0].Slot != permit.Slot() || hs[0].LeaseID != permit.ID() {
			t.Errorf("%s: Holders = %+v, want slot %d delayed by lease %s", name, hs, permit.Slot(), permit.ID())
		}
		if _, err := c.TryAcquire(ctx, "seen"); !errors.Is(err, fencelock.ErrNotAcquired) {
			t.Errorf("%s: TryAcquire during the delay: %v, want ErrNotAcquired", name, err)
		}
	}
	// A released lease leaves no delay: the lock is free.
	c := newClient(t, s.Client(t), &fencelock.Options{LockDelay: delay})
	l, err := c.TryAcquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h, err := c.Holder(ctx, "released"); !errors.Is(err, fencelock.ErrNotHeld) {
		t.Errorf("Holder after Release = %+v, %v; want ErrNotHeld", h, err)
	}
}
