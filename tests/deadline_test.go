package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// deadlineSlack is how long after its context's deadline a call may
// return: the time to notice it and unwind, on a loaded machine. A call
// that waited for a cleanup of its own (before: up to a second) would not
// fit.
const deadlineSlack = 600 * time.Millisecond

// A call returns by its context's deadline when Redis is unresponsive
// (paused) or refuses connections, on one node or a quorum: the cleanup of
// an attempt that failed goes on in the background, not on the caller's
// time. The error wraps ErrNotAcquired (Acquire) and the deadline.
func TestDeadline_unresponsive(t *testing.T) {
	t.Parallel()
	paused := redistest.New(t)
	pausedQ := []*redistest.Server{redistest.New(t), redistest.New(t), redistest.New(t)}
	refused := redistest.RefusedAddr(t)
	dial := func(addr string) *redis.Client {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	clients := map[string]*fencelock.Client{
		"paused":  newClient(t, paused.Client(t), nil),
		"refused": newClient(t, dial(refused), nil),
		"quorum paused": newQuorum(t, []redis.UniversalClient{
			pausedQ[0].Client(t), pausedQ[1].Client(t), pausedQ[2].Client(t)}, nil),
	}
	paused.Pause(t)
	for _, s := range pausedQ {
		s.Pause(t)
	}
	const timeout = 200 * time.Millisecond
	for name, c := range clients {
		for call, f := range map[string]func(ctx context.Context) error{
			"TryAcquire": func(ctx context.Context) error { _, err := c.TryAcquire(ctx, "deadline"); return err },
			"Acquire":    func(ctx context.Context) error { _, err := c.Acquire(ctx, "deadline"); return err },
			"Holder":     func(ctx context.Context) error { _, err := c.Holder(ctx, "deadline"); return err },
		} {
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			start := time.Now()
			err := f(ctx)
			took := time.Since(start)
			cancel()
			if took > timeout+deadlineSlack {
				t.Errorf("%s: %s returned %v after its %v deadline, want within %v", name, call, took-timeout, timeout, deadlineSlack)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %s error = %v, want context.DeadlineExceeded", name, call, err)
			}
			if name == "refused" && !strings.Contains(fmt.Sprint(err), "no connection to Redis could be made") {
				t.Errorf("%s: %s error = %v, want it to say that no connection could be made", name, call, err)
			}
			if call == "Acquire" && !errors.Is(err, fencelock.ErrNotAcquired) {
				t.Errorf("%s: %s error = %v, want ErrNotAcquired", name, call, err)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %s error spans lines: %q", name, call, err)
			}
		}
	}
}

// Acquire with a context that never ends gives up once every attempt has
// failed for DownTimeout: the caller learns that Redis cannot be reached,
// with the real cause (a refused connection), on one line.
func TestAcquire_downTimeout(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.RefusedAddr(t), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, &fencelock.Options{DownTimeout: time.Second, RetryInterval: 100 * time.Millisecond})
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(context.Background(), "down")
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire(context.Background()) with Redis refusing connections still waiting after 30s, want an error after DownTimeout (1s)")
	}
	if !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Acquire error = %v, want ErrNotAcquired and the refused connection", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Acquire error spans lines: %q", err)
	}
}

// DownTimeout bounds a run of failures only: waiting for a held lock is
// bounded by the context alone, however long past DownTimeout.
func TestAcquire_downTimeoutNotContention(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := t.Context()
	holder, err := newClient(t, s.Client(t), &fencelock.Options{TTL: time.Minute}).TryAcquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(ctx)
	c := newClient(t, s.Client(t), &fencelock.Options{DownTimeout: 100 * time.Millisecond, RetryInterval: 100 * time.Millisecond})
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = c.Acquire(wctx, "held")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("Acquire of a held lock = %v, want ErrNotAcquired at the context's deadline", err)
	}
	if strings.Contains(err.Error(), "DownTimeout") {
		t.Errorf("Acquire of a held lock gave up for DownTimeout: %v", err)
	}
}
