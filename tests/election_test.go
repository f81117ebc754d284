package tests

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// electionOptions are the Options of the election race tests: waiters
// retry soon after a lost wake-up (the tests kill subscriptions).
var electionOptions = fencelock.Options{TTL: 5 * time.Second, RetryInterval: 100 * time.Millisecond}

// watcher collects what an Observe channel sends.
type watcher struct {
	mu     sync.Mutex
	got    []fencelock.Leader
	more   chan struct{} // signalled after each change
	closed chan struct{} // closed when the channel is
}

// observe starts observing e and returns once Observe has sent its first
// change: who leads now.
func observe(t *testing.T, ctx context.Context, e *fencelock.Election) *watcher {
	t.Helper()
	ch, err := e.Observe(ctx)
	if err != nil {
		t.Fatalf("Observe error = %v", err)
	}
	w := watch(t, ch)
	w.waitFor(t, 10*time.Second, "first change", func(got []fencelock.Leader) bool { return len(got) > 0 })
	return w
}

func watch(t *testing.T, ch <-chan fencelock.Leader) *watcher {
	t.Helper()
	w := &watcher{more: make(chan struct{}, 1), closed: make(chan struct{})}
	go func() {
		defer close(w.closed)
		for l := range ch {
			w.mu.Lock()
			w.got = append(w.got, l)
			w.mu.Unlock()
			select {
			case w.more <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

// changes returns what was sent so far.
func (w *watcher) changes() []fencelock.Leader {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// waitFor waits until cond holds for what was sent, or fails the test
// after timeout.
func (w *watcher) waitFor(t *testing.T, timeout time.Duration, what string, cond func([]fencelock.Leader) bool) []fencelock.Leader {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if got := w.changes(); cond(got) {
			return got
		}
		select {
		case <-w.more:
		case <-w.closed:
			if got := w.changes(); cond(got) {
				return got
			}
			t.Fatalf("Observe channel closed before %s; it sent %s", what, describe(w.changes()))
		case <-deadline.C:
			t.Fatalf("no %s within %v; Observe sent %s", what, timeout, describe(w.changes()))
		}
	}
}

// last returns the last change sent, and whether there was one.
func last(got []fencelock.Leader) (fencelock.Leader, bool) {
	if len(got) == 0 {
		return fencelock.Leader{}, false
	}
	return got[len(got)-1], true
}

// describe prints changes as "none, 17 (a), none, ...".
func describe(got []fencelock.Leader) string {
	s := make([]string, len(got))
	for i, l := range got {
		s[i] = "none"
		if l.Term != 0 {
			s[i] = fmt.Sprintf("%d (%s)", l.Term, l.Value)
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// electionRace races 5 candidates on the given Clients for the
// leadership of one election, terms times in all, each leader writing
// to a fenced resource and resigning; an observer on the first Client
// watches throughout, and kill, if not nil, is called after every third
// term to cut the observer's (and everyone's) subscriptions. It checks
// that exactly one candidate leads at a time, that terms strictly
// increase, that each leader's writes are accepted and Leader names it,
// and that the observer saw every term, in order, each followed by no
// leader.
func electionRace(t *testing.T, clients []*fencelock.Client, terms int, kill func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const name = "race"
	octx, stop := context.WithCancel(ctx)
	defer stop()
	w := observe(t, octx, clients[0].Election(name))

	var (
		mu     sync.Mutex
		won    []int64
		active atomic.Int32
		left   atomic.Int64
		store  fence.Memory
		wg     sync.WaitGroup
	)
	left.Store(int64(terms))
	for i := range 5 {
		e := clients[i%len(clients)].Election(name)
		value := fmt.Sprintf("candidate-%d", i)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				l, err := e.Campaign(ctx, value)
				if err != nil {
					t.Errorf("%s: Campaign error = %v", value, err)
					return
				}
				if n := active.Add(1); n != 1 {
					t.Errorf("%s leads with term %d while %d others lead", value, l.Token(), n-1)
				}
				mu.Lock()
				if len(won) > 0 && l.Token() <= won[len(won)-1] {
					t.Errorf("%s won term %d after term %d: terms must increase", value, l.Token(), won[len(won)-1])
				}
				won = append(won, l.Token())
				n := len(won)
				mu.Unlock()
				if err := store.Put(ctx, "state", l.Fence(), []byte(value)); err != nil {
					t.Errorf("%s: Put with term %d error = %v, want accepted", value, l.Token(), err)
				}
				got, err := e.Leader(ctx)
				if want := (fencelock.Leader{Value: value, Term: l.Token(), LeaseID: l.ID(), Since: got.Since}); err != nil || got != want {
					t.Errorf("%s: Leader() = %+v, %v; want %+v", value, got, err, want)
				}
				active.Add(-1)
				if err := e.Resign(ctx); err != nil {
					t.Errorf("%s: Resign error = %v", value, err)
				}
				if kill != nil && n%3 == 0 {
					kill()
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Every term, in order, each ended by its resignation.
	want := []fencelock.Leader{{}}
	for _, term := range won {
		want = append(want, fencelock.Leader{Term: term}, fencelock.Leader{})
	}
	got := w.waitFor(t, 30*time.Second, fmt.Sprintf("last term %d and its end", won[len(won)-1]), func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && len(got) >= len(want) && l.Term == 0
	})
	terms0 := make([]fencelock.Leader, len(got))
	for i, l := range got {
		terms0[i] = fencelock.Leader{Term: l.Term}
		if l.Term != 0 && (!strings.HasPrefix(l.Value, "candidate-") || l.LeaseID == "" || l.Since.IsZero()) {
			t.Errorf("observed leader %+v: want a candidate's value, lease ID and start", l)
		}
	}
	if !slices.Equal(terms0, want) {
		t.Errorf("observed %s, want %s", describe(got), describe(want))
	}
	stop()
	select {
	case <-w.closed:
	case <-time.After(10 * time.Second):
		t.Errorf("Observe channel not closed within 10s of its context's end")
	}
}

// killPubSub returns a func that kills every pub/sub connection of the
// given servers (CLIENT KILL TYPE pubsub).
func killPubSub(t *testing.T, servers ...*redistest.Server) func() {
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.Client(t))
	}
	return func() {
		for _, rdb := range rdbs {
			if err := rdb.ClientKillByFilter(context.Background(), "TYPE", "pubsub").Err(); err != nil {
				t.Errorf("CLIENT KILL TYPE pubsub: %v", err)
			}
		}
	}
}

func TestElection_race(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	var clients []*fencelock.Client
	for range 3 {
		clients = append(clients, newClient(t, srv.Client(t), &electionOptions))
	}
	electionRace(t, clients, 30, killPubSub(t, srv))
}

func TestElection_sentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	var clients []*fencelock.Client
	for range 3 {
		clients = append(clients, newClient(t, sentinelClient(t, g, nil), &electionOptions))
	}
	electionRace(t, clients, 15, killPubSub(t, g.Master(t)))
}

func TestElection_cluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	var clients []*fencelock.Client
	for range 3 {
		clients = append(clients, newClient(t, cl.Client(t, nil), &electionOptions))
	}
	electionRace(t, clients, 15, killPubSub(t, cl.MasterOf(t, "fencelock:{race}")))
}

func TestElection_quorum(t *testing.T) {
	t.Parallel()
	servers, _ := quorumNodes(t, 3)
	var clients []*fencelock.Client
	for range 3 {
		clients = append(clients, newQuorum(t, quorumClients(t, servers), &electionOptions))
	}
	electionRace(t, clients, 15, killPubSub(t, servers...))
}

// campaigned runs Campaign in the background and returns its result.
func campaigned(ctx context.Context, e *fencelock.Election, value string) <-chan campaignResult {
	done := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, value)
		done <- campaignResult{l, err, time.Now()}
	}()
	return done
}

type campaignResult struct {
	l   *fencelock.Lease
	err error
	at  time.Time
}

// probe counts a candidate's campaign attempts through Options.Hooks,
// so that a test can tell when it waits for the lock.
type probe struct {
	attempts atomic.Int32
	held     chan struct{} // one per attempt that found the lock held
}

// options returns opts with the probe's hook.
func (p *probe) options(opts fencelock.Options) *fencelock.Options {
	p.held = make(chan struct{}, 64)
	opts.Hooks = &fencelock.Hooks{AcquireAttempt: func(_ context.Context, info fencelock.AcquireAttemptInfo) {
		p.attempts.Add(1)
		if errors.Is(info.Err, fencelock.ErrNotAcquired) {
			select {
			case p.held <- struct{}{}:
			default:
			}
		}
	}}
	return &opts
}

// waiting waits until the candidate waits for the lock: its attempt
// before it subscribed to the wake-ups and its first after have found
// the lock held. It returns the number of attempts so far.
func (p *probe) waiting(tb testing.TB, ctx context.Context) int32 {
	tb.Helper()
	for range 2 {
		select {
		case <-p.held:
		case <-ctx.Done():
			tb.Fatalf("candidate not waiting: %v", context.Cause(ctx))
		}
	}
	return p.attempts.Load()
}

// Resign hands over at once: the waiting candidate, on another Client
// whose fallback retry and TTL are a minute away, leads after exactly one
// more attempt, woken by the resignation; an observer on a third Client
// sees the change as soon.
func TestElection_handoverAfterResign(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	slow := fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute}
	leader := newClient(t, srv.Client(t), &slow).Election("handover")
	var p probe
	waiter := newClient(t, srv.Client(t), p.options(slow)).Election("handover")
	w := observe(t, ctx, newClient(t, srv.Client(t), &slow).Election("handover"))

	first, err := leader.Campaign(ctx, "first")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	w.waitFor(t, 10*time.Second, "first leader", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == first.Token()
	})
	done := campaigned(ctx, waiter, "second")
	before := p.waiting(t, ctx)
	if err := leader.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiting Campaign error = %v, want the leadership after the resignation", r.err)
	}
	defer r.l.Release(ctx)
	if n := p.attempts.Load() - before; n != 1 {
		t.Errorf("waiting candidate made %d attempts after the resignation, want 1", n)
	}
	if r.l.Token() <= first.Token() {
		t.Errorf("new term %d, want > %d", r.l.Token(), first.Token())
	}
	if err := first.Context().Err(); err == nil {
		t.Errorf("resigned leadership's Context not done")
	}
	got := w.waitFor(t, 10*time.Second, "second leader", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == r.l.Token()
	})
	want := []fencelock.Leader{{}, {Term: first.Token(), Value: "first"}, {}, {Term: r.l.Token(), Value: "second"}}
	if len(got) != len(want) {
		t.Fatalf("observed %s, want %s", describe(got), describe(want))
	}
	for i := range want {
		if got[i].Term != want[i].Term || got[i].Value != want[i].Value {
			t.Errorf("observed %s, want %s", describe(got), describe(want))
			break
		}
	}
	if err := leader.Resign(ctx); err != nil {
		t.Errorf("second Resign error = %v, want nil (not leading)", err)
	}
}

