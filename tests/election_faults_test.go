package tests

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A leader that pauses (its connection to Redis frozen) past its TTL is
// replaced; once the new leader has written, the paused leader's writes
// are rejected by the fenced resource, whatever it believes.
func TestElection_pausedLeaderFenced(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 500 * time.Millisecond, RetryInterval: 50 * time.Millisecond}
	paused, p := crashingClient(t, srv)
	old := newClient(t, paused, &opts).Election("fenced")
	next := newClient(t, srv.Client(t), &opts).Election("fenced")
	var store fence.Memory

	lo, err := old.Campaign(ctx, "old")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	if err := store.Put(ctx, "jobs", lo.Fence(), []byte("by old")); err != nil {
		t.Fatalf("leader's Put error = %v", err)
	}
	p.Partition() // the old leader stalls: it cannot renew, nor hear of its loss
	ln, err := next.Campaign(ctx, "next")
	if err != nil {
		t.Fatalf("Campaign after the leader paused error = %v", err)
	}
	defer next.Resign(ctx)
	if err := store.Put(ctx, "jobs", ln.Fence(), []byte("by next")); err != nil {
		t.Fatalf("new leader's Put error = %v", err)
	}
	p.Heal()
	// The old leader wakes up and writes as if it still led.
	err = store.Put(ctx, "jobs", lo.Fence(), []byte("stale"))
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("paused leader's Put error = %v, want ErrStale", err)
	}
	if _, err := store.Get(ctx, "jobs", lo.Fence()); !errors.Is(err, fence.ErrStale) {
		t.Errorf("paused leader's fenced Get error = %v, want ErrStale", err)
	}
	v, f, _ := store.Load(ctx, "jobs")
	if string(v) != "by next" || f.Token != ln.Token() {
		t.Errorf("resource holds %q with term %d, want %q with term %d", v, f.Token, "by next", ln.Token())
	}
	<-lo.Context().Done()
	if err := old.Resign(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("paused leader's Resign error = %v, want ErrLeaseLost", err)
	}
	if got, err := next.Leader(ctx); err != nil || got.Term != ln.Token() {
		t.Errorf("Leader() = %+v, %v; want term %d: the old leader's Resign must not touch it", got, err, ln.Token())
	}
}

// The leader's record expires with the lock, to the millisecond, after
// the campaign, each renewal and each Proclaim.
func TestElection_recordFollowsLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		config  []string
		command string // reads a key's absolute expiry
		slack   int64  // how much earlier than the lock the record may expire, ms
	}{
		{"PEXPIRETIME", nil, "PEXPIRETIME", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, &redistest.Options{Config: tc.config})
			rdb := srv.Client(t)
			ctx := t.Context()
			// Renewed by hand, at known moments.
			const ttl = 10 * time.Second
			c := newClient(t, rdb, &fencelock.Options{TTL: ttl, RenewInterval: -1})
			e := c.Election("record")
			at := func(after string) {
				lock, err1 := rdb.Do(ctx, tc.command, "fencelock:{record}").Int64()
				rec, err2 := rdb.Do(ctx, tc.command, "fencelock:{record}:leader").Int64()
				if err := errors.Join(err1, err2); err != nil {
					t.Fatalf("%s: %v", tc.command, err)
				}
				if d := lock - rec; rec <= 0 || d < 0 || d > tc.slack {
					t.Errorf("after %s: record expires at %d, lock at %d; want the record to expire with the lock (up to %dms before)",
						after, rec, lock, tc.slack)
				}
			}
			l, err := e.Campaign(ctx, "v")
			if err != nil {
				t.Fatalf("Campaign error = %v", err)
			}
			at("Campaign")
			// Let the TTL run down, so that the renewal visibly moves it.
			low := ttl - 300*time.Millisecond
			redistest.WaitFor(t, 5*time.Second, "the TTL to run down", func() bool {
				return rdb.PTTL(ctx, "fencelock:{record}:leader").Val() < low
			})
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("Renew error = %v", err)
			}
			if got := rdb.PTTL(ctx, "fencelock:{record}:leader").Val(); got < low {
				t.Errorf("record PTTL after Renew = %v, want renewed (> %v)", got, low)
			}
			at("Renew")
			if err := e.Proclaim(ctx, "w"); err != nil {
				t.Fatalf("Proclaim error = %v", err)
			}
			at("Proclaim")
			if err := e.Resign(ctx); err != nil {
				t.Fatalf("Resign error = %v", err)
			}
			if n := rdb.Exists(ctx, "fencelock:{record}", "fencelock:{record}:leader").Val(); n != 0 {
				t.Errorf("%d of the lock and record left after Resign, want none", n)
			}
		})
	}
}

