package tests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/inspect"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// batchGate is a go-redis hook that holds the first two commands naming
// {gate-...} in flight until open is closed (a batcher sends at most two
// at a time): calls made meanwhile queue, and go together in one batch
// when they return. It also records the size of
// every pipeline that names marker, and can hold those in flight too
// (holdPipes), after they ran on the server.
type batchGate struct {
	marker  string
	entered chan struct{} // receives when a {gate-...} command is in flight
	open    chan struct{}

	mu        sync.Mutex
	held      int           // {gate-...} commands held so far
	pipes     []int         // sizes of the pipelines naming marker
	evals     int           // EVALs naming marker, alone or in pipelines
	holdPipes chan struct{} // if not nil, a pipeline naming marker returns once it is closed
	pipeRan   chan struct{} // closed when such a held pipeline has its replies
	// gateEvals, if not nil, holds the gate calls' EVALs (their retries
	// after NOSCRIPT) until a pipeline naming marker has its replies:
	// sent at once, on another connection, they would load the script
	// while the batch is on its way.
	gateEvals chan struct{}
}

func newBatchGate(marker string) *batchGate {
	return &batchGate{marker: marker, entered: make(chan struct{}, 2), open: make(chan struct{})}
}

func cmdNames(cmd redis.Cmder, s string) bool {
	for _, a := range cmd.Args() {
		if v, ok := a.(string); ok && strings.Contains(v, s) {
			return true
		}
	}
	return false
}

func (g *batchGate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *batchGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmdNames(cmd, "{gate-") {
			g.mu.Lock()
			hold := g.held < 2
			g.held++
			evals := g.gateEvals
			g.mu.Unlock()
			if hold {
				g.entered <- struct{}{}
				<-g.open
			}
			if evals != nil && cmd.Name() == "eval" {
				<-evals
			}
		}
		if cmd.Name() == "eval" && cmdNames(cmd, g.marker) {
			g.mu.Lock()
			g.evals++ // a NOSCRIPT retry that went alone
			g.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (g *batchGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		ours := false
		for _, cmd := range cmds {
			ours = ours || cmdNames(cmd, g.marker)
		}
		err := next(ctx, cmds)
		if !ours {
			return err
		}
		g.mu.Lock()
		g.pipes = append(g.pipes, len(cmds))
		for _, cmd := range cmds {
			if cmd.Name() == "eval" {
				g.evals++
			}
		}
		hold, ran := g.holdPipes, g.pipeRan
		g.holdPipes = nil
		if g.gateEvals != nil {
			close(g.gateEvals)
			g.gateEvals = nil
		}
		g.mu.Unlock()
		if hold != nil {
			close(ran)
			<-hold
		}
		return err
	}
}

// pipelines returns the sizes of the pipelines naming the marker so far.
func (g *batchGate) pipelines() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.pipes...)
}

// inBatch holds two gate calls of c in flight, makes the calls f(i) for
// i < n in goroutines, waits until all of them are queued behind them,
// opens the gate and returns once every f has returned. queued, if not
// nil, runs while they wait.
func inBatch(t *testing.T, c *fencelock.Client, g *batchGate, n int, queued func(), f func(i int)) {
	t.Helper()
	ctx := t.Context()
	gateDone := make(chan *fencelock.Lease, 2)
	for i := range 2 {
		go func() {
			l, _ := c.TryAcquire(ctx, fmt.Sprintf("gate-%d", i))
			gateDone <- l
		}()
	}
	<-g.entered
	<-g.entered
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	waitFor(t, "the calls to queue", func() bool { return inspect.Queued(c, "gate") == n })
	if queued != nil {
		queued()
	}
	close(g.open)
	wg.Wait()
	for range 2 {
		if l := <-gateDone; l != nil {
			l.Release(ctx)
		}
	}
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// gatedClient returns a client of s with g's hook, and loads the
// scripts.
func gatedClient(t *testing.T, s *redistest.Server, g *batchGate) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(g)
	warmUp(t, newClient(t, rdb, nil))
	return rdb
}

// gatedBatch starts a server and returns it with a gate on "{batch-"
// names, a gated client (gatedClient) and a Client with opts over it.
func gatedBatch(t *testing.T, opts *fencelock.Options) (*redistest.Server, *batchGate, *redis.Client, *fencelock.Client) {
	s := redistest.New(t)
	g := newBatchGate("{batch-")
	rdb := gatedClient(t, s, g)
	return s, g, rdb, newClient(t, rdb, opts)
}

