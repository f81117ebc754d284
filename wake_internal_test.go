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
	// Each release wakes the next waiter at once: the retry interval is a
	// minute, so a waiter left to its timer would show.
	released := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release error = %v", err)
	}
	for want := range waiters {
		if i := <-got; i != want {
			t.Fatalf("waiter %d acquired next, want waiter %d (FIFO)", i, want)
		}
		if d := time.Since(released); d > 5*time.Second {
			t.Errorf("waiter %d acquired %v after the release, want < 5s (woken, RetryInterval 1m)", want, d)
		}
		released = time.Now()
		if err := (<-leases).Release(ctx); err != nil {
			t.Fatalf("Release error = %v", err)
		}
	}
	if n := c.queued("fifo"); n != 0 {
		t.Errorf("%d waiters still queued after all acquired, want 0", n)
	}
}

// The hub hands a wake to the head, and on: a wake for the lock goes to
// the head waiter alone, and a head that leaves with a wake it did not
// use passes it to the next waiter at once, which would otherwise wait
// for its retry timer with the lock free.
func TestWakeHub_handsWakeOn(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := New(rdb, nil)
	channel := c.cfg.channel("handed-on")
	head := c.hub.join(ctx, channel, time.Second)
	next := c.hub.join(ctx, channel, time.Second)
	defer c.hub.leave(channel, next)
	pending := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	c.hub.wakeHead(channel)
	if len(head.wake) != 1 || len(next.wake) != 0 {
		t.Errorf("wakeHead: wakes pending %d at the head, %d at the second waiter; want 1, 0", len(head.wake), len(next.wake))
	}
	c.hub.leave(channel, head)
	if !pending(next.wake) {
		t.Errorf("the head left with a wake pending: the next waiter has no wake, want it handed on")
	}
	if pending(next.promoted) {
		t.Errorf("the next waiter was promoted (left to its timer), want the wake handed on")
	}
}
