package tests

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// quorumNodes starts n independent redis-servers and returns them with a
// go-redis client for each. The clients give up quickly on a node that is
// down or paused, and honour context deadlines.
func quorumNodes(tb testing.TB, n int) ([]*redistest.Server, []redis.UniversalClient) {
	tb.Helper()
	servers := make([]*redistest.Server, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { servers[i] = redistest.Start(tb, nil) })
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	return servers, quorumClients(tb, servers)
}

func quorumClients(tb testing.TB, servers []*redistest.Server) []redis.UniversalClient {
	tb.Helper()
	clients := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		rdb := redis.NewClient(&redis.Options{
			Addr:                  s.Addr(),
			DialTimeout:           250 * time.Millisecond,
			ReadTimeout:           time.Second,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		})
		tb.Cleanup(func() { rdb.Close() })
		clients[i] = rdb
	}
	return clients
}

func TestNewQuorum_invalid(t *testing.T) {
	t.Parallel()
	for _, nodes := range [][]redis.UniversalClient{nil, {nil}} {
		_, err := newQuorum(t, nodes, nil).TryAcquire(t.Context(), "x")
		if !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("NewQuorum(%d nodes).TryAcquire error = %v, want ErrInvalid", len(nodes), err)
		}
	}
}

// Tokens strictly increase while the majority that takes the lock
// changes, and when a node restarts without its data, even when the
// stored tokens are ahead of the clock floor: the majorities intersect.
func TestQuorum_tokensAcrossMajorities(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	for _, n := range []int{3, 5} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			servers, nodes := quorumNodes(t, n)
			c := newQuorum(t, nodes, &fencelock.Options{TTL: 2 * time.Second})
			const name = "majorities"
			// A counter an hour ahead of every clock: only the quorum,
			// not the clock floor, can carry it forward.
			ahead := time.Now().Add(time.Hour).UnixMicro()
			for _, rdb := range nodes {
				if err := rdb.Set(t.Context(), "fencelock:{"+name+"}:token", ahead, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			last := ahead
			// Release returns once a majority deleted the lock; the
			// request to the last node may still be on its way, and the
			// next step, with a node down, would find the lock held
			// there. Each step waits for every node's release to end.
			released := make([]*releaseCounter, n)
			for i, rdb := range nodes {
				released[i] = &releaseCounter{lockKey: "fencelock:{" + name + "}"}
				rdb.AddHook(released[i])
			}
			steps := int32(0)
			check := func(step string) {
				t.Helper()
				if got := acquireToken(t, c, name); got <= last {
					t.Fatalf("%s: token = %d, want > %d (the previous one)", step, got, last)
				} else {
					last = got
				}
				steps++
				redistest.WaitFor(t, 5*time.Second, step+": the release ended on every node", func() bool {
					for _, r := range released {
						if r.n.Load() < steps {
							return false
						}
					}
					return true
				})
			}
			check("all nodes up")
			// Each node in turn is down; a minority (n/2 nodes) is. A node
			// that comes back keeps its data: the servers run without
			// persistence, so it is saved first. (Stopped without it, two
			// nodes of three end up without the counter by the restart
			// below, more than a quorum can carry.)
			for i := range servers {
				for j := range n / 2 {
					s := servers[(i+j)%n]
					if err := s.Client(t).Save(t.Context()).Err(); err != nil {
						t.Fatalf("SAVE before stopping %s: %v", s.Addr(), err)
					}
					s.Stop(t)
				}
				check(fmt.Sprintf("nodes %d..%d down", i, i+n/2-1))
				for j := range n / 2 {
					servers[(i+j)%n].Start(t)
				}
			}
			// A minority of nodes loses its data: the counter is gone there.
			// Which nodes hold the last token is up to the round (the
			// write-back stops at a majority), and the guarantee is that
			// the majority that keeps it carries it; the counter an hour
			// ahead defeats the clock floor, which would otherwise cover
			// an acceptor that lost it too. So the nodes that lose their
			// data, and later stop, are those with the lowest counters.
			// (Chosen by position, a majority of the nodes that answer
			// first could be short of the last token and issue it again.)
			lowest := func(k int, among []int) []int {
				t.Helper()
				counter := func(i int) int64 {
					v, err := nodes[i].Get(t.Context(), "fencelock:{"+name+"}:token").Int64()
					if err != nil {
						t.Fatalf("GET the counter on node %d: %v", i, err)
					}
					return v
				}
				slices.SortStableFunc(among, func(a, b int) int { return cmp.Compare(counter(a), counter(b)) })
				return among[:k]
			}
			all := make([]int, n)
			for i := range all {
				all[i] = i
			}
			wiped := lowest(n/2, all)
			for _, i := range wiped {
				servers[i].Restart(t, false)
			}
			check("restarted without data")
			var kept []int
			for i := range all {
				if !slices.Contains(wiped, i) {
					kept = append(kept, i)
				}
			}
			for _, i := range lowest(n/2, kept) {
				servers[i].Stop(t)
			}
			check("the rest of the majority down")
		})
	}
}

