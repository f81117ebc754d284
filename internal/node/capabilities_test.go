package node

import (
	"sync"
	"testing"

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
