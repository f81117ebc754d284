package fencelock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/quorum_writeback.lua
	writebackLua string
	writebackRun = newRunner(writebackLua)
)

// NewQuorum returns a Client that keeps each lock on a majority of nodes,
// independent Redis masters (not replicas of each other, nor one
// failover group), in the manner of Redlock, and issues fencing tokens
// that stay increasing while any minority of nodes fails. It has the same
// API as a Client from New; opts are the same (MinReplicas, if set,
// applies to each node).
//
// Acquiring sends the acquire script to every node at once and needs the
// lock on a majority; each of those nodes issues a token as a single node
// would, raised to a token the client proposes: its clock plus 50 ms, to
// no more than 250 ms ahead of the node's clock. The lease's token is the
// greatest issued. The nodes that issued it have accepted it; it is
// written back to the others with a script that raises a node's counter
// only if it is lower and the attempt holds the lock there. The
// acquisition succeeds only if a majority accepted: each node's counter
// only grows, so a node accepts a given token at most once, and a node
// that restarted empty lost the locks it held, so two acquisitions never
// both get the same token; a later acquisition, whose majority meets the
// earlier one's, always gets a greater one. Nodes whose clocks agree with
// the client's issue the proposal as it is, and the acquisition then takes
// one round trip, not two. An acquisition that fails, or that took longer
// than the TTL less the drift allowance, releases every node. Renewal
// needs a majority, and Release reports the lease lost unless a majority
// deleted the lock.
//
// Tokens stay increasing only while every node keeps what it acknowledged:
// a node that restarts without its data is safe thanks to the clock floor
// (see package doc) if it stays down longer than the 250 ms by which a
// proposal may raise a token above its clock, plus the clocks'
// disagreement; one that reloads an old copy of its data, or a node that
// is a replica promoted in a failover, may let a minority of nodes carry
// the newest token. Waiters in Acquire subscribe to the release channel on
// every node, so one node down does not delay their wake-up.
//
// Invalid options, no nodes, or a node that is nil or lacks
// ContextTimeoutEnabled (see New) are reported, wrapping ErrInvalid, by
// every call on the Client.
func NewQuorum(nodes []redis.UniversalClient, opts *Options) *Client {
	cfg, err := opts.config()
	if len(nodes) == 0 {
		err = errors.Join(err, fmt.Errorf("%w: no quorum nodes", ErrInvalid))
	}
	c := &Client{cfg: cfg}
	c.keep = &keeper{}
	q := &quorum{cfg: &c.cfg}
	for i, rdb := range nodes {
		err = errors.Join(err, checkRedis(rdb, fmt.Sprintf("Redis client for quorum node %d", i)))
		q.nodes = append(q.nodes, newNode(rdb, &c.cfg))
	}
	c.err = err
	c.be, c.el = q, q
	c.hub = &wakeHub{nodes: q.nodes}
	return c
}

// quorum keeps each lock on a majority of independent nodes.
type quorum struct {
	nodes []*node
	cfg   *config

	mu sync.Mutex
	// inflight holds, by acquisition attempt, a channel per node that is
	// closed when the attempt's request to that node has ended. A release
	// to a node waits for it: sent on another connection, it could
	// otherwise overtake the acquire request and leave the lock behind.
	// The attempt's lockRef, which its lease keeps, names it: its owner
	// value is its own.
	inflight map[*lockRef][]chan struct{}
}

