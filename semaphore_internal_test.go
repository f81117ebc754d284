package fencelock

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// When the head of a semaphore's queue leaves holding a permit, the next
// waiter tries at once: another permit may be free with no message to
// say so (two permits freed, one message). The retry interval and the TTL
// are far longer than the test's bound.
func TestSemaphore_promotedTries(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &Options{TTL: time.Minute, RetryInterval: time.Minute}
	ctx := t.Context()
	holders := New(s.Client(t), opts).Semaphore("promoted", 2)
	for range 2 {
		if _, err := holders.TryAcquire(ctx); err != nil {
			t.Fatalf("TryAcquire error = %v", err)
		}
	}
	c := New(s.Client(t), opts)
	sem := c.Semaphore("promoted", 2)
	channel := sem.keys.channel
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The waiters hold their permits until both have one: a release
	// would wake the other.
	got := make(chan *Lease, 2)
	for range 2 {
		go func() {
			l, err := sem.Acquire(wctx)
			if err != nil {
				t.Errorf("waiting Acquire error = %v, want a permit", err)
			}
			got <- l
		}()
	}
	redistest.WaitFor(t, 5*time.Second, "both waiters queued and subscribed", func() bool {
		c.hub.mu.Lock()
		defer c.hub.mu.Unlock()
		wc := c.hub.chans[channel]
		if wc == nil || len(wc.queue) != 2 {
			return false
		}
		select {
		case <-wc.ready:
			return true
		default:
			return false
		}
	})
	admin := s.Client(t)
	if err := admin.Del(ctx, sem.keys.locks[0], sem.keys.locks[1]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Publish(ctx, channel, "").Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if l := <-got; l != nil {
			defer l.Release(ctx)
		}
	}
}

// A semaphore's waiters in one Client get their permits in the order they
// queued.
func TestSemaphore_fifo(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	opts := &Options{TTL: time.Minute, RetryInterval: time.Minute}
	ctx := t.Context()
	c := New(s.Client(t), opts)
	sem := c.Semaphore("fifo", 1)
	first, err := sem.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	const waiters = 4
	order := make(chan int, waiters)
	queued := func(n int) func() bool {
		return func() bool {
			c.hub.mu.Lock()
			defer c.hub.mu.Unlock()
			wc := c.hub.chans[sem.keys.channel]
			return wc != nil && len(wc.queue) == n
		}
	}
	for i := range waiters {
		go func() {
			l, err := sem.Acquire(wctx)
			if err != nil {
				t.Errorf("waiter %d: Acquire error = %v", i, err)
				order <- -1
				return
			}
			order <- i
			l.Release(ctx)
		}()
		redistest.WaitFor(t, 5*time.Second, "the waiter to queue", queued(i+1))
	}
	first.Release(ctx)
	for want := range waiters {
		if got := <-order; got != want {
			t.Fatalf("permit %d went to waiter %d, want %d (FIFO)", want, got, want)
		}
	}
}