// releaseCounter is a go-redis hook on one node's client that counts the
// releases of lockKey that ended, whether the server deleted it or not
// and whether the node answered or not, whichever way they were sent (the
// Lua script, or DELEX / DELIFEQ in a pipeline); a NOSCRIPT reply, which
// the library follows with EVAL, does not end one.
type releaseCounter struct {
	lockKey string
	n       atomic.Int32
}

func (h *releaseCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *releaseCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd, err)
		return err
	}
}

func (h *releaseCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd, cmd.Err())
		}
		return err
	}
}

func (h *releaseCounter) count(cmd redis.Cmder, err error) {
	args := cmd.Args()
	switch {
	case len(args) < 2 || redis.HasErrorPrefix(err, "NOSCRIPT") || errors.Is(err, redis.ErrNoScript):
	case runsScript(cmd, "lua/release.lua") && len(args) > 3 && args[3] == h.lockKey,
		(cmd.Name() == "delex" || cmd.Name() == "delifeq") && args[1] == h.lockKey:
		h.n.Add(1)
	}
}

// A node accepts a given token at most once in the write-back round, so
// two acquisitions that chose the same token never both get a majority to
// accept it. They can choose the same one when a node restarts without
// its data between them: acquisition a takes nodes 0 and 1 (2 is held by
// someone else) and chooses the greater of their tokens, node 1's; node 0
// restarts and 2 is freed, and b takes nodes 0 and 2, whose counters, one
// lost and one as node 1's was, give b the same token, which b writes
// back first. a's write-back, held until then, must find every node at
// that token already (and, since write-backs are owner-checked, a's lock
// gone on node 0 and never taken on node 2).
func TestQuorum_tokenAcceptedOnce(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	const name = "once"
	lockKey, tokenKey := "fencelock:{"+name+"}", "fencelock:{"+name+"}:token"
	servers, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	ahead := time.Now().Add(time.Hour).UnixMicro() // only the counters decide
	// Node 0's counter one behind the others': a's nodes 0 and 1 issue
	// different tokens, so a must write the greater back; b's nodes 0
	// (restarted) and 2 give b that same token.
	for i, rdb := range nodes {
		if err := rdb.Set(ctx, tokenKey, ahead+min(int64(i), 1), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[2].Set(ctx, lockKey, "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// The held write-backs must outlast the restart between, which a
	// loaded machine stretches past the default NodeTimeout (500ms): the
	// gate decides when they end, not the clock.
	opts := &fencelock.Options{TTL: 30 * time.Second, RenewInterval: -1, NodeTimeout: 20 * time.Second}
	hold := &holdWriteBack{tokenKey: tokenKey, held: make(chan struct{}, 3), gate: make(chan struct{})}
	aNodes := quorumClients(t, servers)
	for _, rdb := range aNodes {
		rdb.AddHook(hold)
	}
	type result struct {
		l   *fencelock.Lease
		err error
	}
	aDone := make(chan result, 1)
	go func() {
		l, err := newQuorum(t, aNodes, opts).TryAcquire(ctx, name)
		aDone <- result{l, err}
	}()
	select {
	case <-hold.held:
	case r := <-aDone:
		t.Fatalf("first TryAcquire = %v, %v before its write-back; want it held at the write-back", r.l, r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("first acquisition not at its write-back within 10s")
	}

	servers[0].Restart(t, false)
	if err := nodes[2].Del(ctx, lockKey).Err(); err != nil {
		t.Fatal(err)
	}
	b, err := newQuorum(t, nodes, opts).TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("second TryAcquire error = %v, want nil (nodes 0 and 2)", err)
	}
	defer b.Release(ctx)
	if want := ahead + 2; b.Token() != want {
		t.Fatalf("second token = %d, want %d: the premise is that both acquisitions choose the same token", b.Token(), want)
	}

	close(hold.gate)
	var a result
	select {
	case a = <-aDone:
	case <-time.After(10 * time.Second):
		t.Fatal("first TryAcquire not done within 10s of its write-back's release")
	}
	if a.err == nil {
		defer a.l.Release(ctx)
		t.Fatalf("first TryAcquire succeeded with token %d, the second's %d: a token accepted twice", a.l.Token(), b.Token())
	}
	if !errors.Is(a.err, fencelock.ErrNotAcquired) {
		t.Errorf("first TryAcquire error = %v, want ErrNotAcquired", a.err)
	}
}

// holdWriteBack is a go-redis hook that holds quorum write-backs of
// tokenKey until gate is closed, telling held of each.
type holdWriteBack struct {
	tokenKey string
	held     chan struct{}
	gate     chan struct{}
}

func (h *holdWriteBack) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdWriteBack) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// A write-back is the only script whose first key is the counter.
		if args := cmd.Args(); (cmd.Name() == "evalsha" || cmd.Name() == "eval") && len(args) > 3 && args[3] == h.tokenKey {
			select {
			case h.held <- struct{}{}:
			default:
			}
			select {
			case <-h.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

func (h *holdWriteBack) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Two clients racing for one lock never both hold it while the nodes are
// healthy, and never share a token.
func TestQuorum_race(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	opts := &fencelock.Options{TTL: 5 * time.Second, RenewInterval: -1}
	clients := []*fencelock.Client{newQuorum(t, nodes, opts), newQuorum(t, nodes, opts)}
	const rounds = 100
	var last int64
	wins := 0
	for round := range rounds {
		var leases [2]*fencelock.Lease
		var errs [2]error
		var wg sync.WaitGroup
		for i, c := range clients {
			wg.Go(func() { leases[i], errs[i] = c.TryAcquire(t.Context(), "race") })
		}
		wg.Wait()
		var held []*fencelock.Lease
		for i, err := range errs {
			switch {
			case err == nil:
				held = append(held, leases[i])
			case !errors.Is(err, fencelock.ErrNotAcquired):
				t.Fatalf("round %d: client %d: TryAcquire error = %v, want nil or ErrNotAcquired", round, i, err)
			}
		}
		if len(held) > 1 {
			t.Fatalf("round %d: both clients hold the lock, tokens %d and %d", round, held[0].Token(), held[1].Token())
		}
		for _, l := range held {
			wins++
			if l.Token() <= last {
				t.Fatalf("round %d: token = %d, want > %d", round, l.Token(), last)
			}
			last = l.Token()
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("round %d: Release error = %v", round, err)
			}
		}
	}
	// Both may lose a round (each took one node); most rounds have a winner.
	if wins < rounds/4 {
		t.Errorf("%d of %d rounds had a winner, want at least %d", wins, rounds, rounds/4)
	}
}

// With a minority of nodes down, acquire, renew, wake-up and release all
// work.
func TestQuorum_minorityDown(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 5)
	servers[0].Kill(t)
	servers[3].Pause(t)
	t.Cleanup(func() { servers[3].Resume(t) })
	// A long retry interval and a TTL longer than the wait: only the
	// release's publish can wake the waiter in time. With exactly a
	// majority alive, a waiter's attempt that races the release can wait
	// for the paused node's read timeout (3 s), and the lease it gets may
	// have spent ~2 s of its validity: a TTL of 3 s left it too little
	// under load for the release at the end.
	c := newQuorum(t, nodes, &fencelock.Options{TTL: 30 * time.Second, RenewInterval: -1, RetryInterval: time.Minute})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "minority")
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew error = %v, want nil", err)
	}
	type result struct {
		l   *fencelock.Lease
		err error
	}
	got := make(chan result, 1)
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	go func() {
		l, err := c.Acquire(waitCtx, "minority")
		got <- result{l, err}
	}()
	// Release at once: the waiter's first attempt either finds the lock
	// free, or fails and is woken by the publish on a live node.
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiting Acquire error = %v, want nil (woken by the release)", r.err)
	}
	t.Logf("waiter acquired after %v, %v of its lease left", time.Since(start), time.Until(r.l.Deadline()))
	if r.l.Token() <= l.Token() {
		t.Errorf("waiter's token = %d, want > %d", r.l.Token(), l.Token())
	}
	if err := r.l.Release(ctx); err != nil {
		t.Errorf("Release error = %v, want nil", err)
	}
}