// warmUp loads the scripts with one lock acquired and released, so that
// batches meet no NOSCRIPT unless a test makes them.
func warmUp(t *testing.T, c *fencelock.Client) {
	t.Helper()
	l, err := c.TryAcquire(t.Context(), "warm-up")
	if err != nil {
		t.Fatalf("warm-up TryAcquire = %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("warm-up Release = %v", err)
	}
}

// Calls that arrive while one is in flight go together in one pipeline,
// and each gets its own result: its own lock, its own token.
func TestBatch_perCallResults(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s, g, rdb, c := gatedBatch(t, nil)
	ctx := t.Context()
	const n = 8
	leases := make([]*fencelock.Lease, n)
	errs := make([]error, n)
	inBatch(t, c, g, n, nil, func(i int) {
		leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
	})
	if got := g.pipelines(); len(got) != 1 || got[0] != n {
		t.Fatalf("pipelines = %v, want one of %d commands", got, n)
	}
	for i, l := range leases {
		name := fmt.Sprintf("batch-%d", i)
		if errs[i] != nil || l == nil {
			t.Fatalf("TryAcquire(%q) = %v, %v; want a lease", name, l, errs[i])
		}
		if l.Name() != name {
			t.Errorf("lease %d Name() = %q, want %q", i, l.Name(), name)
		}
		stored, err := rdb.Get(ctx, "fencelock:{"+name+"}:token").Int64()
		if err != nil || stored != l.Token() {
			t.Errorf("%s: stored token = %d, %v; want the lease's %d", name, stored, err, l.Token())
		}
	}
	// The releases batch too, and each deletes its own lock.
	g2 := newBatchGate("{batch-")
	c2rdb := gatedClient(t, s, g2)
	c2 := newClient(t, c2rdb, nil)
	held := make([]*fencelock.Lease, n)
	for i := range n {
		l, err := c2.TryAcquire(ctx, fmt.Sprintf("batch2-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held[i] = l
	}
	inBatch(t, c2, g2, n, nil, func(i int) {
		if err := held[i].Release(ctx); err != nil {
			t.Errorf("Release(%d) = %v", i, err)
		}
	})
	for i := range n {
		if k := rdb.Exists(ctx, fmt.Sprintf("fencelock:{batch2-%d}", i)).Val(); k != 0 {
			t.Errorf("lock batch2-%d still there after its batched Release", i)
		}
	}
	for _, l := range leases {
		l.Release(ctx)
	}
}

// One call's error reply (a list where its lock should be) is that
// call's alone: the others of its batch acquire.
func TestBatch_oneCallsError(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, g, rdb, c := gatedBatch(t, nil)
	ctx := t.Context()
	rdb.RPush(ctx, "fencelock:{batch-2}", "x")
	const n = 5
	leases := make([]*fencelock.Lease, n)
	errs := make([]error, n)
	inBatch(t, c, g, n, nil, func(i int) {
		leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
	})
	if got := g.pipelines(); len(got) == 0 || got[0] != n {
		t.Fatalf("pipelines = %v, want a first one of %d commands", got, n)
	}
	for i := range n {
		if i == 2 {
			if errs[i] == nil || errors.Is(errs[i], fencelock.ErrNotAcquired) || !strings.Contains(errs[i].Error(), "WRONGTYPE") {
				t.Errorf("TryAcquire over a list = %v, %v; want its WRONGTYPE error", leases[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || leases[i] == nil {
			t.Errorf("TryAcquire(batch-%d) beside a failing call = %v, %v; want a lease", i, leases[i], errs[i])
			continue
		}
		leases[i].Release(ctx)
	}
}

// A caller whose context ends while its call waits for the next batch
// leaves: its error is the context's, and nothing of it is sent.
func TestBatch_leftBeforeSent(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, g, rdb, c := gatedBatch(t, nil)
	ctx := t.Context()
	cctx, cancel := context.WithCancelCause(ctx)
	why := errors.New("caller gone")
	var leftErr error
	var kept *fencelock.Lease
	var keptErr error
	inBatch(t, c, g, 2, func() {
		cancel(why)
		waitFor(t, "the cancelled call to leave the queue", func() bool { return inspect.Queued(c, "gate") == 1 })
	}, func(i int) {
		if i == 0 {
			_, leftErr = c.TryAcquire(cctx, "batch-left")
			return
		}
		kept, keptErr = c.TryAcquire(ctx, "batch-kept")
	})
	if !errors.Is(leftErr, why) {
		t.Errorf("cancelled TryAcquire error = %v, want its context's cause", leftErr)
	}
	if keptErr != nil {
		t.Fatalf("TryAcquire beside a cancelled call = %v", keptErr)
	}
	kept.Release(ctx)
	if k := rdb.Exists(ctx, "fencelock:{batch-left}", "fencelock:{batch-left}:token").Val(); k != 0 {
		t.Errorf("the call that left before its batch wrote %d keys, want none", k)
	}
}

// A caller whose context ends while its batch is in flight returns at
// once with the context's error; the lock its command took when it ran
// is released after the reply comes, and the others' are untouched.
func TestBatch_leftInFlight(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, g, rdb, c := gatedBatch(t, &fencelock.Options{TTL: time.Minute})
	ctx := t.Context()
	cctx, cancel := context.WithCancel(ctx)
	hold, ran := make(chan struct{}), make(chan struct{})
	g.holdPipes, g.pipeRan = hold, ran
	var leftErr error
	left := make(chan struct{})
	var kept *fencelock.Lease
	var keptErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		inBatch(t, c, g, 2, nil, func(i int) {
			if i == 0 {
				_, leftErr = c.TryAcquire(cctx, "batch-left")
				close(left)
				return
			}
			kept, keptErr = c.TryAcquire(ctx, "batch-kept")
		})
	})
	<-ran // the batch ran on the server; its replies are held
	if k := rdb.Exists(ctx, "fencelock:{batch-left}").Val(); k != 1 {
		t.Fatalf("the held batch did not take the lock (exists = %d)", k)
	}
	cancel()
	<-left // returns while the batch is still held
	if !errors.Is(leftErr, context.Canceled) {
		t.Errorf("TryAcquire cancelled in flight = %v, want context.Canceled", leftErr)
	}
	close(hold)
	wg.Wait()
	if keptErr != nil {
		t.Fatalf("TryAcquire beside a cancelled call = %v", keptErr)
	}
	waitFor(t, "the departed caller's lock to be released", func() bool {
		return rdb.Exists(ctx, "fencelock:{batch-left}").Val() == 0
	})
	if k := rdb.Exists(ctx, "fencelock:{batch-kept}").Val(); k != 1 {
		t.Errorf("the other caller's lock is gone")
	}
	kept.Release(ctx)
}

// SCRIPT FLUSH while a batch forms: every call of it gets NOSCRIPT, and
// each is sent again with EVAL, in the next batch.
func TestBatch_noScript(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s, g, _, c := gatedBatch(t, nil)
	ctx := t.Context()
	const n = 4
	leases := make([]*fencelock.Lease, n)
	errs := make([]error, n)
	g.gateEvals = make(chan struct{})
	inBatch(t, c, g, n, func() {
		if err := s.Client(t).ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}, func(i int) {
		leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
	})
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("TryAcquire(batch-%d) after SCRIPT FLUSH = %v", i, errs[i])
		}
		leases[i].Release(ctx)
	}
	g.mu.Lock()
	evals := g.evals
	g.mu.Unlock()
	if evals < n {
		t.Errorf("%d EVALs sent, want %d: NOSCRIPT was not met or not retried per call", evals, n)
	}
}

// A batch's reply is lost after the server ran it, and go-redis sends
// the whole pipeline again. Retried on the server, every acquisition is
// the same (acquire.lua is idempotent for its owner) and each caller
// gets the token it was issued; retried elsewhere (refused, READONLY),
// every call gets the error and undoes what the first try took.
func TestBatch_lostReplyRetried(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	cases := append([]retryCase{{"same server", func(t *testing.T, m *redistest.Server) (string, func(*retriedLoss)) {
		return m.Addr(), func(*retriedLoss) {}
	}}}, retryCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, h, rdb, arm := retrySetup(t, tc, 0, "{batch-")
			g := newBatchGate("{batch-")
			rdb.AddHook(g)
			c := newClient(t, rdb, nil)
			ctx := t.Context()
			warmUp(t, c)
			arm()
			const n = 4
			leases := make([]*fencelock.Lease, n)
			errs := make([]error, n)
			inBatch(t, c, g, n, nil, func(i int) {
				leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
			})
			if !h.fired() {
				t.Fatalf("the fault did not fire")
			}
			direct := m.Client(t)
			for i := range n {
				name := fmt.Sprintf("batch-%d", i)
				if tc.name == "same server" {
					if errs[i] != nil {
						t.Errorf("TryAcquire(%s) retried on the server = %v; want its lease", name, errs[i])
						continue
					}
					stored, _ := direct.Get(ctx, "fencelock:{"+name+"}:token").Int64()
					if stored != leases[i].Token() {
						t.Errorf("%s: token %d, counter %d: the retry issued another", name, leases[i].Token(), stored)
					}
					leases[i].Release(ctx)
					continue
				}
				var ne net.Error
				if errs[i] == nil || !errors.As(errs[i], &ne) && !strings.Contains(errs[i].Error(), "READONLY") {
					t.Errorf("TryAcquire(%s) with its retry failing = %v, %v; want the failure", name, leases[i], errs[i])
				}
				if k := direct.Exists(ctx, "fencelock:{"+name+"}").Val(); k != 0 {
					t.Errorf("%s: the first try's lock is left behind", name)
				}
			}
		})
	}
}

// The native release refused mid-batch (the ACL user loses DELEX and
// DELIFEQ while the batch forms): each call of it falls back to the Lua
// release, and every lock is deleted.
func TestBatch_nativeRefused(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	ctx := t.Context()
	revoke := removeNatives(t, admin)
	if len(revoke) == 0 {
		t.Skip("the server has no native release")
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "batch", "on", ">pw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	g := newBatchGate("{batch-")
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: s.Addr(), Username: "batch", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(g)
	c := newClient(t, rdb, &fencelock.Options{RenewInterval: -1})
	warmUp(t, c) // detects the natives, which the user may still run
	const n = 4
	leases := make([]*fencelock.Lease, n)
	for i := range n {
		l, err := c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	errs := make([]error, n)
	inBatch(t, c, g, n, func() {
		if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "batch"}, toAny(revoke)...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}, func(i int) {
		errs[i] = leases[i].Release(ctx)
	})
	if got := g.pipelines(); len(got) == 0 || got[0] != 2*n {
		t.Errorf("pipelines = %v, want a first one of %d commands (a native release and its publish per call)", got, 2*n)
	}
	if log, err := admin.Do(ctx, "ACL", "LOG").Slice(); err != nil || len(log) == 0 {
		t.Errorf("ACL LOG = %v, %v; want the batch's refused native commands", log, err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Release(batch-%d) with its native command refused = %v, want nil (the Lua fallback)", i, errs[i])
		}
		if k := admin.Exists(ctx, fmt.Sprintf("fencelock:{batch-%d}", i)).Val(); k != 0 {
			t.Errorf("lock batch-%d still there after its release fell back", i)
		}
	}
}

// Many goroutines of one Client on distinct names, on every topology:
// batches form as they come, and each caller gets its own lock and
// token, and its release deletes its own lock. Through Sentinels, the
// batches go to the master they name; on a Cluster, per master; with
// MinReplicas (Sentinel and Cluster here), each call's WAIT goes on its
// master's connection; in a quorum, per node.
func TestBatch_concurrent(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	type topology struct {
		name  string
		setup func(t *testing.T) (c *fencelock.Client, rdb redis.UniversalClient, g *batchGate)
	}
	hooked := func(rdb redis.UniversalClient) *batchGate {
		g := newBatchGate("{c-")
		rdb.AddHook(g)
		return g
	}
	tops := []topology{
		{"standalone", func(t *testing.T) (*fencelock.Client, redis.UniversalClient, *batchGate) {
			rdb := redistest.New(t).Client(t)
			g := hooked(rdb)
			return newClient(t, rdb, nil), rdb, g
		}},
		{"cluster", func(t *testing.T) (*fencelock.Client, redis.UniversalClient, *batchGate) {
			rdb := redistest.NewCluster(t).Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true})
			g := hooked(rdb)
			return newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second}), rdb, g
		}},
		{"sentinel", func(t *testing.T) (*fencelock.Client, redis.UniversalClient, *batchGate) {
			rdb := redistest.NewSentinelGroup(t).Client(t, nil)
			g := hooked(rdb)
			return newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second}), rdb, g
		}},
		{"quorum", func(t *testing.T) (*fencelock.Client, redis.UniversalClient, *batchGate) {
			var nodes []redis.UniversalClient
			var g *batchGate
			for i := range 3 {
				rdb := redistest.New(t).Client(t)
				if i == 0 {
					g = hooked(rdb)
				}
				nodes = append(nodes, rdb)
			}
			return newQuorum(t, nodes, nil), nil, g
		}},
	}
	for _, top := range tops {
		t.Run(top.name, func(t *testing.T) {
			t.Parallel()
			c, rdb, g := top.setup(t)
			ctx := t.Context()
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					for j := range 10 {
						name := fmt.Sprintf("c-%d-%d", i, j)
						l, err := c.TryAcquire(ctx, name)
						if err != nil {
							t.Errorf("TryAcquire(%s) = %v", name, err)
							return
						}
						if l.Name() != name {
							t.Errorf("TryAcquire(%s) got the lease of %q", name, l.Name())
						}
						if rdb != nil {
							if stored, err := rdb.Get(ctx, "fencelock:{"+name+"}:token").Int64(); err != nil || stored != l.Token() {
								t.Errorf("%s: stored token %d, %v; the lease's %d", name, stored, err, l.Token())
							}
						}
						if err := l.Release(ctx); err != nil {
							t.Errorf("Release(%s) = %v", name, err)
						}
						if rdb != nil {
							if k := rdb.Exists(ctx, "fencelock:{"+name+"}").Val(); k != 0 {
								t.Errorf("%s still locked after its Release", name)
							}
						}
					}
				})
			}
			wg.Wait()
			t.Logf("pipelines of several calls: %d", len(g.pipelines()))
		})
	}
}
