package rueidisconn

import (
	"context"
	"sync"
	"time"

	"github.com/fencelock/fencelock/transport"
	"github.com/redis/rueidis"
)

// resubscribePause is how long a subscription whose connection was lost
// waits before it connects again.
const resubscribePause = 100 * time.Millisecond

func (t *conn) Subscribe(ctx context.Context, sharded bool, channels ...string) transport.Subscription {
	s := &sub{t: t, sharded: sharded, channels: map[string]bool{},
		events: make(chan transport.Event, 16), done: make(chan struct{})}
	for _, ch := range channels {
		s.channels[ch] = true
	}
	go s.run()
	return s
}

// sub is a subscription on a dedicated connection, established again
// whenever the connection is lost; each (re)subscription is confirmed by
// an Event.
type sub struct {
	t       *conn
	sharded bool

	mu       sync.Mutex
	channels map[string]bool
	d        rueidis.DedicatedClient // the connection now, nil between two

	events chan transport.Event
	done   chan struct{} // closed by Close
	close  sync.Once
	// emitting guards events against a hook's send after it is closed:
	// hooks run on rueidis's goroutine.
	emitting sync.RWMutex
	closed   bool
}

func (s *sub) run() {
	for {
		client := s.t.c
		if s.t.cluster && !s.sharded {
			// SUBSCRIBE reaches every node's subscribers from any node.
			for _, n := range client.Nodes() {
				client = n
				break
			}
		}
		d, cancel := client.Dedicate()
		lost := d.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage: func(m rueidis.PubSubMessage) { s.emit(transport.Event{Channel: m.Channel}) },
			OnSubscription: func(m rueidis.PubSubSubscription) {
				if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
					s.emit(transport.Event{Channel: m.Channel, Subscribed: true})
				}
			},
		})
		s.mu.Lock()
		s.d = d
		var chans []string
		for ch := range s.channels {
			chans = append(chans, ch)
		}
		s.mu.Unlock()
		s.send(d, true, chans)
		select {
		case <-lost:
		case <-s.done:
		}
		s.mu.Lock()
		s.d = nil
		s.mu.Unlock()
		d.SetPubSubHooks(rueidis.PubSubHooks{})
		d.Close() // a subscribed connection goes back to no pool
		cancel()
		select {
		case <-s.done:
			s.emitting.Lock()
			s.closed = true
			close(s.events)
			s.emitting.Unlock()
			return
		case <-time.After(resubscribePause):
		}
	}
}

// emit hands e to the reader, unless the subscription is closed.
func (s *sub) emit(e transport.Event) {
	s.emitting.RLock()
	defer s.emitting.RUnlock()
	if s.closed {
		return
	}
	select {
	case s.events <- e:
	case <-s.done:
	}
}

// send subscribes d to chans, or unsubscribes it.
func (s *sub) send(d rueidis.DedicatedClient, subscribe bool, chans []string) {
	if len(chans) == 0 {
		return
	}
	var cmd rueidis.Completed
	switch {
	case s.sharded && subscribe:
		cmd = d.B().Ssubscribe().Channel(chans...).Build()
	case s.sharded:
		cmd = d.B().Sunsubscribe().Channel(chans...).Build()
	case subscribe:
		cmd = d.B().Subscribe().Channel(chans...).Build()
	default:
		cmd = d.B().Unsubscribe().Channel(chans...).Build()
	}
	// Errors show as a lost connection, or as a confirmation that does
	// not come: the library's timers cover both.
	d.Do(context.Background(), cmd)
}

func (s *sub) Subscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	for _, ch := range channels {
		s.channels[ch] = true
	}
	d := s.d
	s.mu.Unlock()
	if d != nil {
		s.send(d, true, channels)
	}
	return nil
}

func (s *sub) Unsubscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	for _, ch := range channels {
		delete(s.channels, ch)
	}
	d := s.d
	s.mu.Unlock()
	if d != nil {
		s.send(d, false, channels)
	}
	return nil
}

func (s *sub) Events() <-chan transport.Event { return s.events }

func (s *sub) Close() error {
	s.close.Do(func() { close(s.done) })
	return nil
}
