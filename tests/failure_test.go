package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// SCRIPT FLUSH (as after a restart or failover) empties the script cache;
// every call must recover from NOSCRIPT by itself.
func TestClient_NOSCRIPT(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})

	rdb.ScriptFlush(ctx)
	l, err := c.TryAcquire(ctx, "flushed")
	if err != nil {
		t.Fatalf("TryAcquire after SCRIPT FLUSH error = %v", err)
	}
	rdb.ScriptFlush(ctx)
	if err := l.Renew(ctx); err != nil {
		t.Errorf("Renew after SCRIPT FLUSH error = %v", err)
	}
	rdb.ScriptFlush(ctx)
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after SCRIPT FLUSH error = %v", err)
	}
}

// Writing to a replica (a demoted master) is a Redis error, wrapped and
// reported, never mistaken for "held by someone else".
func TestClient_READONLY(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	c := newClient(t, r.Client(t), nil)
	_, err := c.TryAcquire(t.Context(), "ro")
	if err == nil || errors.Is(err, fencelock.ErrNotAcquired) || !redis.HasErrorPrefix(errors.Unwrap(err), "READONLY") {
		t.Errorf("TryAcquire on a replica error = %v, want a wrapped READONLY error", err)
	}

	// Acquire keeps trying (a failover may cure READONLY) until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = newClient(t, r.Client(t), &fencelock.Options{RetryInterval: 20 * time.Millisecond}).Acquire(ctx, "ro")
	if !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire on a replica error = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
}

// A release whose publish the server refuses (an ACL user without the
// lock's channel) fails with the refusal and changes nothing: the lock
// stays held, by this lease, until a release the server allows or its
// TTL. The script publishes before it deletes, because scripts never roll
// back. The native commands are taken away, so that the Lua script
// releases on every server.
func TestClient_releasePublishRefused(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	rules := append([]string{"nochannel", "on", ">pw", "~*", "resetchannels", "+@all"}, removeNatives(t, admin)...)
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER"}, toAny(rules)...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", rules, err)
	}
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), Username: "nochannel", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	const name = "unannounced"
	if err := rdb.Publish(ctx, "fencelock:{"+name+"}:released", "").Err(); !redis.HasErrorPrefix(err, "NOPERM") {
		t.Fatalf("PUBLISH on the lock's channel by the user: error = %v, want NOPERM", err)
	}
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	l, err := c.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	owner, _ := admin.Get(ctx, "fencelock:{"+name+"}").Result()
	err = l.Release(ctx)
	if err == nil || errors.Is(err, fencelock.ErrLeaseLost) || !strings.Contains(err.Error(), "publish") && !strings.Contains(err.Error(), "channel") {
		t.Errorf("Release with the publish refused: error = %v, want the refusal of the publish (its channel)", err)
	}
	if v, err := admin.Get(ctx, "fencelock:{"+name+"}").Result(); err != nil || v != owner {
		t.Errorf("after the refused Release, lock = %q, %v; want it still held by the lease", v, err)
	}
}

func TestClient_timeout(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), ReadTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, nil)
	s.Pause(t)
	defer s.Resume(t)
	_, err := c.TryAcquire(t.Context(), "stalled")
	var nerr interface{ Timeout() bool }
	if err == nil || errors.Is(err, fencelock.ErrNotAcquired) || !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Errorf("TryAcquire on a stalled server error = %v, want a wrapped timeout", err)
	}
}

// With MinReplicas, an acquisition the replica acknowledged succeeds; one
// it could not acknowledge fails closed and leaves no lock behind.
func TestClient_MinReplicas(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	rdb := m.Client(t)
	ctx := t.Context()
	redistest.WaitReplicasInSync(t, m, 1)
	// A generous timeout where the replica is live (the machine may be
	// loaded), a short one where it is paused and cannot answer.
	c := newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second})

	l, err := c.TryAcquire(ctx, "replicated")
	if err != nil {
		t.Fatalf("TryAcquire with a live replica error = %v", err)
	}
	if got := r.Client(t).Get(ctx, "fencelock:{replicated}").Val(); got == "" {
		t.Errorf("replica lacks the lock after an acknowledged acquisition")
	}
	l.Release(ctx)

	r.Pause(t)
	defer r.Resume(t)
	c = newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	_, err = c.TryAcquire(ctx, "unreplicated")
	if !errors.Is(err, fencelock.ErrNotReplicated) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with a paused replica error = %v, want ErrNotReplicated and ErrNotAcquired", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{unreplicated}").Val(); n != 0 {
		t.Errorf("lock left behind by an unreplicated acquisition")
	}
}

// With MinReplicas, an acquisition whose WAIT reply is lost (the lock was
// taken, replication unknown) fails and leaves no lock behind.
func TestClient_MinReplicas_waitLost(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	m := redistest.New(t)
	redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	rdb := m.Client(t)
	ctx := t.Context()
	redistest.WaitReplicasInSync(t, m, 1)
	hook := &loseReplies{match: func(cmd redis.Cmder) bool { return cmd.Name() == "wait" }}
	rdb.AddHook(hook)
	c := newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second})
	l, err := c.TryAcquire(ctx, "wait-lost")
	if !errors.Is(err, errLostReply) || l != nil {
		t.Fatalf("TryAcquire = %v, %v; want nil and the lost WAIT reply's error", l, err)
	}
	if len(hook.dropped()) == 0 {
		t.Fatal("no WAIT reply was dropped")
	}
	if n := rdb.Exists(ctx, "fencelock:{wait-lost}").Val(); n != 0 {
		t.Errorf("lock left behind by an acquisition whose WAIT reply was lost")
	}
}