// A campaign whose reply is lost resigns what it may have taken: the lock
// and the record are gone, and the next candidate leads at once.
func TestElection_campaignReplyLost(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	hook := &loseReplies{match: func(cmd redis.Cmder) bool {
		return runsScript(cmd, "lua/campaign.lua")
	}}
	rdb.AddHook(hook)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := newClient(t, rdb, &fencelock.Options{RetryInterval: time.Minute}).Election("lost").Campaign(cctx, "v")
	if !errors.Is(err, errLostReply) {
		t.Fatalf("Campaign error = %v, want the lost reply's", err)
	}
	if len(hook.dropped()) == 0 {
		t.Fatal("no campaign reply was dropped")
	}
	if n := rdb.Exists(ctx, "fencelock:{lost}", "fencelock:{lost}:leader").Val(); n != 0 {
		t.Errorf("%d of the lock and record left behind by a campaign whose reply was lost", n)
	}
	l, err := newClient(t, srv.Client(t), nil).Election("lost").Campaign(ctx, "w")
	if err != nil {
		t.Fatalf("next Campaign error = %v", err)
	}
	l.Release(ctx)
}

// With MinReplicas, a campaign the replica acknowledged leads; one it
// could not acknowledge fails closed and leaves neither lock nor record.
func TestElection_MinReplicas(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	rdb := m.Client(t)
	ctx := t.Context()
	redistest.WaitReplicasInSync(t, m, 1)
	c := newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 5 * time.Second})
	e := c.Election("replicated")
	if _, err := e.Campaign(ctx, "v"); err != nil {
		t.Fatalf("Campaign with a live replica error = %v", err)
	}
	if got := r.Client(t).HGet(ctx, "fencelock:{replicated}:leader", "value").Val(); got != "v" {
		t.Errorf("replica's leader record value = %q after an acknowledged campaign, want %q", got, "v")
	}
	e.Resign(ctx)

	r.Pause(t)
	defer r.Resume(t)
	c = newClient(t, rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 200 * time.Millisecond})
	_, err := c.Election("unreplicated").Campaign(ctx, "v")
	if !errors.Is(err, fencelock.ErrNotReplicated) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("Campaign with a paused replica error = %v, want ErrNotReplicated and ErrNotAcquired", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{unreplicated}", "fencelock:{unreplicated}:leader").Val(); n != 0 {
		t.Errorf("%d of the lock and record left behind by an unreplicated campaign", n)
	}
}

// A record or history key of the wrong type is a clear error, with
// nothing written: no lock, no token.
func TestElection_wrongTypeKeys(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	for key, name := range map[string]string{"fencelock:{r}:leader": "r", "fencelock:{h}:history": "h"} {
		rdb.Set(ctx, key, "x", 0)
		_, err := c.Election(name).Campaign(ctx, "v")
		if err == nil || !redis.HasErrorPrefix(errors.Unwrap(errors.Unwrap(err)), "WRONGTYPE") {
			t.Errorf("Campaign over a string %s error = %v, want a WRONGTYPE error", key, err)
		}
		if n := rdb.Exists(ctx, "fencelock:{"+name+"}", "fencelock:{"+name+"}:token").Val(); n != 0 {
			t.Errorf("Campaign over a string %s wrote %d keys, want none", key, n)
		}
		if got := rdb.Get(ctx, key).Val(); got != "x" {
			t.Errorf("%s changed to %q", key, got)
		}
	}
}