// crashingClient returns a go-redis client through a proxy, to cut off
// as if its process had crashed: its renewals never arrive.
func crashingClient(t *testing.T, srv *redistest.Server) (*redis.Client, *redistest.Proxy) {
	p := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	return rdb, p
}

// A leader that crashes is replaced once its TTL runs out: the waiting
// candidate, whose fallback retry is a minute away, retries when the
// holder's TTL does, and so leads after at most two more attempts (one
// may find a renewal from before the crash).
func TestElection_handoverAfterCrash(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: time.Second, RetryInterval: time.Minute}
	crashing, p := crashingClient(t, srv)
	leader := newClient(t, crashing, &opts).Election("crash")
	var pr probe
	waiter := newClient(t, srv.Client(t), pr.options(opts)).Election("crash")
	w := observe(t, ctx, newClient(t, srv.Client(t), &opts).Election("crash"))

	old, err := leader.Campaign(ctx, "crashing")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	done := campaigned(ctx, waiter, "next")
	before := pr.waiting(t, ctx)
	p.Partition()
	r := <-done
	if r.err != nil {
		t.Fatalf("waiting Campaign error = %v, want the leadership after the crash", r.err)
	}
	defer r.l.Release(ctx)
	if n := pr.attempts.Load() - before; n > 2 {
		t.Errorf("waiting candidate made %d attempts after the crash, want at most 2 (at the holder's TTL)", n)
	}
	if r.l.Token() <= old.Token() {
		t.Errorf("new term %d, want > %d", r.l.Token(), old.Token())
	}
	<-old.Context().Done()
	if cause := context.Cause(old.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("crashed leadership's cause = %v, want ErrLeaseLost", cause)
	}
	got := w.waitFor(t, 10*time.Second, "next leader", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == r.l.Token() && l.Value == "next"
	})
	// The observer saw the crashed term, and then, depending on who read
	// first, the end of it or straight away the next.
	if got[1].Term != old.Token() {
		t.Errorf("observed %s, want the crashed term %d second", describe(got), old.Token())
	}
}

