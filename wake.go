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
//
// A quorum Client listens on every node, since a release publishes on
// each node where it deleted and any node may be down. On a Cluster whose
// servers have sharded pub/sub (Redis >= 7.0), waiters SSUBSCRIBE on the
// shard that holds the lock, and releases SPUBLISH there, instead of
// broadcasting every release to every node. One sharded subscription
// carries one channel: go-redis resubscribes all of a subscription's
// channels in one command, which a Cluster refuses across slots.
type wakeHub struct {
	nodes []*node

	mu    sync.Mutex
	subs  map[wakeSubKey]*wakeSub
	chans map[string]*wakeChan
}

// wakeSubKey names a subscription: a node's shared one (channel "") or a
// sharded one for one channel.
type wakeSubKey struct {
	node    int
	channel string
}

// wakeSub is one subscription (connection) and its reader.
type wakeSub struct {
	ps       *redis.PubSub
	exited   chan struct{} // closed when the reader of ps has returned
	channels int           // how many subscribed lock channels it carries
}

// wakeChan is one subscribed lock channel.
type wakeChan struct {
	refs  int
	subs  []wakeSubKey  // the subscriptions that carry it
	ready chan struct{} // closed once a server confirmed the subscription
	wake  chan struct{} // closed at the next publish, then replaced
}

// join subscribes to channel (if no other waiter has) and returns its
// wakeChan once the server has confirmed the subscription, ctx is done, or
// patience runs out: a waiter that could not subscribe still has its
// fallback timer. The caller must leave.
func (h *wakeHub) join(ctx context.Context, channel string, patience time.Duration) *wakeChan {
	sharded := make([]bool, len(h.nodes))
	for i, n := range h.nodes {
		sharded[i] = n.shardedPubSub(ctx)
	}
	h.mu.Lock()
	wc := h.chans[channel]
	if wc == nil {
		wc = &wakeChan{ready: make(chan struct{}), wake: make(chan struct{})}
		if h.chans == nil {
			h.chans = map[string]*wakeChan{}
			h.subs = map[wakeSubKey]*wakeSub{}
		}
		h.chans[channel] = wc
		for i, n := range h.nodes {
			key := wakeSubKey{node: i}
			if sharded[i] {
				key.channel = channel
			}
			s := h.subs[key]
			// Errors below (connection trouble) leave ready open; go-redis
			// resubscribes on reconnect, and waiters fall back to their
			// timers. The subscription outlives this caller's ctx: other
			// waiters share it.
			switch {
			case sharded[i]:
				s = &wakeSub{ps: n.rdb.SSubscribe(context.WithoutCancel(ctx), channel)}
			case s == nil:
				s = &wakeSub{ps: n.rdb.Subscribe(context.WithoutCancel(ctx))}
			}
			if s.exited == nil {
				s.exited = make(chan struct{})
				go h.read(s.ps.ChannelWithSubscriptions(), s.exited)
				h.subs[key] = s
			}
			if !sharded[i] {
				s.ps.Subscribe(ctx, channel)
			}
			s.channels++
			wc.subs = append(wc.subs, key)
		}
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

// leave undoes join. The last waiter of a channel unsubscribes it, and a
// subscription that carries no channel any more is closed once its reader
// has returned.
func (h *wakeHub) leave(channel string) {
	h.mu.Lock()
	wc := h.chans[channel]
	wc.refs--
	if wc.refs > 0 {
		h.mu.Unlock()
		return
	}
	delete(h.chans, channel)
	var closing []*wakeSub
	for _, key := range wc.subs {
		s := h.subs[key]
		if s.channels--; s.channels > 0 {
			s.ps.Unsubscribe(context.Background(), channel)
			continue
		}
		delete(h.subs, key)
		closing = append(closing, s)
	}
	h.mu.Unlock()
	for _, s := range closing {
		s.ps.Close()
		<-s.exited
	}
}

// read dispatches the subscription's messages until it is closed.
func (h *wakeHub) read(msgs <-chan any, exited chan struct{}) {
	defer close(exited)
	for m := range msgs {
		h.mu.Lock()
		switch m := m.(type) {
		case *redis.Subscription:
			if wc := h.chans[m.Channel]; wc != nil && (m.Kind == "subscribe" || m.Kind == "ssubscribe") {
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