// acquired returns a channel closed once r's acquire request to node i
// has ended.
func (q *quorum) acquired(i int, r *lockRef) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	if done := q.inflight[r]; done != nil {
		return done[i]
	}
	return closed
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// afterAcquire waits until r's acquire request to member i of el has
// ended, or ctx has. Every later request of the attempt to that node
// waits for it: sent on another connection, it could overtake the
// acquire request and find no lock there, so that a release or a
// resignation leaves the lock behind, and a write-back or the leader's
// record is refused.
func afterAcquire(ctx context.Context, el electorate, i int, r *lockRef) error {
	select {
	case <-el.acquired(i, r):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// majority is how many of n nodes make a majority.
func majority(n int) int { return n/2 + 1 }

func (q *quorum) majority() int { return majority(len(q.nodes)) }

// A nodeReply is one node's answer in a round.
type nodeReply struct {
	node  int
	token int64         // acquire: issued token, or 0
	held  time.Duration // acquire: the other holder's TTL
	ok    bool          // write-back accepted, renewed, deleted
	err   error
}

// round sends f to every node at once, and tallies the replies until the
// majority question is decided: yes when a majority answered ok, no when
// so many answered otherwise that a majority cannot be reached, or until
// ctx is done. The requests run detached from ctx for up to timeout, and
// no longer than NodeTimeout, so the nodes that have not answered yet
// still get them (a lock or token on more nodes than a bare majority
// survives more failures), and a node that answers nothing fails the
// round's request soon (Redlock's timeout, small against the TTL): the
// round is decided without it. The late replies are collected in the
// background. each, if not nil, sees every reply tallied.
func (q *quorum) round(ctx context.Context, timeout time.Duration, f func(ctx context.Context, i int, n *node) nodeReply, each func(nodeReply)) tally {
	// Buffered for every reply: a request that ends after the decision
	// sends without anyone receiving, and the last one to end cancels the
	// round's context.
	replies := make(chan nodeReply, len(q.nodes))
	rs := &requests{}
	rs.left.Store(int32(len(q.nodes)))
	var rctx context.Context
	rctx, rs.cancel = context.WithTimeout(context.WithoutCancel(ctx), min(timeout, q.cfg.nodeTimeout))
	for i, n := range q.nodes {
		go rs.ask(rctx, i, n, f, replies)
	}
	var t tally
	maj := q.majority()
	pending := len(q.nodes)
	for pending > 0 && t.yes < maj && len(q.nodes)-t.no-len(t.errs) >= maj {
		var r nodeReply
		select {
		case r = <-replies:
			pending--
		case <-ctx.Done():
			t.errs = append(t.errs, context.Cause(ctx))
			pending = 0 // stop; the replies still due are not waited for
			continue
		}
		if each != nil {
			each(r)
		}
		switch {
		case r.err != nil:
			t.errs = append(t.errs, fmt.Errorf("node %d: %w", r.node, r.err))
		case r.ok:
			t.yes++
		default:
			t.no++
		}
	}
	return t
}

// requests are a round's requests in flight.
type requests struct {
	left   atomic.Int32
	cancel context.CancelFunc // of their context, once all have ended
}

// ask sends one node its request in a round and the reply to replies.
func (rs *requests) ask(ctx context.Context, i int, n *node, f func(ctx context.Context, i int, n *node) nodeReply, replies chan<- nodeReply) {
	r := f(ctx, i, n)
	r.node = i
	replies <- r
	if rs.left.Add(-1) == 0 {
		rs.cancel()
	}
}

// tally is a round's outcome.
type tally struct {
	yes, no int
	errs    []error
}

// decision is what a round's tally decides of its majority question.
type decision int

const (
	undecided   decision = iota // errors left it open: ErrNoQuorum
	majorityYes                 // a majority answered ok
	majorityNo                  // the refusals decide against
)

// rule says what a refusal means to a round's question.
type rule int

const (
	// keeping asks whether something is still ours (renew, release,
	// proclaim, who holds or leads): no only when so many refused that a
	// majority cannot say yes, whatever the nodes that failed hold.
	keeping rule = iota
	// taking asks whether we could take something (acquire, write-back,
	// announce): any refusal means contention, worth waiting for, unless
	// the errors alone left too few nodes for a majority.
	taking
)

// decide is the one majority rule: what t decides for n nodes.
func (t tally) decide(n int, r rule) decision {
	maj := majority(n)
	switch {
	case t.yes >= maj:
		return majorityYes
	case r == keeping && n-t.no < maj:
		return majorityNo
	case r == taking && t.no > 0 && n-len(t.errs) >= maj:
		return majorityNo
	}
	return undecided
}

// noQuorum is the error for a round that errors left undecided.
func (q *quorum) noQuorum(what string, t tally) error {
	return fmt.Errorf("%w: %s on %d of %d nodes, %d needed: %w",
		ErrNoQuorum, what, t.yes, len(q.nodes), q.majority(), nodeErrors(t.errs))
}

// nodeErrors joins the errors of several nodes on one line; errors.Is and
// errors.As see each of them.
type nodeErrors []error

func (e nodeErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e nodeErrors) Unwrap() []error { return e }

func (q *quorum) acquire(ctx context.Context, r *lockRef) (int64, time.Duration, error) {
	if r.permit != nil && r.slot < 0 {
		return q.acquirePermit(ctx, r) // chooses the slot, then acquires it here
	}
	start := time.Now()
	// A request that ends after the validity is of no use; the timeout
	// stops waiting for a node that hangs, as far as the client honours
	// contexts.
	validity := q.cfg.ttl - q.cfg.drift

	done := make([]chan struct{}, len(q.nodes))
	for i := range done {
		done[i] = make(chan struct{})
	}
	q.mu.Lock()
	if q.inflight == nil {
		q.inflight = map[*lockRef][]chan struct{}{}
	}
	q.inflight[r] = done
	q.mu.Unlock()
	var left atomic.Int32
	left.Store(int32(len(q.nodes)))

	// Every node is asked to issue the same token, a little ahead of the
	// client's clock; nodes whose clocks agree with it, and whose counters
	// are behind, do, and then need no write-back.
	r.proposal = time.Now().Add(proposalLead).UnixMicro()
	issued := make([]int64, len(q.nodes)) // by the replies tallied
	// answered[i] is node i's token, 0 for none, written before done[i]
	// is closed: a node whose reply came after the round was decided may
	// have issued the lease's token too, and then needs no write-back.
	answered := make([]int64, len(q.nodes))
	var top int64
	var held time.Duration
	t := q.round(ctx, validity, func(ctx context.Context, i int, n *node) nodeReply {
		token, held, err := n.acquire(ctx, r)
		answered[i] = token
		close(done[i])
		if left.Add(-1) == 0 {
			q.mu.Lock()
			delete(q.inflight, r)
			q.mu.Unlock()
		}
		return nodeReply{token: token, held: held, ok: token > 0, err: err}
	}, func(r nodeReply) {
		if r.ok {
			top = max(top, r.token)
			issued[r.node] = r.token
		} else if r.err == nil && (held == 0 || r.held < held) {
			held = r.held // wait for the first holder's lock to expire
		}
	})
	if d := t.decide(len(q.nodes), taking); d != majorityYes {
		q.releaseAll(ctx, r)
		if d == undecided {
			return 0, 0, q.noQuorum("locked", t)
		}
		return 0, held, nil
	}

	// The greatest token issued: the nodes that issued it have accepted
	// it, the others must, if it is greater than they store.
	token, accepted := top, 0
	for _, v := range issued {
		if v == token {
			accepted++
		}
	}
	if accepted >= q.majority() {
		// The other nodes get the token too, not waited for, as a
		// write-back round's slow nodes do: a token on more nodes than a
		// bare majority survives more of them losing their data.
		for i, n := range q.nodes {
			if issued[i] != token {
				go q.writeBack(ctx, i, n, r, token, answered)
			}
		}
		return q.inTime(ctx, r, start, token)
	}
	wb := q.round(ctx, validity-time.Since(start), func(ctx context.Context, i int, n *node) nodeReply {
		if issued[i] == token {
			return nodeReply{ok: true}
		}
		if err := afterAcquire(ctx, q, i, r); err != nil {
			return nodeReply{err: err}
		}
		if answered[i] == token {
			return nodeReply{ok: true} // issued it, too late to be tallied
		}
		v, err := writebackRun.run(ctx, n.rdb, q.writebackArgs(r, token))
		return nodeReply{ok: v == 1, err: err}
	}, nil)
	switch wb.decide(len(q.nodes), taking) {
	case undecided:
		q.releaseAll(ctx, r)
		return 0, 0, q.noQuorum("token written", wb)
	case majorityNo:
		// A concurrent acquisition holds a greater token, or the lock,
		// on enough nodes.
		q.releaseAll(ctx, r)
		return 0, q.cfg.retry, nil
	}
	return q.inTime(ctx, r, start, token)
}

// writeBack raises node i's counter to token, best effort, in the
// background of the acquisition, for up to a TTL, unless node i's acquire
// reply (answered[i], read once it has ended) was that token: the node
// issued it, and stores it already.
func (q *quorum) writeBack(ctx context.Context, i int, n *node, r *lockRef, token int64, answered []int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.cfg.ttl)
	defer cancel()
	if afterAcquire(ctx, q, i, r) == nil && answered[i] != token {
		writebackRun.run(ctx, n.rdb, q.writebackArgs(r, token))
	}
}

// writebackArgs returns the write-back of token for r's attempt: a node
// accepts it only where that attempt holds the lock, so that a node that
// restarted empty, and lost the lock, cannot accept a token a second time
// (lua/quorum_writeback.lua). The counter, the first key, routes it on a
// Cluster: same slot as the lock.
func (q *quorum) writebackArgs(r *lockRef, token int64) []any {
	return append(writebackRun.args("2", 5), r.token, r.lockArg, token, q.cfg.retentionArg, &r.owner)
}

// proposalLead is how far ahead of the client's clock a quorum
// acquisition proposes its token: more than a request takes to reach the
// nodes, so that nodes on clocks that agree with the client's (within the
// 250 ms the acquire script allows) issue the proposal as it is.
const proposalLead = 50 * time.Millisecond

// inTime returns token, acquired at start, unless the acquisition took
// longer than its validity: then it releases every node.
func (q *quorum) inTime(ctx context.Context, r *lockRef, start time.Time, token int64) (int64, time.Duration, error) {
	validity := q.cfg.ttl - q.cfg.drift
	if elapsed := time.Since(start); elapsed >= validity {
		q.releaseAll(ctx, r)
		return 0, 0, fmt.Errorf("%w: acquiring on a majority took %v, more than the validity %v (TTL less drift)",
			ErrNotAcquired, elapsed, validity)
	}
	return token, 0, nil
}

// releaseAll releases the lock on every node, best effort, after a failed
// acquisition. It waits for a majority of nodes to answer, not for nodes
// that hang: their requests finish in the background.
func (q *quorum) releaseAll(ctx context.Context, r *lockRef) {
	q.round(context.WithoutCancel(ctx), q.cfg.ttl, q.releaseNode(r), nil)
}

func (q *quorum) renew(ctx context.Context, r *lockRef) (bool, error) {
	t := q.round(ctx, q.cfg.ttl-q.cfg.drift, func(ctx context.Context, _ int, n *node) nodeReply {
		ok, err := n.renew(ctx, r)
		return nodeReply{ok: ok, err: err}
	}, nil)
	switch t.decide(len(q.nodes), keeping) {
	case majorityYes:
		return true, nil
	case majorityNo:
		return false, nil // a majority no longer has our lock
	}
	return false, q.noQuorum("renewed", t)
}

// releaseNode returns the request that releases the lock on one node,
// after the acquisition's request to that node has ended.
func (q *quorum) releaseNode(r *lockRef) func(ctx context.Context, i int, n *node) nodeReply {
	return func(ctx context.Context, i int, n *node) nodeReply {
		if err := afterAcquire(ctx, q, i, r); err != nil {
			return nodeReply{err: err}
		}
		ok, err := n.release(ctx, r)
		return nodeReply{ok: ok, err: err}
	}
}

func (q *quorum) release(ctx context.Context, r *lockRef) (bool, error) {
	t := q.round(ctx, q.cfg.ttl, q.releaseNode(r), nil)
	switch t.decide(len(q.nodes), keeping) {
	case majorityYes:
		return true, nil
	case majorityNo:
		return false, nil
	}
	return false, q.noQuorum("released", t)
}
