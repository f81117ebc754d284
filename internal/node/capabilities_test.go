package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/fencelock/fencelock/transport"
)

// Capabilities are a fact of each master: two nodes that answer COMMAND
// INFO differently (one has SPUBLISH renamed away, as an operator may)
// each keep their own answer, and a refusal on one leaves the other's.
func TestCapabilities_perNode(t *testing.T) {
	t.Parallel()
	var with, without *redistest.Server
	var wg sync.WaitGroup
	wg.Go(func() { with = redistest.New(t) })
	wg.Go(func() {
		without = redistest.Start(t, &redistest.Options{Config: []string{`rename-command SPUBLISH ""`}})
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ctx := t.Context()
	a, b := transport.GoRedis(with.Client(t)), transport.GoRedis(without.Client(t))
	var cs capabilities
	for round := range 2 { // detected, then from the cache
		if nat := cs.get(ctx, with.Addr(), a); !nat.spublish {
			t.Errorf("round %d: node with SPUBLISH: natives %+v, want spublish", round, nat)
		}
		if nat := cs.get(ctx, without.Addr(), b); nat.spublish {
			t.Errorf("round %d: node without SPUBLISH: natives %+v, want no spublish", round, nat)
		}
	}
	before := cs.get(ctx, with.Addr(), a)
	cs.refused(without.Addr())
	if nat := cs.get(ctx, with.Addr(), a); nat != before {
		t.Errorf("after a refusal on the other node: natives %+v, want %+v as before", nat, before)
	}
}

// A detection that no server answered (here its context had ended; a
// connection refused mid failover is the same) stands only briefly, and
// the next detection runs in the background: the callers meanwhile go on
// at once with what is known, and the natives are then known.
func TestCapabilities_unansweredDetection(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	c := transport.GoRedis(s.Client(t))
	var cs capabilities
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if nat := cs.get(ended, s.Addr(), c); nat.spublish {
		t.Fatalf("detection with an ended context: natives %+v, want none", nat)
	}
	redistest.WaitFor(t, 10*time.Second, "the natives detected after an unanswered detection", func() bool {
		return cs.get(t.Context(), s.Addr(), c).spublish
	})
}

// Once a detection has ended, the next ones run in the background: a
// master that does not answer holds up no caller, whose renewal or
// release has a deadline of its own to keep.
func TestCapabilities_redetectionHoldsUpNobody(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	c := transport.GoRedis(s.Client(t))
	var cs capabilities
	want := cs.get(t.Context(), s.Addr(), c)
	if !want.spublish {
		t.Fatalf("natives %+v, want spublish", want)
	}
	cs.mu.Lock()
	cs.m[s.Addr()].until = time.Now().Add(-time.Nanosecond) // as if a minute had passed
	cs.mu.Unlock()
	s.Pause(t)
	defer s.Resume(t)
	got := make(chan natives, 1)
	go func() { got <- cs.get(t.Context(), s.Addr(), c) }()
	select {
	case nat := <-got:
		if nat != want {
			t.Errorf("natives while detecting again = %+v, want %+v as known", nat, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("get waited for a detection from a paused master")
	}
}
