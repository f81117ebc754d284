// Package quorum keeps each lock on a majority of independent nodes, in
// the manner of Redlock, with fencing tokens that stay increasing while
// any minority of nodes fails (the root package's NewQuorum documents
// the protocol). It owns the one fan-out (Ask), the one tally and its
// one majority rule (Decide), the one vote (Vote), and the rounds of the
// protocol built on them: acquire with its write-back, renew, release,
// and a round of any step (Each). Every round sends each node the step a
// single deployment would run (package node), so a feature is a
// parameter of node's steps, never a round of its own.
package quorum

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/script"
)

// A Quorum is a deployment of independent nodes.
type Quorum struct {
	nodes []*node.Node
	cfg   *node.Config

	mu sync.Mutex
	// inflight holds, by acquisition attempt, a channel per node that is
	// closed when the attempt's request to that node has ended. A later
	// request of the attempt to that node waits for it: sent on another
	// connection, it could otherwise overtake the acquire request, so that
	// a release leaves the lock behind, or a write-back or the leader's
	// record is refused.
	inflight map[attempt][]chan struct{}
}

// attempt names an acquisition attempt: its owner value is its own, and
// a permit's attempts at several slots each have their lock key.
type attempt struct{ owner, lock string }

func key(r *node.Ref) attempt { return attempt{r.Owner, r.Lock} }

// New returns the quorum of nodes, for a Client with cfg.
func New(nodes []*node.Node, cfg *node.Config) *Quorum {
	return &Quorum{nodes: nodes, cfg: cfg}
}

// WithConfig returns a quorum of q's nodes for a Client with cfg. Its
// record of attempts in flight is its own: a lease renews and releases
// through the deployment that acquired it.
func (q *Quorum) WithConfig(cfg *node.Config) *Quorum {
	v := &Quorum{cfg: cfg, nodes: make([]*node.Node, 0, len(q.nodes))}
	for _, n := range q.nodes {
		v.nodes = append(v.nodes, n.WithConfig(cfg))
	}
	return v
}

// Members returns the nodes.
func (q *Quorum) Members() []*node.Node { return q.nodes }

// Config returns the configuration q serves.
func (q *Quorum) Config() *node.Config { return q.cfg }

// A reply is one node's answer in a round.
type reply struct {
	token int64         // acquire: the issued token, or 0
	held  time.Duration // acquire: the other holder's TTL
	ok    bool          // acquired, accepted, renewed, deleted
	err   error
}

// round sends f to every node at once and tallies the replies until the
// majority question is decided, or until ctx is done. The requests run
// detached from ctx for up to timeout, and no longer than NodeTimeout,
// so that the nodes that have not answered yet still get them, and a node
// that answers nothing fails the round's request soon (Redlock's timeout,
// small against the TTL): the round is decided without it. each, if not
// nil, sees every reply tallied.
func (q *Quorum) round(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int, n *node.Node) reply, each func(i int, r reply)) Tally {
	var t Tally
	err := Ask(ctx, q.nodes, min(timeout, q.cfg.NodeTimeout), true, f, func(i int, r reply) bool {
		if each != nil {
			each(i, r)
		}
		t.add(i, r.ok, r.err)
		return t.over(len(q.nodes))
	})
	if err != nil {
		t.Errs = append(t.Errs, err)
	}
	return t
}

// Each sends f to every node in a round, decided as renew and release
// are (Tally.Outcome; what names what f does, for ErrNoQuorum).
func (q *Quorum) Each(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context, i int, n *node.Node) (bool, error)) (bool, error) {
	t := q.round(ctx, timeout, func(ctx context.Context, i int, n *node.Node) reply {
		ok, err := f(ctx, i, n)
		return reply{ok: ok, err: err}
	}, nil)
	return t.Outcome(len(q.nodes), what)
}

