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