// A waiter is woken by the release's publish, not by its retry timer.
func TestQuorum_wake(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	c := newQuorum(t, nodes, &fencelock.Options{TTL: 20 * time.Second, RetryInterval: time.Minute})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "wake")
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		w, err := c.Acquire(waitCtx, "wake")
		if err == nil {
			err = w.Release(context.WithoutCancel(waitCtx))
		}
		got <- err
	}()
	// Release once the waiter listens on every node (PUBSUB NUMSUB).
	redistest.WaitFor(t, 5*time.Second, "the waiter to subscribe on every node", func() bool {
		for _, rdb := range nodes {
			n, err := rdb.PubSubNumSub(ctx, "fencelock:{wake}:released").Result()
			if err != nil || n["fencelock:{wake}:released"] != 1 {
				return false
			}
		}
		return true
	})
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire error = %v, want nil (the release must wake it)", err)
	}
}

// With a majority of nodes down or paused, acquisition fails with
// ErrNoQuorum and takes nothing.
func TestQuorum_majorityDown(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	c := newQuorum(t, nodes, &fencelock.Options{TTL: time.Second})
	servers[0].Kill(t)
	servers[1].Pause(t)
	t.Cleanup(func() { servers[1].Resume(t) })
	l, err := c.TryAcquire(t.Context(), "majority")
	if !errors.Is(err, fencelock.ErrNoQuorum) || l != nil {
		t.Fatalf("TryAcquire = %v, %v; want nil, error wrapping ErrNoQuorum", l, err)
	}
	// Released in the background: the paused node must not hold it up.
	redistest.WaitFor(t, 5*time.Second, "the lock key released on the live node", func() bool {
		n, err := nodes[2].Exists(t.Context(), "fencelock:{majority}").Result()
		return err == nil && n == 0
	})
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, "majority"); !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire error = %v, want ErrNotAcquired and DeadlineExceeded", err)
	}
}