// Renew renews r's lock on every node by its protocol; it needs a
// majority. Each node's renewal follows the acquisition's request to that
// node: a renewal that overtook it would find no lock there and count it
// against the lease.
func (q *Quorum) Renew(ctx context.Context, r *node.Ref) (bool, error) {
	return q.Each(ctx, "renewed", q.cfg.TTL-q.cfg.Drift, func(ctx context.Context, i int, n *node.Node) (bool, error) {
		if err := q.AfterAcquire(ctx, i, r); err != nil {
			return false, err
		}
		return n.Renew(ctx, r)
	})
}

// Release releases r's lock on every node by its protocol, each after the
// acquisition's request to that node has ended; it reports whether a
// majority deleted it.
func (q *Quorum) Release(ctx context.Context, r *node.Ref) (bool, error) {
	return q.Each(ctx, "released", q.cfg.TTL, q.releaseNode(r))
}

func (q *Quorum) releaseNode(r *node.Ref) func(ctx context.Context, i int, n *node.Node) (bool, error) {
	return func(ctx context.Context, i int, n *node.Node) (bool, error) {
		if err := q.AfterAcquire(ctx, i, r); err != nil {
			return false, err
		}
		return n.Release(ctx, r)
	}
}

// releaseAll releases r's lock on every node, best effort, after a failed
// acquisition. It waits for a majority of nodes to answer, not for nodes
// that hang, and not past ctx's end: the requests, detached from ctx,
// finish in the background.
func (q *Quorum) releaseAll(ctx context.Context, r *node.Ref) {
	q.Each(ctx, "released", q.cfg.TTL, q.releaseNode(r))
}