// A quorum election goes on with a node down; with a majority down,
// Leader and Campaign report ErrNoQuorum.
func TestElection_quorumNodesDown(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 2 * time.Second, RetryInterval: 100 * time.Millisecond}
	c := newQuorum(t, nodes, &opts)
	w := observe(t, ctx, c.Election("q"))
	servers[0].Stop(t)

	a, b := c.Election("q"), newQuorum(t, quorumClients(t, servers), &opts).Election("q")
	la, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign with one node of three down error = %v", err)
	}
	if got, err := b.Leader(ctx); err != nil || got.Term != la.Token() || got.Value != "a" {
		t.Errorf("Leader() = %+v, %v; want a with term %d", got, err, la.Token())
	}
	if err := a.Proclaim(ctx, "a2"); err != nil {
		t.Errorf("Proclaim error = %v", err)
	}
	done := campaigned(ctx, b, "b")
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiting Campaign error = %v", r.err)
	}
	got := w.waitFor(t, 10*time.Second, "b to lead", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == r.l.Token()
	})
	want := []fencelock.Leader{{}, {Term: la.Token(), Value: "a"}, {Term: la.Token(), Value: "a2"}, {}, {Term: r.l.Token(), Value: "b"}}
	if !sameChanges(got, want) {
		t.Errorf("observed %s, want %s", describe(got), describe(want))
	}

	if err := b.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	servers[1].Stop(t)
	if _, err := a.Leader(ctx); !errors.Is(err, fencelock.ErrNoQuorum) {
		t.Errorf("Leader() with two nodes of three down error = %v, want ErrNoQuorum", err)
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	defer ccancel()
	if _, err := a.Campaign(cctx, "a"); !errors.Is(err, fencelock.ErrNoQuorum) || !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Errorf("Campaign with two nodes of three down error = %v, want ErrNoQuorum and ErrNotAcquired", err)
	}
}

// A Proclaim that only a minority of a quorum's nodes got (it failed with
// ErrNoQuorum) is not what Leader and Observe report: a value counts when
// a majority holds it. Campaign with the old value then announces it
// again, on every node.
func TestElection_minorityProclaim(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, _ := quorumNodes(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 5 * time.Second, RetryInterval: 100 * time.Millisecond}
	refuse := &refuseProclaim{}
	nodes := quorumClients(t, servers)
	for _, n := range nodes[1:] {
		n.AddHook(refuse)
	}
	// Campaign and Proclaim return once a majority decides, maybe before
	// node 0 answers: the premises wait for its answers.
	elected := newAnsweredScript("lua/announce.lua", "elected")
	answered := newAnsweredScript("lua/announce.lua", "proclaimed")
	nodes[0].AddHook(elected)
	nodes[0].AddHook(answered)
	e := newQuorum(t, nodes, &opts).Election("m")
	reader := newQuorum(t, quorumClients(t, servers), &opts)
	node0 := newClient(t, quorumClients(t, servers)[0], &opts).Election("m")
	elected.on.Store(true)
	l, err := e.Campaign(ctx, "old")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	select {
	case <-elected.done:
	case <-ctx.Done():
		t.Fatalf("node 0 never answered the Campaign's record request: %v", ctx.Err())
	}
	elected.on.Store(false)
	w := observe(t, ctx, reader.Election("m"))

	refuse.on.Store(true)
	answered.on.Store(true)
	if err := e.Proclaim(ctx, "new"); !errors.Is(err, fencelock.ErrNoQuorum) {
		t.Fatalf("Proclaim with two nodes of three refusing error = %v, want ErrNoQuorum", err)
	}
	refuse.on.Store(false)
	select {
	case <-answered.done:
	case <-ctx.Done():
		t.Fatalf("node 0 never answered the minority Proclaim: %v", ctx.Err())
	}
	answered.on.Store(false)
	if got, err := node0.Leader(ctx); err != nil || got.Value != "new" {
		t.Fatalf("node 0's record = %+v, %v; want new (the test's premise)", got, err)
	}
	// Leader returns once a majority decides; which nodes answer first
	// varies, so ask several times.
	for i := range 8 {
		if got, err := reader.Election("m").Leader(ctx); err != nil || got.Value != "old" || got.Term != l.Token() {
			t.Fatalf("Leader() #%d after the minority Proclaim = %+v, %v; want old, term %d", i, got, err, l.Token())
		}
	}
	first := observe(t, ctx, reader.Election("m"))
	if got := first.changes(); got[0].Value != "old" {
		t.Errorf("a new Observe's first change = %s, want old", describe(got[:1]))
	}

	// Campaign with the old value is not a no-op: every node gets it.
	answered.on.Store(true)
	if l2, err := e.Campaign(ctx, "old"); err != nil || l2 != l {
		t.Fatalf("Campaign(old) while leading = %v, %v; want the same lease", l2, err)
	}
	select {
	case <-answered.done:
	case <-ctx.Done():
		t.Fatalf("node 0 never answered Campaign(old): %v", ctx.Err())
	}
	answered.on.Store(false)
	if got, err := node0.Leader(ctx); err != nil || got.Value != "old" {
		t.Errorf("node 0's record after Campaign(old) = %+v, %v; want old", got, err)
	}

	// The first observer never saw the minority's value.
	if err := e.Proclaim(ctx, "third"); err != nil {
		t.Fatalf("Proclaim error = %v", err)
	}
	got := w.waitFor(t, 10*time.Second, "third", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Value == "third"
	})
	for _, c := range got {
		if c.Value == "new" {
			t.Errorf("Observe sent %s, want no change to the minority's value new", describe(got))
			break
		}
	}
}