// An observer sees a leadership end when its lock expires, with no
// resignation to tell it: it reads again when the leader's TTL runs out.
// The leader's record expires with its lock, never after it.
func TestElection_observeExpiry(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 500 * time.Millisecond, RetryInterval: time.Minute}
	crashing, p := crashingClient(t, srv)
	leader := newClient(t, crashing, &opts).Election("expiry")
	w := observe(t, ctx, newClient(t, rdb, &opts).Election("expiry"))
	l, err := leader.Campaign(ctx, "crashing")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	w.waitFor(t, 10*time.Second, "the leader", func(got []fencelock.Leader) bool {
		l0, ok := last(got)
		return ok && l0.Term == l.Token()
	})
	p.Partition()
	// Until the lock is gone, the record is there; never without it.
	lock, record := "fencelock:{expiry}", "fencelock:{expiry}:leader"
	redistest.WaitFor(t, 10*time.Second, "the lock to expire", func() bool {
		var lockN, recordN *redis.IntCmd
		if _, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			lockN, recordN = p.Exists(ctx, lock), p.Exists(ctx, record)
			return nil
		}); err != nil {
			t.Fatalf("EXISTS: %v", err)
		}
		if lockN.Val() == 0 && recordN.Val() != 0 {
			t.Fatalf("the leader record outlived its lock")
		}
		if lockN.Val() != 0 && recordN.Val() == 0 {
			t.Fatalf("the leader record expired before its lock")
		}
		return lockN.Val() == 0
	})
	got := w.waitFor(t, 10*time.Second, "the leadership's end", func(got []fencelock.Leader) bool {
		l0, ok := last(got)
		return ok && l0.Term == 0 && len(got) == 3
	})
	if got[1].Term != l.Token() {
		t.Errorf("observed %s, want none, %d, none", describe(got), l.Token())
	}
	if _, err := newClient(t, rdb, &opts).Election("expiry").Leader(ctx); !errors.Is(err, fencelock.ErrNoLeader) {
		t.Errorf("Leader() after expiry error = %v, want ErrNoLeader", err)
	}
}

