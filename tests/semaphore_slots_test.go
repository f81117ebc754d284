package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A permit acquisition too few replicas acknowledged releases the slot it
// took, whichever slot that was: here the last of four, the first three
// being held by others (the attempt's slot is unknown to the client, so
// its cleanup releases every slot its owner holds). The others' permits
// stay theirs.
func TestSemaphore_notReplicatedReleasesLastSlot(t *testing.T) {
	t.Parallel()
	s := redistest.New(t) // no replica: WAIT is never satisfied
	ctx := t.Context()
	const permits = 4
	others := newClient(t, s.Client(t), &fencelock.Options{TTL: time.Minute}).Semaphore("half", permits)
	var held []*fencelock.Lease
	for i := range permits - 1 {
		l, err := others.TryAcquire(ctx)
		if err != nil || l.Slot() != i {
			t.Fatalf("TryAcquire %d = %v, %v; want slot %d", i, l, err, i)
		}
		defer l.Release(ctx)
		held = append(held, l)
	}
	c := newClient(t, s.Client(t), &fencelock.Options{TTL: time.Minute, MinReplicas: 1, ReplicaTimeout: 10 * time.Millisecond})
	if l, err := c.Semaphore("half", permits).TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotReplicated) {
		t.Fatalf("TryAcquire with MinReplicas 1 and no replica = %v, %v; want ErrNotReplicated", l, err)
	}
	last := fmt.Sprintf("fencelock:{half}:permit:%d", permits-1)
	if n := s.Client(t).Exists(ctx, last).Val(); n != 0 {
		t.Errorf("%s left behind by the acquisition too few replicas acknowledged, want it released", last)
	}
	hs, err := others.Holders(ctx)
	if err != nil || len(hs) != len(held) {
		t.Fatalf("Holders() = %+v, %v; want the %d others' permits", hs, err, len(held))
	}
	for i, h := range hs {
		if h.Slot != i || h.LeaseID != held[i].ID() {
			t.Errorf("Holders()[%d] = %+v, want slot %d of lease %s", i, h, i, held[i].ID())
		}
	}
	l, err := others.TryAcquire(ctx)
	if err != nil || l.Slot() != permits-1 {
		t.Fatalf("TryAcquire after the cleanup = %v, %v; want slot %d", l, err, permits-1)
	}
	l.Release(ctx)
}

// A free slot that a lock-delay keeps unavailable is skipped: the
// acquisition goes on to the next free slot, and fails only when every
// slot is held or delayed.
func TestSemaphore_nextAfterDelayedSlot(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	c := newClient(t, s.Client(t), &fencelock.Options{TTL: time.Minute})
	sem := c.Semaphore("skip", 3)
	// Slots 0 and 1 free but delayed, as after leases of another Client
	// with a LockDelay expired.
	for i := range 2 {
		if err := admin.Set(ctx, fmt.Sprintf("fencelock:{skip}:permit:%d:delay", i), "expired-owner", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := sem.TryAcquire(ctx)
	if err != nil || l.Slot() != 2 {
		t.Fatalf("TryAcquire with slots 0 and 1 delayed = %v, %v; want slot 2", l, err)
	}
	defer l.Release(ctx)
	if n := admin.Exists(ctx, "fencelock:{skip}:permit:0", "fencelock:{skip}:permit:1").Val(); n != 0 {
		t.Errorf("%d delayed slots written, want none", n)
	}
	if l, err := sem.TryAcquire(ctx); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("TryAcquire with every slot held or delayed = %v, %v; want ErrNotAcquired", l, err)
	}
}

// When every permit is held, a waiter retries when the first of them
// runs out (a lease that expires publishes nothing), not when the last
// does: the slot held shortest lies between two held for minutes, and the
// retry interval is a minute.
func TestSemaphore_Acquire_shortestTTL(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	const short = "fencelock:{shortest}:permit:1"
	for i, ttl := range []time.Duration{10 * time.Minute, 2 * time.Second, 10 * time.Minute} {
		if err := admin.Set(ctx, fmt.Sprintf("fencelock:{shortest}:permit:%d", i), "another", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The short slot is deleted, silently, as its expiry would, just
	// before an attempt that comes within its last second: so the attempt
	// after the wait never meets it in its last millisecond (PTTL 0, read
	// as no TTL at all).
	rdb := s.Client(t)
	rdb.AddHook(&scriptGate{file: "lua/semaphore.lua", before: func(redis.Cmder) {
		if left := admin.PTTL(ctx, short).Val(); left < time.Second {
			admin.Del(ctx, short)
		}
	}})
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute})
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	l, err := c.Semaphore("shortest", 3).Acquire(wctx)
	if err != nil || l.Slot() != 1 {
		t.Fatalf("Acquire = %v, %v; want slot 1 once its 2s ran out (the others hold 10m, the retry interval is 1m)", l, err)
	}
	l.Release(ctx)
}