// A quorum campaign returns once a majority has its record; a node whose
// acquire request is slow gets the record too, after its lock: a record
// request sent at once, on another connection, would reach the node first
// and be refused, leaving the node with the lock and no record, so one
// more node down would leave no majority that knows the leader.
func TestElection_quorumRecordFollowsSlowAcquire(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Loaded, so that the held request is the one EVALSHA that runs.
	if err := nodes[0].ScriptLoad(ctx, scriptSources()["lua/acquire.lua"]).Err(); err != nil {
		t.Fatal(err)
	}
	clients := quorumClients(t, servers)
	hold := &holdAcquire{held: make(chan struct{}, 1), ran: make(chan struct{}, 1), gate: make(chan struct{})}
	answered := newAnsweredScript("lua/announce.lua", "elected")
	answered.on.Store(true)
	clients[0].AddHook(hold)
	clients[0].AddHook(answered)
	opened := false
	defer func() {
		if !opened {
			close(hold.gate)
		}
	}()
	opts := fencelock.Options{TTL: 10 * time.Second, NodeTimeout: 5 * time.Second}
	l, err := newQuorum(t, clients, &opts).Election("slow").Campaign(ctx, "v")
	if err != nil {
		t.Fatalf("Campaign with node 0's acquire request held error = %v", err)
	}
	select {
	case <-hold.held:
	case <-ctx.Done():
		t.Fatal("the acquire request to node 0 was not held")
	}
	// Held until node 0 answers a record request, or for a second: one
	// sent at once would be answered first.
	select {
	case <-answered.done:
		t.Fatalf("node 0 answered a record request while its acquire request was held")
	case <-time.After(time.Second):
	}
	close(hold.gate)
	opened = true
	for what, c := range map[string]chan struct{}{"its acquire request ran": hold.ran, "its record request was answered": answered.done} {
		select {
		case <-c:
		case <-ctx.Done():
			t.Fatalf("node 0: %s never: %v", what, ctx.Err())
		}
	}
	got, err := newClient(t, nodes[0], &opts).Election("slow").Leader(ctx)
	if err != nil || got.Value != "v" || got.Term != l.Token() {
		t.Errorf("node 0's record after its slow acquisition = %+v, %v; want v, term %d", got, err, l.Token())
	}
}

// answeredScript signals done each time, while on, a request of the
// script file (with arg among its arguments, if not empty) got its reply:
// not NOSCRIPT, after which the script is sent again.
type answeredScript struct {
	file, arg string
	on        atomic.Bool
	done      chan struct{}
}

func newAnsweredScript(file, arg string) *answeredScript {
	return &answeredScript{file: file, arg: arg, done: make(chan struct{}, 1)}
}

// see takes the request's error as its hook returns it: go-redis sets
// cmd.Err() only after the hooks have returned.
func (h *answeredScript) see(cmd redis.Cmder, err error) {
	if h.on.Load() && runsScript(cmd, h.file) && (h.arg == "" || slices.Contains(cmd.Args(), any(h.arg))) &&
		!errors.Is(err, redis.ErrNoScript) && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		select {
		case h.done <- struct{}{}:
		default: // one signal is enough
		}
	}
}

func (h *answeredScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *answeredScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.see(cmd, err)
		return err
	}
}

func (h *answeredScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.see(cmd, cmd.Err())
		}
		return err
	}
}

// refuseProclaim fails, unsent, every Proclaim's request while on.
type refuseProclaim = refuseAnnounce

// refuseAnnounce fails, unsent, every request of lua/announce.lua of its kind
// ("elected", or "proclaimed" if empty) while on.
type refuseAnnounce struct {
	kind string
	on   atomic.Bool
	// late holds each refusal until the request's context ends (the
	// quorum's NodeTimeout): a node that answers last.
	late bool
}

func (h *refuseAnnounce) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *refuseAnnounce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	kind := cmp.Or(h.kind, "proclaimed")
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && slices.Contains(cmd.Args(), any(kind)) {
			if h.late {
				<-ctx.Done()
			}
			err := errors.New("refused by the test")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *refuseAnnounce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