// An observer whose connection is cut while the leadership changes sees
// every change when it reconnects, in order: the scripts keep a history,
// and the re-established subscription wakes it to read what it missed.
// The publishes it missed here are lost for certain: its connections are
// partitioned, then reset, before they heal.
func TestElection_observeReconnect(t *testing.T) {
	skipOnTransport(t, "rueidis finds a connection reset while idle only when it next writes: the read after the resubscription fails, and Observe retries at RetryInterval")
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// A minute's TTL and fallback: only the reconnect can wake the
	// observer in time.
	opts := fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute}
	p := redistest.NewProxy(t, srv.Addr())
	ordb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: p.Addr(), MaxRetries: -1, ReadTimeout: time.Second})
	t.Cleanup(func() { ordb.Close() })
	w := observe(t, ctx, newClient(t, ordb, &opts).Election("reconnect"))
	c := newClient(t, srv.Client(t), &opts)
	a, b := c.Election("reconnect"), c.Election("reconnect")

	la, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	w.waitFor(t, 10*time.Second, "a to lead", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == la.Token()
	})

	p.Partition()
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	lb, err := b.Campaign(ctx, "b")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	if err := b.Proclaim(ctx, "b2"); err != nil {
		t.Fatalf("Proclaim error = %v", err)
	}
	if err := b.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	la2, err := a.Campaign(ctx, "a again")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	defer a.Resign(ctx)
	p.Reset()
	p.Heal()

	got := w.waitFor(t, 20*time.Second, "the changes made while disconnected", func(got []fencelock.Leader) bool {
		l, ok := last(got)
		return ok && l.Term == la2.Token()
	})
	want := []fencelock.Leader{{}, {Term: la.Token(), Value: "a"}, {}, {Term: lb.Token(), Value: "b"},
		{Term: lb.Token(), Value: "b2"}, {}, {Term: la2.Token(), Value: "a again"}}
	if !sameChanges(got, want) {
		t.Errorf("observed %s, want %s", describe(got), describe(want))
	}
}

