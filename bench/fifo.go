package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

// fifoLocker is a PROTOTYPE of a different wait strategy for fencelock's
// Acquire, built outside the library on its TryAcquire, to measure the
// idea before changing the core. Within one Client, waiters for a lock
// form a FIFO queue:
//
//   - a release's publish wakes only the head of the queue, not every
//     waiter (no thundering herd of failing attempts);
//   - a new Acquire that finds local waiters queues behind them instead of
//     trying at once, so a goroutine that just released cannot barge in
//     ahead of those that waited (the main cause of unfairness);
//   - only the head keeps the fallback timer (a lock that expires
//     publishes nothing);
//   - a release through the same Client wakes the local head as soon as
//     its reply arrives, without waiting for its own publish to come
//     back through the subscription.
//
// Across processes nothing changes: each process's head races the others'
// as before. It relies on fencelock's channel name for the default
// prefix, "fencelock:{name}:released".
type fifoLocker struct {
	c   *fencelock.Client
	rdb *redis.Client

	mu     sync.Mutex
	ps     *redis.PubSub
	queues map[string]*fifoQueue // by channel
}

type fifoQueue struct {
	waiters []*fifoWaiter
	ready   chan struct{} // closed when the subscription is confirmed
}

type fifoWaiter struct {
	wake chan struct{} // buffered 1: a publish seen while at the head
}

func newFifo(rdb *redis.Client) *fifoLocker {
	return &fifoLocker{c: fencelock.New(rdb, nil), rdb: rdb, queues: map[string]*fifoQueue{}}
}

const fifoFallback = 500 * time.Millisecond

func (f *fifoLocker) acquire(ctx context.Context, name string) (held, error) {
	channel := "fencelock:{" + name + "}:released"
	f.mu.Lock()
	if q := f.queues[channel]; q == nil || len(q.waiters) == 0 {
		f.mu.Unlock()
		if l, err := f.c.TryAcquire(ctx, name); !errors.Is(err, fencelock.ErrNotAcquired) {
			if err != nil {
				return nil, err
			}
			return fifoHeld{fenceHeld{l}, f, channel}, nil
		}
		f.mu.Lock()
	}
	w, q := f.enqueue(ctx, channel)
	f.mu.Unlock()
	defer f.dequeue(channel, w)
	select { // a release before the subscription is confirmed would be missed
	case <-q.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(fifoFallback):
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if f.isHead(channel, w) {
			select {
			case <-w.wake: // drop a wake from before this attempt
			default:
			}
			l, err := f.c.TryAcquire(ctx, name)
			if err == nil {
				return fifoHeld{fenceHeld{l}, f, channel}, nil
			}
			if !errors.Is(err, fencelock.ErrNotAcquired) {
				return nil, err
			}
			timer.Reset(fifoFallback/2 + time.Duration(time.Now().UnixNano()%int64(fifoFallback/2)))
		}
		select {
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// enqueue adds a waiter at the tail; f.mu is held.
func (f *fifoLocker) enqueue(ctx context.Context, channel string) (*fifoWaiter, *fifoQueue) {
	if f.ps == nil {
		f.ps = f.rdb.Subscribe(context.WithoutCancel(ctx))
		go f.read(f.ps.ChannelWithSubscriptions())
	}
	q := f.queues[channel]
	if q == nil {
		q = &fifoQueue{ready: make(chan struct{})}
		f.queues[channel] = q
		f.ps.Subscribe(ctx, channel)
	}
	w := &fifoWaiter{wake: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	return w, q
}

func (f *fifoLocker) isHead(channel string, w *fifoWaiter) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[channel]
	return len(q.waiters) > 0 && q.waiters[0] == w
}

// dequeue removes w; a wake it had not used passes to the new head, and
// the new head is woken anyway so it takes over the fallback timer.
func (f *fifoLocker) dequeue(channel string, w *fifoWaiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[channel]
	for i, x := range q.waiters {
		if x == w {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			if i == 0 && len(q.waiters) > 0 {
				select {
				case <-w.wake:
					q.waiters[0].wake <- struct{}{}
				default:
				}
			}
			break
		}
	}
	// The subscription is kept for the prototype's life: the harness
	// reuses a few lock names; a real version would unsubscribe.
}

type fifoHeld struct {
	fenceHeld
	f       *fifoLocker
	channel string
}

func (h fifoHeld) release(ctx context.Context) error {
	err := h.fenceHeld.release(ctx)
	if err == nil {
		h.f.wakeHead(h.channel)
	}
	return err
}

func (f *fifoLocker) wakeHead(channel string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queues[channel]; q != nil && len(q.waiters) > 0 {
		select {
		case q.waiters[0].wake <- struct{}{}:
		default:
		}
	}
}

func (f *fifoLocker) read(msgs <-chan any) {
	for m := range msgs {
		f.mu.Lock()
		switch m := m.(type) {
		case *redis.Subscription:
			if q := f.queues[m.Channel]; q != nil && m.Kind == "subscribe" {
				select {
				case <-q.ready:
				default:
					close(q.ready)
				}
			}
		case *redis.Message:
			f.mu.Unlock()
			f.wakeHead(m.Channel)
			continue
		}
		f.mu.Unlock()
	}
}

// close ends the subscription.
func (f *fifoLocker) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ps != nil {
		f.ps.Close()
		f.ps = nil
	}
}
