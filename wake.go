package fencelock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeHub shares one Redis subscription among all of a Client's waiting
// Acquire calls: each lock's channel is subscribed while someone waits for
// it, and a release's publish wakes every waiter of that lock. The
// subscription (one connection and go-redis's reader goroutines) exists
// only while someone waits, so an idle Client holds nothing open.
type wakeHub struct {
	rdb redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub
	exited chan struct{} // closed when the reader of ps has returned
	chans  map[string]*wakeChan
}

// wakeChan is one subscribed lock channel.
type wakeChan struct {
	refs  int
	ready chan struct{} // closed once the server confirmed the subscription
	wake  chan struct{} // closed at the next publish, then replaced
}

// join subscribes to channel (if no other waiter has) and returns its
// wakeChan once the server has confirmed the subscription, ctx is done, or
// patience runs out: a waiter that could not subscribe still has its
// fallback timer. The caller must leave.
func (h *wakeHub) join(ctx context.Context, channel string, patience time.Duration) *wakeChan {
	h.mu.Lock()
	if h.ps == nil {
		// The subscription outlives this caller's ctx: other waiters share it.
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
		h.exited = make(chan struct{})
		go h.read(h.ps.ChannelWithSubscriptions(), h.exited)
	}
	wc := h.chans[channel]
	if wc == nil {
		wc = &wakeChan{ready: make(chan struct{}), wake: make(chan struct{})}
		if h.chans == nil {
			h.chans = map[string]*wakeChan{}
		}
		h.chans[channel] = wc
		// An error here (connection trouble) leaves ready open; go-redis
		// resubscribes on reconnect, and waiters fall back to their timers.
		h.ps.Subscribe(ctx, channel)
	}
	wc.refs++
	h.mu.Unlock()

	t := time.NewTimer(patience)
	defer t.Stop()
	select {
	case <-wc.ready:
	case <-ctx.Done():
	case <-t.C:
	}
	return wc
}

// next returns a channel closed by the next publish on wc. Take it before
// an acquisition attempt, so a release after the attempt is never missed.
func (h *wakeHub) next(wc *wakeChan) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return wc.wake
}

// leave undoes join. The last waiter of a channel unsubscribes it, and the
// last waiter of all closes the subscription and waits for its reader.
func (h *wakeHub) leave(channel string) {
	h.mu.Lock()
	wc := h.chans[channel]
	wc.refs--
	if wc.refs > 0 {
		h.mu.Unlock()
		return
	}
	delete(h.chans, channel)
	if len(h.chans) > 0 {
		h.ps.Unsubscribe(context.Background(), channel)
		h.mu.Unlock()
		return
	}
	ps, exited := h.ps, h.exited
	h.ps, h.exited = nil, nil
	h.mu.Unlock()
	ps.Close()
	<-exited
}

// read dispatches the subscription's messages until it is closed.
func (h *wakeHub) read(msgs <-chan any, exited chan struct{}) {
	defer close(exited)
	for m := range msgs {
		h.mu.Lock()
		switch m := m.(type) {
		case *redis.Subscription:
			if wc := h.chans[m.Channel]; wc != nil && m.Kind == "subscribe" {
				select {
				case <-wc.ready:
				default:
					close(wc.ready)
				}
			}
		case *redis.Message:
			if wc := h.chans[m.Channel]; wc != nil {
				close(wc.wake)
				wc.wake = make(chan struct{})
			}
		}
		h.mu.Unlock()
	}
}