// sameChanges compares changes by term and value.
func sameChanges(got, want []fencelock.Leader) bool {
	return slices.EqualFunc(got, want, func(g, w fencelock.Leader) bool { return g.Term == w.Term && g.Value == w.Value })
}

// Proclaim changes what the leader announces, for Leader and observers,
// with the same term; only the leader can. Campaign again while leading
// returns the same lease, proclaiming a new value.
func TestElection_Proclaim(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := newClient(t, rdb, nil)
	e := c.Election("proclaim")
	if err := e.Proclaim(ctx, "early"); !errors.Is(err, fencelock.ErrNotLeader) {
		t.Errorf("Proclaim before Campaign error = %v, want ErrNotLeader", err)
	}
	w := observe(t, ctx, c.Election("proclaim"))
	l, err := e.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	if err := e.Proclaim(ctx, "10.0.0.2:8080"); err != nil {
		t.Fatalf("Proclaim error = %v", err)
	}
	got, err := c.Election("proclaim").Leader(ctx)
	if err != nil || got.Value != "10.0.0.2:8080" || got.Term != l.Token() || got.LeaseID != l.ID() {
		t.Errorf("Leader() after Proclaim = %+v, %v; want value 10.0.0.2:8080, term %d, lease %s", got, err, l.Token(), l.ID())
	}
	if again, err := e.Campaign(ctx, "10.0.0.2:8080"); err != nil || again != l {
		t.Errorf("Campaign while leading = %p, %v; want the same lease %p", again, err, l)
	}
	if again, err := e.Campaign(ctx, "10.0.0.3:8080"); err != nil || again != l {
		t.Errorf("Campaign while leading, new value = %p, %v; want the same lease %p", again, err, l)
	}
	want := []fencelock.Leader{{}, {Term: l.Token(), Value: "10.0.0.1:8080"}, {Term: l.Token(), Value: "10.0.0.2:8080"}, {Term: l.Token(), Value: "10.0.0.3:8080"}}
	if got := w.waitFor(t, 10*time.Second, "the proclaimed values", func(got []fencelock.Leader) bool { return len(got) >= len(want) }); !sameChanges(got, want) {
		t.Errorf("observed %s, want %s", describe(got), describe(want))
	}
	if got, _ := c.Election("proclaim").Leader(ctx); got.Since != w.changes()[1].Since {
		t.Errorf("Leader().Since = %v after Proclaim, want the term's start %v", got.Since, w.changes()[1].Since)
	}

	// Someone deletes the lock: the next Proclaim finds the leadership
	// lost, and ends the lease.
	rdb.Del(ctx, "fencelock:{proclaim}")
	err = e.Proclaim(ctx, "late")
	if !errors.Is(err, fencelock.ErrNotLeader) || !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Proclaim after the lock was deleted error = %v, want ErrNotLeader and ErrLeaseLost", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("lease cause after a lost Proclaim = %v, want ErrLeaseLost", cause)
	}
	if v := rdb.HGet(ctx, "fencelock:{proclaim}:leader", "value").Val(); v == "late" {
		t.Errorf("a lost leader's Proclaim was written")
	}
	if err := e.Resign(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Errorf("Resign of a lost leadership error = %v, want ErrLeaseLost", err)
	}
	if err := e.Proclaim(ctx, "after"); !errors.Is(err, fencelock.ErrNotLeader) {
		t.Errorf("Proclaim after Resign error = %v, want ErrNotLeader", err)
	}
}

