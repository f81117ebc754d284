package fencelock

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// queued returns how many of c's Acquire calls wait for name.
func (c *Client) queued(name string) int {
	c.hub.mu.Lock()
	defer c.hub.mu.Unlock()
	if wc := c.hub.chans[c.cfg.channel(name)]; wc != nil {
		return len(wc.queue)
	}
	return 0
}

// A Client's waiters get the lock in the order they started waiting, and
// a new Acquire queues behind them rather than barging in.
func TestClient_Acquire_fifo(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := New(rdb, &Options{RetryInterval: time.Minute})
	holder, err := c.TryAcquire(ctx, "fifo")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}

	const waiters = 4
	got := make(chan int, waiters)
	leases := make(chan *Lease, waiters)
	for i := range waiters {
		go func() {
			l, err := c.Acquire(ctx, "fifo")
			if err != nil {
				t.Errorf("waiter %d: Acquire error = %v", i, err)
				got <- -1
				return
			}
			got <- i
			leases <- l
		}()
		for c.queued("fifo") < i+1 { // wait until it is queued
			time.Sleep(time.Millisecond)
		}
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	for want := range waiters {
		if i := <-got; i != want {
			t.Fatalf("waiter %d acquired next, want waiter %d (FIFO)", i, want)
		}
		if err := (<-leases).Release(ctx); err != nil {
			t.Fatalf("Release error = %v", err)
		}
	}
	if n := c.queued("fifo"); n != 0 {
		t.Errorf("%d waiters still queued after all acquired, want 0", n)
	}
}
