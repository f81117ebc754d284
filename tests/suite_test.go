package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

// lifeCycle runs what every deployment and every way of connecting to it
// (TLS, an ACL user) must support, through Clients on connections of
// their own from dial: acquire, contention, background and explicit
// renewal, release, and a waiter in another Client woken by the release
// itself. With minReplicas > 0 it also acquires with Options.MinReplicas.
//
// The lock's TTL and the waiter's retry interval are far longer than the
// waiter's patience, so only the release's publish can wake it in time.
func lifeCycle(t *testing.T, dial func() redis.UniversalClient, base fencelock.Options, minReplicas int) {
	t.Helper()
	ctx := t.Context()
	opts := base
	opts.TTL, opts.RenewInterval, opts.RetryInterval = time.Minute, 50*time.Millisecond, time.Minute
	const name = "life-cycle"

	renewed := make(chan error, 100)
	holderOpts := opts
	holderOpts.Hooks = &fencelock.Hooks{RenewDone: func(_ context.Context, i fencelock.RenewDoneInfo) {
		select {
		case renewed <- i.Err:
		default:
		}
	}}
	holder := newClient(t, dial(), &holderOpts)
	l, err := holder.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	if l.Token() <= 0 {
		t.Fatalf("Token = %d, want > 0", l.Token())
	}
	for range 3 {
		select {
		case err := <-renewed:
			if err != nil {
				t.Fatalf("background renewal error = %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no background renewal within 10s")
		}
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew error = %v, want nil", err)
	}

	attempts := make(chan int, 10)
	waiterOpts := opts
	waiterOpts.Hooks = &fencelock.Hooks{AcquireAttempt: func(_ context.Context, i fencelock.AcquireAttemptInfo) {
		select {
		case attempts <- i.Attempt:
		default:
		}
	}}
	waiter := newClient(t, dial(), &waiterOpts)
	if _, err := waiter.TryAcquire(ctx, name); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: error = %v, want ErrNotAcquired", err)
	}
	<-attempts
	type result struct {
		l   *fencelock.Lease
		err error
	}
	got := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	go func() {
		l, err := waiter.Acquire(wctx, name)
		got <- result{l, err}
	}()
	// The second attempt comes after the subscription is confirmed.
	for n := 0; n < 2; {
		select {
		case n = <-attempts:
		case r := <-got:
			t.Fatalf("Acquire of a held lock returned %v, %v before its release", r.l, r.err)
		case <-time.After(10 * time.Second):
			t.Fatalf("the waiter made no second attempt within 10s")
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after the release in another Client: error = %v, want the release to wake it", r.err)
	}
	if r.l.Token() <= l.Token() {
		t.Errorf("waiter's token %d, want > the first holder's %d", r.l.Token(), l.Token())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Fatalf("Release of the waiter's lease: error = %v, want nil", err)
	}

	if minReplicas > 0 {
		ropts := base
		ropts.MinReplicas, ropts.ReplicaTimeout = minReplicas, 5*time.Second
		c := newClient(t, dial(), &ropts)
		l, err := c.TryAcquire(ctx, name)
		if err != nil {
			t.Fatalf("TryAcquire with MinReplicas %d: error = %v, want nil", minReplicas, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release error = %v, want nil", err)
		}
	}
}