// A lease taken with Acquire on an election's name keeps candidates out
// but is not a leader; Campaign gives up when its context ends.
func TestElection_lockHeldByLease(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	c := newClient(t, rdb, nil)
	l, err := c.TryAcquire(ctx, "held")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	defer l.Release(ctx)
	if _, err := c.Election("held").Leader(ctx); !errors.Is(err, fencelock.ErrNoLeader) {
		t.Errorf("Leader() while a plain lease holds error = %v, want ErrNoLeader", err)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, 200*time.Millisecond, errors.New("gave up"))
	defer cancel()
	_, err = c.Election("held").Campaign(cctx, "x")
	if !errors.Is(err, fencelock.ErrNotAcquired) || !errors.Is(err, context.Cause(cctx)) {
		t.Errorf("Campaign with the lock held error = %v, want ErrNotAcquired and the context's cause", err)
	}
	if n := rdb.Exists(ctx, "fencelock:{held}:leader").Val(); n != 0 {
		t.Errorf("a failed Campaign wrote a leader record")
	}
}

// Bad input gets a clear error and sends nothing.
func TestElection_badInput(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	rec := &recorder{}
	rdb.AddHook(rec)
	ctx := t.Context()
	c := newClient(t, rdb, nil)

	for _, v := range []string{"", strings.Repeat("v", fencelock.MaxValueLen+1), "bad \xff utf-8"} {
		if _, err := c.Election("ok").Campaign(ctx, v); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Campaign(%.20q) error = %v, want ErrInvalid", v, err)
		}
		if err := c.Election("ok").Proclaim(ctx, v); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Proclaim(%.20q) error = %v, want ErrInvalid", v, err)
		}
	}
	for _, name := range []string{"", string(make([]byte, fencelock.MaxNameLen+1)), "a{b", "a}b", "tab\there", "naïve", "\x7f"} {
		e := c.Election(name)
		if _, err := e.Campaign(ctx, "v"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Campaign on election %q error = %v, want ErrInvalid", name, err)
		}
		if err := e.Proclaim(ctx, "v"); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Proclaim on election %q error = %v, want ErrInvalid", name, err)
		}
		if err := e.Resign(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Resign on election %q error = %v, want ErrInvalid", name, err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, fencelock.ErrInvalid) {
			t.Errorf("Leader on election %q error = %v, want ErrInvalid", name, err)
		}
		if ch, err := e.Observe(ctx); !errors.Is(err, fencelock.ErrInvalid) || ch != nil {
			t.Errorf("Observe on election %q = %v, %v; want nil, ErrInvalid", name, ch, err)
		}
	}
	bad := newClient(t, rdb, &fencelock.Options{TTL: time.Millisecond}).Election("ok")
	if _, err := bad.Campaign(ctx, "v"); !errors.Is(err, fencelock.ErrInvalid) {
		t.Errorf("Campaign with invalid Options error = %v, want ErrInvalid", err)
	}
	if _, err := bad.Leader(ctx); !errors.Is(err, fencelock.ErrInvalid) {
		t.Errorf("Leader with invalid Options error = %v, want ErrInvalid", err)
	}
	if _, err := bad.Observe(ctx); !errors.Is(err, fencelock.ErrInvalid) {
		t.Errorf("Observe with invalid Options error = %v, want ErrInvalid", err)
	}
	if n, names := rec.reset(); n != 0 {
		t.Errorf("bad input sent %d commands %v, want none", n, names)
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Errorf("bad input wrote %d keys, want none", n)
	}
	// The longest value is fine.
	e := c.Election("ok")
	if _, err := e.Campaign(ctx, strings.Repeat("v", fencelock.MaxValueLen)); err != nil {
		t.Errorf("Campaign with a %d-byte value error = %v", fencelock.MaxValueLen, err)
	}
	e.Resign(ctx)
}