// A lease whose lock a majority lost is reported lost.
func TestQuorum_leaseLost(t *testing.T) {
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	c := newQuorum(t, nodes, &fencelock.Options{TTL: 10 * time.Second, RenewInterval: -1})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "lost")
	if err != nil {
		t.Fatalf("TryAcquire error = %v, want nil", err)
	}
	// TryAcquire returns once a majority decided; the third node's request
	// may still be on its way, and would re-create a lock deleted before it.
	redistest.WaitFor(t, 5*time.Second, "the lock on every node", func() bool {
		for _, rdb := range nodes {
			if rdb.Exists(ctx, "fencelock:{lost}").Val() != 1 {
				return false
			}
		}
		return true
	})
	if err := nodes[0].Del(ctx, "fencelock:{lost}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew with one node lost error = %v, want nil (a majority holds it)", err)
	}
	if err := nodes[1].Del(ctx, "fencelock:{lost}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew with two nodes lost error = %v, want ErrLeaseLost", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("lease context cause = %v, want ErrLeaseLost", cause)
	}
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Release error = %v, want ErrLeaseLost", err)
	}
}

// slowWriteback is a go-redis hook that delays the reply of the quorum
// token write-back, as a slow network would, and counts the releases of
// the lock "slow", whichever way the server runs them (the Lua script, or
// DELEX / DELIFEQ in a pipeline).
type slowWriteback struct {
	delay    time.Duration
	released atomic.Int32
}

func (h *slowWriteback) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowWriteback) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.count(cmd, cmd.Err())
		}
		return err
	}
}

func (h *slowWriteback) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if runsScript(cmd, "lua/quorum_writeback.lua") {
			time.Sleep(h.delay) // the simulated slow reply, not a synchronisation
		}
		h.count(cmd, err)
		return err
	}
}

func (h *slowWriteback) count(cmd redis.Cmder, err error) {
	args := cmd.Args()
	switch {
	case err != nil || len(args) < 2:
	case runsScript(cmd, "lua/release.lua") && len(args) > 3 && args[3] == "fencelock:{slow}",
		(cmd.Name() == "delex" || cmd.Name() == "delifeq") && args[1] == "fencelock:{slow}":
		h.released.Add(1)
	}
}