// AfterAcquire waits until r's acquire request to node i has ended, or
// ctx has. Every later request of the attempt to that node waits for it:
// sent on another connection, it could overtake the acquire request and
// find no lock there.
func (q *Quorum) AfterAcquire(ctx context.Context, i int, r *node.Ref) error {
	select {
	case <-q.acquired(i, r):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// acquired returns a channel closed once r's acquire request to node i
// has ended.
func (q *Quorum) acquired(i int, r *node.Ref) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done := q.inflight[key(r)]; done != nil {
		return done[i]
	}
	return closed
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// proposalLead is how far ahead of the client's clock a quorum
// acquisition proposes its token: more than a request takes to reach the
// nodes, so that nodes on clocks that agree with the client's (within the
// 250 ms the acquire script allows) issue the proposal as it is.
const proposalLead = 50 * time.Millisecond

// Acquire takes r's lock on a majority of the nodes and returns its token,
// or 0 and how long to wait. A permit's slot is chosen first (see
// acquirePermit); a leadership is announced after the lock is taken.
func (q *Quorum) Acquire(ctx context.Context, r *node.Ref) (int64, time.Duration, error) {
	start := time.Now()
	if r.Sem != nil && r.Slot < 0 {
		return q.acquirePermit(ctx, r, start)
	}
	return q.acquire(ctx, r, start)
}

// acquire takes r's lock, on the slot r names for a permit, within the
// validity that started at start.
//
// Every node is asked to take the lock and issue a token a little ahead
// of the client's clock; the greatest token issued is the lease's. The
// nodes that issued it have accepted it; it is written back to the others
// when fewer than a majority did. Then a leadership's record is written
// in a round of its own: a quorum's term is chosen after its first round,
// and the record can only follow.
func (q *Quorum) acquire(ctx context.Context, r *node.Ref, start time.Time) (int64, time.Duration, error) {
	validity := q.cfg.TTL - q.cfg.Drift
	done := make([]chan struct{}, len(q.nodes))
	for i := range done {
		done[i] = make(chan struct{})
	}
	k := key(r)
	q.mu.Lock()
	if q.inflight == nil {
		q.inflight = map[attempt][]chan struct{}{}
	}
	q.inflight[k] = done
	q.mu.Unlock()
	var left atomic.Int32
	left.Store(int32(len(q.nodes)))

	// Nodes whose clocks agree with the client's, and whose counters are
	// behind, issue the proposal as it is, and then need no write-back.
	r.Proposal = time.Now().Add(proposalLead).UnixMicro()
	p := r.Proto.Quorum()
	issued := make([]int64, len(q.nodes)) // by the replies tallied
	// answered[i] is node i's token, 0 for none, written before done[i]
	// is closed: a node whose reply came after the round was decided may
	// have issued the lease's token too, and then needs no write-back.
	answered := make([]int64, len(q.nodes))
	var top int64
	var held time.Duration
	t := q.round(ctx, validity, func(ctx context.Context, i int, n *node.Node) reply {
		token, held, err := n.Take(ctx, r, p)
		answered[i] = token
		close(done[i])
		if left.Add(-1) == 0 {
			q.mu.Lock()
			// A later attempt of the same acquisition may have put its
			// own requests there.
			if d := q.inflight[k]; len(d) > 0 && d[0] == done[0] {
				delete(q.inflight, k)
			}
			q.mu.Unlock()
		}
		return reply{token: token, held: held, ok: token > 0, err: err}
	}, func(i int, r reply) {
		if r.ok {
			top = max(top, r.token)
			issued[i] = r.token
		} else if r.err == nil && (held == 0 || r.held < held) {
			held = r.held // wait for the first holder's lock to expire
		}
	})
	if ok, err := q.taken(ctx, r, t, "locked"); !ok {
		return 0, held, err
	}

	// The greatest token issued: the nodes that issued it have accepted
	// it, the others must, if it is greater than they store.
	token, accepted := top, 0
	for _, v := range issued {
		if v == token {
			accepted++
		}
	}
	if accepted >= Majority(len(q.nodes)) {
		// The other nodes get the token too, not waited for, as a
		// write-back round's slow nodes do: a token on more nodes than a
		// bare majority survives more of them losing their data.
		for i, n := range q.nodes {
			if issued[i] != token {
				go q.writeBack(ctx, i, n, r, token, answered)
			}
		}
	} else {
		wb := q.round(ctx, validity-time.Since(start), func(ctx context.Context, i int, n *node.Node) reply {
			if issued[i] == token {
				return reply{ok: true}
			}
			if err := q.AfterAcquire(ctx, i, r); err != nil {
				return reply{err: err}
			}
			if answered[i] == token {
				return reply{ok: true} // issued it, too late to be tallied
			}
			v, err := n.Int(ctx, script.Writeback, writebackArgs(q.cfg, r, token))
			return reply{ok: v == 1, err: err}
		}, nil)
		// Refused: a concurrent acquisition holds a greater token, or the
		// lock, on enough nodes.
		if ok, err := q.taken(ctx, r, wb, "token written"); !ok {
			return 0, q.cfg.Retry, err
		}
	}

	if r.Lead != nil {
		at := q.round(ctx, validity-time.Since(start), func(ctx context.Context, i int, n *node.Node) reply {
			if err := q.AfterAcquire(ctx, i, r); err != nil {
				return reply{err: err}
			}
			v, err := n.Int(ctx, script.Announce, node.AnnounceArgs(q.cfg, r, "elected", token, 0, r.Lead.Value, n.Publish(ctx, r.Channel)))
			return reply{ok: v == 1, err: err}
		}, nil)
		// Refused: lost to another campaign meanwhile.
		if ok, err := q.taken(ctx, r, at, "announced"); !ok {
			return 0, q.cfg.Retry, err
		}
	}
	return q.inTime(ctx, r, start, token)
}

// taken reports whether a round of an acquisition, tallied t, took what
// it asked on a majority (a Taking question); if not, it releases every
// node, and returns ErrNoQuorum (what: what the yes answers did) if
// errors left the round open.
func (q *Quorum) taken(ctx context.Context, r *node.Ref, t Tally, what string) (bool, error) {
	switch t.Decide(len(q.nodes), Taking) {
	case MajorityYes:
		return true, nil
	case Undecided:
		q.releaseAll(ctx, r)
		return false, t.NoQuorum(len(q.nodes), what)
	}
	q.releaseAll(ctx, r)
	return false, nil
}

// writeBack raises node i's counter to token, best effort, in the
// background of the acquisition, for up to a TTL, unless node i's acquire
// reply (answered[i], read once it has ended) was that token: the node
// issued it, and stores it already.
func (q *Quorum) writeBack(ctx context.Context, i int, n *node.Node, r *node.Ref, token int64, answered []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.TTL)
	defer cancel()
	if q.AfterAcquire(ctx, i, r) == nil && answered[i] != token {
		n.Int(ctx, script.Writeback, writebackArgs(q.cfg, r, token))
	}
}

// writebackArgs returns the write-back of token for r's attempt: a node
// accepts it only where that attempt holds the lock, so that a node that
// restarted empty, and lost the lock, cannot accept a token a second time
// (lua/quorum_writeback.lua). The counter, the first key, routes it on a
// Cluster: same slot as the lock.
func writebackArgs(c *node.Config, r *node.Ref, token int64) []any {
	return append(script.Writeback.Args("2", 5), r.Token, r.LockArg, token, c.RetentionArg, &r.Owner)
}

// inTime returns token, acquired at start, unless the acquisition took
// longer than its validity: then it releases every node.
func (q *Quorum) inTime(ctx context.Context, r *node.Ref, start time.Time, token int64) (int64, time.Duration, error) {
	validity := q.cfg.TTL - q.cfg.Drift
	if elapsed := time.Since(start); elapsed >= validity {
		q.releaseAll(ctx, r)
		return 0, 0, fmt.Errorf("%w: acquiring on a majority took %v, more than the validity %v (TTL less drift)",
			errs.ErrNotAcquired, elapsed, validity)
	}
	return token, 0, nil
}

// acquirePermit takes a permit of r's semaphore. The slot is chosen by the
// client, not by each node: nodes that each chose their own first free
// slot could disagree, and a permit is only safe when a majority holds
// the same slot. So a read round finds the slots that no lease holds, and
// no lock-delay keeps, on a majority, and they are acquired one after the
// other as a lock is, through the quorum's acquisition round (proposal,
// write-back, validity), which alone decides: a slot taken meanwhile by
// another client fails its round like a lock held, and the next one is
// tried, within the attempt's one validity. Concurrent attempts start at
// a random free slot, so that they do not all contend for the same one.
// The attempt fails as not acquired only when every slot was held or
// refused.
func (q *Quorum) acquirePermit(ctx context.Context, r *node.Ref, start time.Time) (int64, time.Duration, error) {
	free, wait, err := q.freeSlots(ctx, r.Sem)
	if len(free) == 0 {
		return 0, wait, err
	}
	from := rand.N(len(free))
	for j := range free {
		// Each slot's attempt is a copy: the release rounds of a failed
		// one may outlive it, on its own keys.
		a := *r
		a.UseSlot(free[(from+j)%len(free)])
		token, held, err := q.acquire(ctx, &a, start)
		switch {
		case err != nil:
			return 0, 0, err
		case token > 0:
			*r = a
			return token, 0, nil
		case held > 0 && (wait == 0 || held < wait):
			wait = held
		}
		if time.Since(start) >= q.cfg.TTL-q.cfg.Drift {
			break
		}
	}
	return 0, wait, nil
}

// freeSlots reads every slot of s on every node (lua/slots.lua), in a
// round bounded by NodeTimeout that ends as soon as the answers decide
// every slot, and returns the slots held by no lease and kept by no
// lock-delay on a majority, and the shortest wait for one of the others.
// The error, wrapping ErrNoQuorum, says why slots could not be decided,
// when none was found free; wrapping ErrInvalid, that a majority of the
// nodes record another number of permits than s has (lua/permit.lua).
func (q *Quorum) freeSlots(ctx context.Context, s *node.Semaphore) (free []int, wait time.Duration, err error) {
	views := make([][]node.View, len(q.nodes)) // by node, then slot
	for i := range views {
		views[i] = node.Failed(s.Permits, errPending)
	}
	permits := make([]int, len(q.nodes)) // by node, 0 for none recorded
	slot := func(j int) []node.View {
		vs := make([]node.View, len(q.nodes))
		for i := range vs {
			vs[i] = views[i][j]
		}
		return vs
	}
	args := s.SlotsArgs()
	type read struct {
		views   []node.View
		permits int
	}
	rerr := Ask(ctx, q.nodes, q.cfg.NodeTimeout, true, func(ctx context.Context, i int, n *node.Node) read {
		reply, err := n.Eval(ctx, script.Slots, append([]any(nil), args...))
		if err != nil {
			return read{views: node.Failed(s.Permits, err)}
		}
		vs, permits := s.ParseSlots(reply)
		return read{vs, permits}
	}, func(i int, r read) bool {
		views[i], permits[i] = r.views, r.permits
		for j := range s.Permits {
			if _, d := Holder(slot(j)); d == Undecided {
				return false
			}
		}
		return true
	})
	other, t := Vote(len(q.nodes), func(i int) (int, bool, error) {
		return permits[i], permits[i] != 0 && permits[i] != s.Permits, views[i][0].Err
	})
	if t.Yes >= Majority(len(q.nodes)) {
		return nil, 0, s.Mismatch(other)
	}
	t = Tally{}
	for j := range s.Permits {
		vs := slot(j)
		h, d := Holder(vs)
		switch {
		case d == Undecided:
			for i, v := range vs {
				if v.Err != nil {
					t.add(i, false, fmt.Errorf("slot %d: %w", j, v.Err))
				}
			}
		case d == MajorityYes:
			if h.TTL >= 0 && (wait == 0 || h.TTL < wait) {
				wait = h.TTL
			}
		case h.Delay > 0: // a lock-delay keeps it from a majority
			if wait == 0 || h.Delay < wait {
				wait = h.Delay
			}
		default:
			free = append(free, j)
		}
	}
	if rerr != nil {
		t.Errs = append(t.Errs, rerr)
	}
	if len(free) == 0 && len(t.Errs) > 0 {
		return nil, 0, t.NoQuorum(len(q.nodes), "slots read")
	}
	return free, wait, nil
}

// errPending marks the views of nodes that have not answered yet.
var errPending = fmt.Errorf("%w: no answer yet", errs.ErrNoQuorum)

// delayed reports whether lock-delays keep a free slot on so many of
// its nodes (views) that fewer than a majority can grant it, and until
// when: until enough of the delays have run out that a majority can.
// Nodes not heard from are taken to grant it.
func delayed(vs []node.View) (time.Duration, bool) {
	var delays []time.Duration
	for _, v := range vs {
		if v.Err == nil && v.DelayedBy != "" {
			delays = append(delays, max(v.Delay, 0))
		}
	}
	grant := len(vs) - len(delays)
	maj := Majority(len(vs))
	if grant >= maj {
		return 0, false
	}
	slices.Sort(delays)
	return delays[maj-grant-1], true
}

// Watch watches r's lock on every node (see node.Node.Watch): lost is
// called once, when so many nodes have seen the lock gone that fewer than
// a majority can still hold it.
//
// Each node is watched once the acquisition's request to it has ended: a
// watch armed before would read no lock there and count the node gone.
func (q *Quorum) Watch(r *node.Ref, lost func()) (stop func()) {
	var mu sync.Mutex
	gone, fired, stopped := 0, false, false
	stops := make([]func(), len(q.nodes))
	end := make(chan struct{})
	watch := func(i int, n *node.Node) {
		s := n.Watch(r, func() {
			mu.Lock()
			gone++
			fire := !fired && len(q.nodes)-gone < Majority(len(q.nodes))
			fired = fired || fire
			mu.Unlock()
			if fire {
				lost()
			}
		})
		mu.Lock()
		if stopped {
			mu.Unlock()
			s()
			return
		}
		stops[i] = s
		mu.Unlock()
	}
	for i, n := range q.nodes {
		acquired := q.acquired(i, r)
		select {
		case <-acquired:
			watch(i, n)
		default:
			go func() {
				select {
				case <-acquired:
					watch(i, n)
				case <-end:
				}
			}()
		}
	}
	return func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		stopped = true
		armed := slices.Clone(stops)
		mu.Unlock()
		close(end)
		for _, s := range armed {
			if s != nil {
				s()
			}
		}
	}
}