// A lone leader's Resign wakes its observers at once: no successor's
// election, nor the expiry timer (a TTL away), is needed for them to see
// that nobody leads.
func TestElection_observeLoneResign(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	slow := fencelock.Options{TTL: 20 * time.Second, RetryInterval: 20 * time.Second}
	leader := newClient(t, srv.Client(t), &slow).Election("lone")
	w := observe(t, ctx, newClient(t, srv.Client(t), &slow).Election("lone"))
	l, err := leader.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	w.waitFor(t, 10*time.Second, "the leader", func(got []fencelock.Leader) bool {
		c, ok := last(got)
		return ok && c.Term == l.Token()
	})
	start := time.Now()
	if err := leader.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	// Generous for a busy machine, and far below the 20 s TTL at which
	// the expiry timer would read again.
	const bound = 3 * time.Second
	got := w.waitFor(t, bound, "nobody leading after Resign", func(got []fencelock.Leader) bool {
		c, ok := last(got)
		return ok && c.Term == 0 && len(got) > 2
	})
	took := time.Since(start)
	if took > bound {
		t.Errorf("observer saw the resignation %v after Resign, want within %v", took, bound)
	}
	t.Logf("observer saw the resignation %v after Resign", took)
	want := []fencelock.Leader{{}, {Term: l.Token(), Value: "a"}, {}}
	if !sameChanges(got, want) {
		t.Errorf("observed %s, want %s", describe(got), describe(want))
	}
}

// On a quorum, one node's leader record is not a leader: Leader and
// Observe decide by the Client's majority.
func TestElection_quorumOneNodeRecord(t *testing.T) {
	t.Parallel()
	servers, nodes := quorumNodes(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 10 * time.Second, RetryInterval: 100 * time.Millisecond}
	// A leader on node 0 alone, as a single-node Client elects one.
	lone, err := newClient(t, quorumClients(t, servers)[0], &opts).Election("one").Campaign(ctx, "lone")
	if err != nil {
		t.Fatalf("Campaign on node 0 error = %v", err)
	}
	defer lone.Release(ctx)
	e := newQuorum(t, nodes, &opts).Election("one")
	for i := range 4 {
		if got, err := e.Leader(ctx); !errors.Is(err, fencelock.ErrNoLeader) {
			t.Fatalf("quorum Leader() #%d with a record on one node of three = %+v, %v; want ErrNoLeader", i, got, err)
		}
	}
	w := observe(t, ctx, e)
	if got := w.changes(); got[0].Term != 0 {
		t.Errorf("Observe's first change = %s, want none", describe(got[:1]))
	}
}

// A quorum Campaign is elected only when a majority of nodes hold its
// leader record: with the record refused by two nodes of three, it does
// not lead, and nobody does.
func TestElection_quorumRecordOnMinority(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	servers, _ := quorumNodes(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 5 * time.Second, RetryInterval: 100 * time.Millisecond}
	// Node 1 refuses the record at once, node 2 only when its request
	// times out, so the round tallies node 0's record before it ends:
	// two refusals at once could end it before node 0's yes came in, and
	// a rule that elects on one record would go unseen.
	refuse, late := &refuseAnnounce{kind: "elected"}, &refuseAnnounce{kind: "elected", late: true}
	refuse.on.Store(true)
	late.on.Store(true)
	nodes := quorumClients(t, servers)
	nodes[1].AddHook(refuse)
	nodes[2].AddHook(late)
	e := newQuorum(t, nodes, &opts).Election("minority")
	cctx, ccancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer ccancel()
	if l, err := e.Campaign(cctx, "a"); !errors.Is(err, fencelock.ErrNotAcquired) || l != nil {
		t.Fatalf("Campaign with the record refused by two nodes of three = %v, %v; want nil, ErrNotAcquired", l, err)
	}
	reader := newQuorum(t, quorumClients(t, servers), &opts).Election("minority")
	if got, err := reader.Leader(ctx); !errors.Is(err, fencelock.ErrNoLeader) {
		t.Errorf("Leader() after the failed Campaign = %+v, %v; want ErrNoLeader", got, err)
	}
	refuse.on.Store(false)
	late.on.Store(false)
	l, err := e.Campaign(ctx, "b")
	if err != nil {
		t.Fatalf("Campaign with every node answering error = %v", err)
	}
	defer l.Release(ctx)
	if got, err := reader.Leader(ctx); err != nil || got.Term != l.Token() || got.Value != "b" {
		t.Errorf("Leader() = %+v, %v; want b, term %d", got, err, l.Token())
	}
}

