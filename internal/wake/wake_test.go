package wake

import (
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
)

// The hub hands a wake to the head, and on: a wake for the lock goes to
// the head waiter alone, and a head that leaves with a wake it did not
// use passes it to the next waiter at once, which would otherwise wait
// for its retry timer with the lock free.
func TestHub_handsWakeOn(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	cfg := node.DefaultConfig()
	h := New([]*node.Node{node.New(transport.GoRedis(rdb), cfg)})
	channel := cfg.Channel("handed-on")
	head := h.Join(ctx, channel, time.Second)
	next := h.Join(ctx, channel, time.Second)
	defer h.Leave(channel, next)
	pending := func(ch chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	h.WakeHead(channel)
	if len(head.Wake) != 1 || len(next.Wake) != 0 {
		t.Errorf("WakeHead: wakes pending %d at the head, %d at the second waiter; want 1, 0", len(head.Wake), len(next.Wake))
	}
	h.Leave(channel, head)
	if !pending(next.Wake) {
		t.Errorf("the head left with a wake pending: the next waiter has no wake, want it handed on")
	}
	if pending(next.Promoted) {
		t.Errorf("the next waiter was promoted (left to its timer), want the wake handed on")
	}
}