// An acquisition that outlasts its validity (TTL less drift) fails and
// releases every node.
func TestQuorum_validitySpent(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	// The releases get most of the TTL as their NodeTimeout: on a loaded
	// machine a request can take tens of milliseconds, and one that timed
	// out would leave its node's lock to expire.
	const ttl = time.Second
	c := newQuorum(t, nodes, &fencelock.Options{TTL: ttl, RenewInterval: -1, NodeTimeout: 900 * time.Millisecond})
	// Counters that differ on every node: no two nodes issue the same
	// token, so the greatest must be accepted in a write-back round.
	for _, name := range []string{"warm-up", "slow"} {
		for i, rdb := range nodes {
			if err := rdb.Set(t.Context(), "fencelock:{"+name+"}:token", time.Now().Add(time.Duration(i+1)*time.Hour).UnixMicro(), 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	acquireToken(t, c, "warm-up") // loads the scripts: the replies, not NOSCRIPT, are slow
	hook := &slowWriteback{delay: ttl}
	for _, rdb := range nodes {
		rdb.AddHook(hook)
	}
	l, err := c.TryAcquire(t.Context(), "slow")
	if !errors.Is(err, fencelock.ErrNotAcquired) || l != nil {
		t.Fatalf("TryAcquire = %v, %v; want nil, error wrapping ErrNotAcquired", l, err)
	}
	redistest.WaitFor(t, 5*time.Second, "a release on every node", func() bool { return hook.released.Load() == 3 })
}

// BenchmarkQuorumAcquireRelease: as BenchmarkAcquireRelease, on a quorum
// of three nodes (two rounds to all nodes in parallel to acquire, one to
// release).
func BenchmarkQuorumAcquireRelease(b *testing.B) {
	_, nodes := quorumNodes(b, 3)
	benchAcquireRelease(b, newQuorum(b, nodes, nil))
}

// Nodes whose clocks agree with the client's issue the token it proposes:
// the acquisition then needs no write-back round, and every node's
// counter holds the lease's token. A node whose counter is ahead issues a
// greater token, which the others then accept in a write-back round.
func TestQuorum_proposal(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	ctx := t.Context()
	c := newQuorum(t, nodes, &fencelock.Options{RenewInterval: -1})
	counters := func(name string) []int64 {
		t.Helper()
		var vs []int64
		for _, rdb := range nodes {
			// A node whose request is still on its way (TryAcquire
			// returns once a majority answered) has no counter yet: 0.
			v, err := rdb.Get(ctx, "fencelock:{"+name+"}:token").Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		return vs
	}
	countWritebacks := &writebackCounter{}
	for _, rdb := range nodes {
		// Loaded, so that each write-back is one EVALSHA.
		if err := rdb.ScriptLoad(ctx, scriptSources()["lua/quorum_writeback.lua"]).Err(); err != nil {
			t.Fatal(err)
		}
		rdb.AddHook(countWritebacks)
	}
	before := time.Now().UnixMicro()
	l, err := c.TryAcquire(ctx, "proposed")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	// A node that got the request more than 50ms late issued its own
	// clock instead (the machine may be loaded): then a write-back may have
	// been needed. Every node issued the proposal if all counters agree.
	redistest.WaitFor(t, 5*time.Second, "a majority of counters at the token", func() bool {
		at := 0
		for _, v := range counters("proposed") {
			if v == l.Token() {
				at++
			}
		}
		return at >= 2
	})
	first := l.Token()
	if vs := counters("proposed"); vs[0] == vs[1] && vs[1] == vs[2] {
		// None, not even to a node whose reply came after a majority had
		// decided: its reply says it issued the token. Such a node's
		// write-back would go in the background: counted at the end.
		defer func() {
			if n := countWritebacks.count(first); n != 0 {
				t.Errorf("write-backs of the first token sent = %d, want none: every node issued the proposal", n)
			}
		}()
	} else {
		t.Logf("counters %v: not every node issued the proposal, the fast path was not taken", vs)
	}
	if lead := l.Token() - before; lead < 0 || lead > (250*time.Millisecond).Microseconds() {
		t.Errorf("token = clock + %dµs, want at most 250ms ahead of the clock", lead)
	}
	l.Release(ctx)

	// Two counters ahead, by an hour and by two: no two nodes issue the
	// same token, and the greatest issued must be written back.
	ahead := time.Now().Add(time.Hour).UnixMicro()
	for i, v := range []int64{ahead, ahead + time.Hour.Microseconds()} {
		if err := nodes[i+1].Set(ctx, "fencelock:{proposed}:token", v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err = c.TryAcquire(ctx, "proposed")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer l.Release(ctx)
	if l.Token() <= ahead {
		t.Errorf("token = %d, want > %d, the greatest issued by a majority", l.Token(), ahead)
	}
	// A majority decides; the last write-back may still be in flight.
	redistest.WaitFor(t, 5*time.Second, "a majority of counters at the token", func() bool {
		at := 0
		for _, v := range counters("proposed") {
			if v == l.Token() {
				at++
			}
		}
		return at >= 2
	})
	if n := countWritebacks.count(l.Token()); n < 1 || n > 2 {
		t.Errorf("write-backs sent = %d, want 1 or 2: to the nodes that issued less", n)
	}
}

// writebackCounter is a go-redis hook that counts the quorum write-back
// scripts sent, by token.
type writebackCounter struct {
	mu     sync.Mutex
	tokens map[int64]int
}

// count returns how many write-backs of token were sent.
func (h *writebackCounter) count(token int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tokens[token]
}

func (h *writebackCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *writebackCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if runsScript(cmd, "lua/quorum_writeback.lua") {
			// EVALSHA sha 2 counter lock token ...: the token is an int64.
			token, _ := cmd.Args()[5].(int64)
			h.mu.Lock()
			if h.tokens == nil {
				h.tokens = map[int64]int{}
			}
			h.tokens[token]++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *writebackCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A failed quorum acquisition releases every node, and a node's release
// waits for the acquisition's request to that node to end: sent on
// another connection, it could otherwise overtake a slow acquire request,
// which would then leave the lock behind for a TTL.
func TestQuorum_releaseAfterSlowAcquire(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	// TryAcquire returns once a majority has answered the release, which
	// may be before the release to node 2 is sent: a release that does
	// not wait then races the held request, and overtakes it about half
	// the time. Eight rounds leave such a release 1 chance in 256.
	for i := range 8 {
		releaseAfterSlowAcquire(t, servers, nodes, fmt.Sprintf("slow-node-%d", i))
	}
}

func releaseAfterSlowAcquire(t *testing.T, servers []*redistest.Server, nodes []redis.UniversalClient, name string) {
	t.Helper()
	ctx := t.Context()
	lockKey := "fencelock:{" + name + "}"
	for _, rdb := range nodes[:2] {
		if err := rdb.Set(ctx, lockKey, "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Loaded, so that the held request is the one EVALSHA that runs.
	if err := nodes[2].ScriptLoad(ctx, scriptSources()["lua/acquire.lua"]).Err(); err != nil {
		t.Fatal(err)
	}
	clients := quorumClients(t, servers)
	hold := &holdAcquire{held: make(chan struct{}, 1), ran: make(chan struct{}, 1), gate: make(chan struct{})}
	clients[2].AddHook(hold)
	opened := false
	defer func() {
		if !opened {
			close(hold.gate)
		}
	}()
	c := newQuorum(t, clients, &fencelock.Options{TTL: time.Minute, RenewInterval: -1})
	l, err := c.TryAcquire(ctx, name)
	if !errors.Is(err, fencelock.ErrNotAcquired) || l != nil {
		t.Fatalf("TryAcquire with the lock held on a majority = %v, %v; want nil, ErrNotAcquired", l, err)
	}
	select {
	case <-hold.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the acquire request to node 2 was not held")
	}
	close(hold.gate)
	opened = true
	select {
	case <-hold.ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the acquire request to node 2 did not run within 5s of its release")
	}
	redistest.WaitFor(t, 5*time.Second, "node 2's lock released after its slow acquisition", func() bool {
		n, err := nodes[2].Exists(ctx, lockKey).Result()
		return err == nil && n == 0
	})
	for i, rdb := range nodes[:2] {
		if v, err := rdb.Get(ctx, lockKey).Result(); err != nil || v != "someone-else" {
			t.Errorf("node %d: lock = %q, %v; want the other holder's, untouched", i, v, err)
		}
	}
}

// The token reaches a node whose acquire request is slow too, after its
// lock: a write-back is accepted only where the attempt holds the lock,
// so one sent at once, on another connection, would reach the node first,
// be refused, and leave the node's counter behind the token.
func TestQuorum_writebackFollowsSlowAcquire(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	ahead := time.Now().Add(time.Hour).UnixMicro()
	for _, tc := range []struct {
		name     string
		counters [2]int64 // of nodes 1 and 2
	}{
		{"fast path", [2]int64{ahead, ahead}},                                   // both issue the token: node 0 gets it in the background
		{"write-back round", [2]int64{ahead, ahead + time.Hour.Microseconds()}}, // node 2 issues it: node 1 and node 0 get it in a round
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			servers, nodes := quorumNodes(t, 3)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const name, tokenKey = "slow", "fencelock:{slow}:token"
			for i, v := range tc.counters {
				if err := nodes[i+1].Set(ctx, tokenKey, v, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			c, hold, written, open := slowNode0(ctx, t, servers, nodes[0])
			defer open()
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire with node 0's acquire request held error = %v", err)
			}
			defer l.Release(ctx)
			select {
			case <-hold.held:
			case <-ctx.Done():
				t.Fatal("the acquire request to node 0 was not held")
			}
			// Held until node 0 answers a write-back, or for a second: one
			// sent at once would be answered first.
			select {
			case <-written.done:
				t.Fatalf("node 0 answered a write-back while its acquire request was held")
			case <-time.After(time.Second):
			}
			open()
			for what, c := range map[string]chan struct{}{"its acquire request ran": hold.ran, "its write-back was answered": written.done} {
				select {
				case <-c:
				case <-ctx.Done():
					t.Fatalf("node 0: %s never: %v", what, ctx.Err())
				}
			}
			if got, err := nodes[0].Get(ctx, tokenKey).Int64(); err != nil || got != l.Token() {
				t.Errorf("node 0's counter after its slow acquisition = %d, %v; want the token %d", got, err, l.Token())
			}
		})
	}
}

// A node whose acquire reply comes after the round was decided, and
// which issued the lease's token itself, gets no write-back of it: in
// the background (fast path) nor in the write-back round. Node 0's
// acquire request is held until the acquisition has returned; its
// counter is the one that makes it issue the token.
func TestQuorum_noWritebackToLateIssuer(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	ahead := time.Now().Add(time.Hour).UnixMicro()
	for _, tc := range []struct {
		name     string
		counters [3]int64
	}{
		{"fast path", [3]int64{ahead, ahead, ahead}},
		{"write-back round", [3]int64{ahead + time.Hour.Microseconds(), ahead, ahead + time.Hour.Microseconds()}}, // node 1 issues less
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			servers, nodes := quorumNodes(t, 3)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			const name, tokenKey = "late", "fencelock:{late}:token"
			for i, v := range tc.counters {
				if err := nodes[i].Set(ctx, tokenKey, v, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			c, hold, written, open := slowNode0(ctx, t, servers, nodes[0])
			defer open()
			l, err := c.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire with node 0's acquire request held error = %v", err)
			}
			defer l.Release(ctx)
			open()
			select {
			case <-hold.ran:
			case <-ctx.Done():
				t.Fatal("node 0's acquire request never ran")
			}
			if got, err := nodes[0].Get(ctx, tokenKey).Int64(); err != nil || got != l.Token() {
				t.Fatalf("node 0's counter = %d, %v; want the token %d, issued by node 0 itself", got, err, l.Token())
			}
			// A write-back waits for node 0's acquire request, which has just
			// ended: one would be answered at once, well within a second.
			select {
			case <-written.done:
				t.Errorf("node 0 was sent a write-back of token %d, which it had issued", l.Token())
			case <-time.After(time.Second):
			}
		})
	}
}

// slowNode0 returns a quorum Client of servers whose acquire requests to
// node 0 (node0, the test's own client of it) are held by hold until open
// is called, and whose write-backs to node 0 written sees. The acquire
// script is loaded on node 0 first, so that the held request is the one
// EVALSHA that runs. open may be called more than once.
func slowNode0(ctx context.Context, t *testing.T, servers []*redistest.Server, node0 redis.UniversalClient) (c *fencelock.Client, hold *holdAcquire, written *answeredScript, open func()) {
	t.Helper()
	if err := node0.ScriptLoad(ctx, scriptSources()["lua/acquire.lua"]).Err(); err != nil {
		t.Fatal(err)
	}
	clients := quorumClients(t, servers)
	hold = &holdAcquire{held: make(chan struct{}, 1), ran: make(chan struct{}, 1), gate: make(chan struct{})}
	written = newAnsweredScript("lua/quorum_writeback.lua", "")
	written.on.Store(true)
	clients[0].AddHook(hold)
	clients[0].AddHook(written)
	c = newQuorum(t, clients, &fencelock.Options{TTL: 10 * time.Second, NodeTimeout: 5 * time.Second, RenewInterval: -1})
	return c, hold, written, sync.OnceFunc(func() { close(hold.gate) })
}

// holdAcquire is a go-redis hook that holds the acquire script before it
// is sent until gate is closed, telling held when it holds it and ran
// once it has run.
type holdAcquire struct {
	held, ran chan struct{}
	gate      chan struct{}
}

func (h *holdAcquire) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdAcquire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !runsScript(cmd, "lua/acquire.lua") {
			return next(ctx, cmd)
		}
		select {
		case h.held <- struct{}{}:
		default:
		}
		select {
		case <-h.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := next(ctx, cmd)
		select {
		case h.ran <- struct{}{}:
		default:
		}
		return err
	}
}

func (h *holdAcquire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A node whose acquire request is still on its way when TryAcquire returns
// (a majority already answered) is not counted against the lease: the
// renewal, and the watch, wait for that request to end. Here node 0's
// acquire is held in a hook and node 1 loses the lock; the lease still
// holds on nodes 0 and 2.
func TestQuorum_slowAcquireNode(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, _ := quorumNodes(t, 3)
	ctx := t.Context()
	const name = "slow-node"
	lockKey := "fencelock:{" + name + "}"
	clients := quorumClients(t, servers)
	c := newQuorum(t, clients, &fencelock.Options{TTL: time.Minute, RenewInterval: -1, NodeTimeout: 20 * time.Second})
	acquireToken(t, c, "warm-up") // loads the scripts: the held request is the acquire, not NOSCRIPT's
	hold := &holdAcquire{held: make(chan struct{}, 1), ran: make(chan struct{}, 1), gate: make(chan struct{})}
	clients[0].AddHook(hold)
	answered := make([]*countKey, 3)
	for i, rdb := range clients {
		answered[i] = &countKey{key: lockKey}
		rdb.AddHook(answered[i])
	}
	l, err := c.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire with node 0's acquire held = %v, want a lease from nodes 1 and 2", err)
	}
	defer l.Release(ctx)
	select {
	case <-hold.held:
	case <-time.After(10 * time.Second):
		t.Fatal("node 0's acquire not held within 10s")
	}
	count := func() []int64 { return []int64{answered[0].n.Load(), answered[1].n.Load(), answered[2].n.Load()} }
	after := func(before []int64, nodes ...int) func() bool {
		return func() bool {
			for _, i := range nodes {
				if answered[i].n.Load() <= before[i] {
					return false
				}
			}
			return true
		}
	}
	// The watch reads the key on each node it arms. Once nodes 1 and 2
	// are armed, node 1 loses the lock, and its watch reads it again.
	acquired := count()
	lctx := l.Context()
	redistest.WaitFor(t, 10*time.Second, "the watch armed on nodes 1 and 2", after(acquired, 1, 2))
	armed := count()
	if err := servers[1].Client(t).Del(ctx, lockKey).Err(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "node 1's watch to read the lock again", after(armed, 1))
	before := count()
	renewed := make(chan error, 1)
	go func() { renewed <- l.Renew(ctx) }()
	// Node 0's acquire goes on once nodes 1 and 2 have answered the
	// renewal, or once a request has overtaken it there (node 0 answers
	// nothing else for the lock while its acquire is held).
	redistest.WaitFor(t, 10*time.Second, "the renewal answered on nodes 1 and 2, or a request on node 0", func() bool {
		return answered[0].n.Load() > 0 || after(before, 1, 2)()
	})
	close(hold.gate)
	if err := <-renewed; err != nil {
		t.Fatalf("Renew with the lock on nodes 0 and 2 = %v, want nil", err)
	}
	if lctx.Err() != nil {
		t.Fatalf("Context ended with the lock on nodes 0 and 2: %v", context.Cause(lctx))
	}
}

// countKey counts the requests for key that have been answered.
type countKey struct {
	key string
	n   atomic.Int64
}

func (h *countKey) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countKey) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if slices.Contains(cmd.Args(), any(h.key)) {
			h.n.Add(1)
		}
		return err
	}
}

func (h *countKey) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if slices.Contains(cmd.Args(), any(h.key)) {
				h.n.Add(1)
			}
		}
		return err
	}
}