// The election's history keeps its length bound and its retention: the
// last 64 changes, expiring TokenRetention (plus a TTL) after the last.
func TestElection_historyBounds(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := fencelock.Options{TTL: 2 * time.Second, TokenRetention: time.Minute}
	rdb := srv.Client(t)
	e := newClient(t, rdb, &opts).Election("hist")
	l, err := e.Campaign(ctx, "v0")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	defer l.Release(ctx)
	const changes = 70
	for i := 1; i < changes; i++ {
		if err := e.Proclaim(ctx, fmt.Sprintf("v%d", i)); err != nil {
			t.Fatalf("Proclaim #%d error = %v", i, err)
		}
	}
	key := "fencelock:{hist}:history" // the default Prefix
	if n, err := rdb.XLen(ctx, key).Result(); err != nil || n != 64 {
		t.Errorf("XLEN %s after %d changes = %d, %v; want 64", key, changes, n, err)
	}
	ttl, err := rdb.PTTL(ctx, key).Result()
	if max := opts.TokenRetention + opts.TTL; err != nil || ttl <= 0 || ttl > max {
		t.Errorf("PTTL %s = %v, %v; want in (0, %v]", key, ttl, err, max)
	}
	if err := e.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	if n, err := rdb.XLen(ctx, key).Result(); err != nil || n != 64 {
		t.Errorf("XLEN %s after Resign = %d, %v; want 64", key, n, err)
	}
}

// TryCampaign makes one attempt: while another candidate leads it fails at
// once with ErrNotAcquired, having sent one attempt and proclaimed
// nothing; once the leader resigns it leads, as Campaign would.
func TestElection_TryCampaign(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	var attempts atomic.Int32
	opts := electionOptions
	opts.Hooks = &fencelock.Hooks{AcquireAttempt: func(context.Context, fencelock.AcquireAttemptInfo) { attempts.Add(1) }}
	c := newClient(t, rdb, &opts)
	a, b := c.Election("try"), c.Election("try")
	la, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatalf("Campaign error = %v", err)
	}
	attempts.Store(0)
	// No deadline: a TryCampaign that waited would never return.
	if l, err := b.TryCampaign(ctx, "b"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryCampaign while a leads = %v, %v, want ErrNotAcquired", l, err)
	}
	if got := attempts.Load(); got != 1 {
		t.Errorf("TryCampaign while a leads made %d attempts, want 1", got)
	}
	if got, err := b.Leader(ctx); err != nil || got.Term != la.Token() || got.Value != "a" {
		t.Errorf("Leader after the failed TryCampaign = %+v, %v, want a's term %d and value", got, err, la.Token())
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign error = %v", err)
	}
	lb, err := b.TryCampaign(ctx, "b")
	if err != nil {
		t.Fatalf("TryCampaign after the resignation: error = %v, want nil", err)
	}
	defer b.Resign(ctx)
	if lb.Token() <= la.Token() {
		t.Errorf("term %d, want > the previous term %d", lb.Token(), la.Token())
	}
	if got, err := a.Leader(ctx); err != nil || got.Term != lb.Token() || got.Value != "b" {
		t.Errorf("Leader = %+v, %v, want b's term %d and value", got, err, lb.Token())
	}
}
