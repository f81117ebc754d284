package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Two leases never share a token, even when a node restarts without its
// data in the middle of an acquisition: a write-back is accepted only
// where the acquiring attempt holds the lock. This is the trail of the
// model's quorum-restart-wb-no-owner-check (model/README.md), nodes 0
// and 1 swapped, run against real servers, the steps ordered by hooks:
//
//  1. b takes node 2 (issues x+1); its requests to nodes 0 and 1 are held.
//  2. a takes nodes 0 (x+1) and 1 (x+2), node 2 refuses it; a chooses x+2
//     and writes it back to nodes 2 and 0, the one to node 0 held.
//  3. node 2 restarts empty; a's lock on node 0 expires (its holder
//     paused).
//  4. b takes node 0, whose counter is still x+1: it issues x+2, and b
//     chooses x+2 too. b writes it back to nodes 1 and 2.
//
// Without the owner check, node 2 accepts a's write-back in step 2 (b
// holds the lock there) and, empty after the restart, b's in step 4 (b's
// lock there is gone): a majority accepted x+2 for each, {1, 2} and
// {0, 2}. With it, node 2 accepts neither, and neither a nor b can have
// its token written back to a majority.
//
// The counters start an hour ahead of the clocks so that every token is
// stored + 1, whatever the proposals; the restarted node gets write-backs
// only, never an acquire, so its clock floor plays no part.
func TestQuorum_restartSharesNoToken(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	const name = "shared"
	const lockKey, tokenKey = "fencelock:{" + name + "}", "fencelock:{" + name + "}:token"
	servers, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	x := time.Now().Add(time.Hour).UnixMicro()
	for i, v := range []int64{x, x + 1, x} {
		if err := nodes[i].Set(ctx, tokenKey, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Loaded, so that each script is one EVALSHA and each hook sees it once.
	loadScripts := func(rdb redis.UniversalClient) {
		t.Helper()
		for _, f := range []string{"lua/acquire.lua", "lua/quorum_writeback.lua"} {
			if err := rdb.ScriptLoad(ctx, scriptSources()[f]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, rdb := range nodes {
		loadScripts(rdb)
	}
	// Held requests must outlast the steps between, which a loaded
	// machine stretches past the default NodeTimeout (500ms): the gates
	// decide when they end, not the clock.
	opts := &fencelock.Options{TTL: 30 * time.Second, RenewInterval: -1, NodeTimeout: 20 * time.Second}
	type result struct {
		l   *fencelock.Lease
		err error
	}
	results := func(c *fencelock.Client) chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := c.TryAcquire(ctx, name)
			ch <- result{l, err}
		}()
		return ch
	}
	await := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10s", what)
		}
	}

	// Step 1.
	bGate := []*gate{newGate(t), newGate(t), nil}
	bIssued := make([]chan int64, 3)
	bNodes := quorumClients(t, servers)
	for i, rdb := range bNodes {
		bIssued[i] = make(chan int64, 1)
		rdb.AddHook(&onScript{file: "lua/acquire.lua", gate: bGate[i], reply: bIssued[i]})
	}
	bDone := results(newQuorum(t, bNodes, opts))
	var issued int64
	select {
	case issued = <-bIssued[2]:
	case <-time.After(10 * time.Second):
		t.Fatal("b's acquire on node 2: no reply within 10s")
	}
	if issued != x+1 {
		t.Fatalf("b's acquire on node 2 = %d, want %d (x+1)", issued, x+1)
	}
	await(bGate[0].held, "b's acquire on node 0 held")
	await(bGate[1].held, "b's acquire on node 1 held")

	// Step 2.
	aGate := newGate(t)
	aWriteback := make(chan int64, 1)
	aNodes := quorumClients(t, servers)
	aNodes[0].AddHook(&onScript{file: "lua/quorum_writeback.lua", gate: aGate})
	aNodes[2].AddHook(&onScript{file: "lua/quorum_writeback.lua", reply: aWriteback})
	aDone := results(newQuorum(t, aNodes, opts))
	await(aGate.held, "a's write-back to node 0 held")
	select {
	case v := <-aWriteback:
		t.Logf("node 2 answered a's write-back with %d (1: accepted)", v)
	case r := <-aDone:
		t.Fatalf("a's TryAcquire = %v, %v before node 2 answered its write-back", r.l, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("a's write-back to node 2: no reply within 10s")
	}

	// Step 3.
	servers[2].Restart(t, false)
	loadScripts(nodes[2])
	redistest.WaitFor(t, 5*time.Second, "b's client reconnected to node 2", func() bool {
		return bNodes[2].Ping(ctx).Err() == nil
	})
	if n, err := nodes[0].Del(ctx, lockKey).Result(); err != nil || n != 1 {
		t.Fatalf("DEL a's lock on node 0 = %d, %v; want 1, nil", n, err)
	}

	// Step 4.
	bGate[0].open()
	select {
	case issued = <-bIssued[0]:
	case <-time.After(10 * time.Second):
		t.Fatal("b's acquire on node 0: no reply within 10s")
	}
	if issued != x+2 {
		t.Fatalf("b's acquire on node 0 = %d, want %d: the premise is that a and b choose the same token", issued, x+2)
	}
	bGate[1].open() // refused: a holds node 1
	var a, b result
	select {
	case b = <-bDone:
	case <-time.After(10 * time.Second):
		t.Fatal("b's TryAcquire not done within 10s")
	}
	aGate.open()
	select {
	case a = <-aDone:
	case <-time.After(10 * time.Second):
		t.Fatal("a's TryAcquire not done within 10s")
	}
	for _, r := range []result{a, b} {
		switch {
		case r.err == nil:
			defer r.l.Release(context.WithoutCancel(ctx))
		case !errors.Is(r.err, fencelock.ErrNotAcquired):
			t.Errorf("TryAcquire error = %v, want nil or ErrNotAcquired", r.err)
		}
	}
	if a.err == nil && b.err == nil && a.l.Token() == b.l.Token() {
		t.Fatalf("a and b both hold leases with token %d: a token accepted twice by the restarted node", a.l.Token())
	}
}

// gate holds the commands of a hook until it is opened, and tells held
// when the first one is held.
type gate struct {
	held   chan struct{}
	opened chan struct{}
	first  chan struct{} // a token: taken by the first command held
}

// newGate returns a shut gate, opened at the end of the test at the
// latest, so that nothing stays held.
func newGate(t *testing.T) *gate {
	g := &gate{held: make(chan struct{}), opened: make(chan struct{}), first: make(chan struct{}, 1)}
	g.first <- struct{}{}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() {
	select {
	case <-g.opened:
	default:
		close(g.opened)
	}
}

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.first:
		close(g.held)
	default:
	}
	select {
	case <-g.opened:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// onScript is a go-redis hook on one node's client for one of the
// library's scripts: it holds each of its commands at gate, if not nil,
// and sends the reply of the first on reply, if not nil.
type onScript struct {
	file  string
	gate  *gate
	reply chan int64
}

func (h *onScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *onScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *onScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !runsScript(cmd, h.file) {
			return next(ctx, cmd)
		}
		if h.gate != nil {
			if err := h.gate.wait(ctx); err != nil {
				return err
			}
		}
		err := next(ctx, cmd)
		if h.reply != nil {
			v, _ := cmd.(*redis.IntCmd).Result()
			select {
			case h.reply <- v:
			default:
			}
		}
		return err
	}
}
