package fencelock

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

var (
	//go:embed lua/leader.lua
	leaderLua string
	leaderRun = newRunner(leaderLua)
)

// Observe returns a channel of the election's leadership changes, which
// any Election of the name can watch, leading or not. It first sends who
// leads now (the zero Leader if nobody does), then every change in order:
// each new term, each value a leader proclaims (same Term, new Value),
// and the zero Leader when a leadership ends without a successor known
// yet. Terms never decrease. The channel is closed when ctx ends; until
// then the caller must receive from it, or Observe falls behind (the
// changes wait in Redis; see below).
//
// Observe is driven by wake-ups, not polling: the scripts that elect,
// proclaim and resign publish on the election's channel, which the
// Client's shared subscription carries, and a leader that expires
// instead is noticed when its TTL runs out. Each wake-up reads the
// election's history, which Redis keeps (its last 64 changes, for
// TokenRetention), so a change is not missed because a message was: when
// the subscription is re-established after a reconnect, the observer
// reads what happened meanwhile. Without a leader, it also reads at
// least once per TTL (or RetryInterval, if longer), in case a message was
// lost without a reconnect.
//
// On a quorum Client, a change is sent once a majority of nodes has it in
// its history, and the current leader is decided as by Leader.
//
// An invalid name is reported, wrapping ErrInvalid, and no channel is
// returned. Errors while reading (the network, Redis) are retried after
// Options.RetryInterval; Options.Logger, if set, logs them.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := e.c.check(e.name); err != nil {
		return nil, err
	}
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out, nil
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	c := e.c
	channel := c.cfg.changedChannel(e.name)
	// Subscribed before the first read, so that no change falls between.
	w := c.hub.watch(ctx, channel, c.cfg.retry)
	defer c.hub.leave(channel, w)
	nodes := c.el.members()
	o := &observer{majority: c.majority(), last: make([]string, len(nodes)), seen: map[changeID]*seenChange{}}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		// Drop a wake from before this read; one after it is kept.
		select {
		case <-w.wake:
		default:
		}
		views := e.read(ctx, o.last, true)
		changes, v, more := o.update(views)
		for _, l := range changes {
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
		}
		var next time.Duration
		switch {
		case more:
			next = 0
		case !v.decided:
			if ctx.Err() == nil && c.cfg.logger != nil {
				c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: observe read failed, retrying",
					slog.String("election", e.name), slog.Any("error", c.undecided(views)))
			}
			next = c.jitter(c.cfg.retry)
		case v.leader.Term != 0:
			// Read again when the leader's lock would expire: renewed, it
			// will have a new TTL; expired, nobody leads.
			next = v.pttl + time.Millisecond + rand.N(v.pttl/32+time.Millisecond)
		default:
			next = c.jitter(max(c.cfg.ttl, c.cfg.retry))
		}
		timer.Reset(next)
	}
}

// historyBatch is the most history entries one read returns.
const historyBatch = historyLen

// change is one entry of an election's history.
type change struct {
	id    changeID
	value string
	since time.Time
}

// changeID names a change the same way on every node: a history entry
// of each node that has it.
type changeID struct {
	kind  string // "elected", "proclaimed" or "resigned"
	term  int64
	lease string
	seq   int64 // 0 when elected, n for the n-th Proclaim, max for resigned
}

// seenChange is a change and the nodes whose history has it.
type seenChange struct {
	c  change
	on map[int]bool
}

// observer turns the nodes' views into the changes an Observe sends.
type observer struct {
	majority int
	last     []string // each node's last history entry read
	started  bool
	cur      Leader // the last change sent; zero: nobody leads
	// term and seq are the latest change sent: nothing older is sent.
	term, seq int64
	seen      map[changeID]*seenChange
}

// update takes in the nodes' views and returns the changes to send, what
// the views decide about the current leader, and whether some node's
// history has more to read at once.
func (o *observer) update(views []nodeView) (out []Leader, v verdict, more bool) {
	for i, view := range views {
		if view.err != nil {
			continue
		}
		o.last[i] = view.last
		more = more || len(view.entries) == historyBatch
		for _, c := range view.entries {
			s := o.seen[c.id]
			if s == nil {
				s = &seenChange{c: c, on: map[int]bool{}}
				o.seen[c.id] = s
			}
			s.on[i] = true
		}
	}
	v = decide(views)
	if !o.started {
		// The first read reads no history, only where it ends.
		if !v.decided {
			return nil, v, false
		}
		o.started = true
		o.cur, o.term, o.seq = v.leader, v.leader.Term, v.seq
		return []Leader{v.leader}, v, more
	}
	// Changes a majority has, in order.
	var confirmed []change
	for id, s := range o.seen {
		if len(s.on) >= o.majority {
			confirmed = append(confirmed, s.c)
			delete(o.seen, id)
		}
	}
	slices.SortFunc(confirmed, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.id.term, b.id.term), cmp.Compare(a.id.seq, b.id.seq))
	})
	for _, c := range confirmed {
		switch {
		case c.id.kind == "resigned":
			if o.cur.Term == c.id.term {
				o.cur = Leader{}
				out = append(out, o.cur)
			}
			// Only a resignation of the latest term ends it: an older
			// one, confirmed late, must not swallow its Proclaims.
			if c.id.term >= o.term {
				o.term, o.seq = c.id.term, math.MaxInt64
			}
		case o.newer(c.id.term, c.id.seq):
			out = o.ended(out, c.id.term)
			o.cur = Leader{Value: c.value, Term: c.id.term, LeaseID: c.id.lease, Since: c.since}
			o.term, o.seq = c.id.term, c.id.seq
			out = append(out, o.cur)
		}
	}
	for id := range o.seen {
		if !o.newer(id.term, id.seq) {
			delete(o.seen, id) // can never be sent
		}
	}
	// What the history does not tell: a leader that expired, or changes
	// the history lost (trimmed, or a restart without persistence).
	switch {
	case !v.decided:
	case v.leader.Term != 0 && o.newer(v.leader.Term, v.seq):
		out = o.ended(out, v.leader.Term)
		o.cur, o.term, o.seq = v.leader, v.leader.Term, v.seq
		out = append(out, o.cur)
	case v.leader.Term == 0 && o.cur.Term != 0:
		o.cur = Leader{}
		out = append(out, o.cur)
	}
	return out, v, more
}

// ended appends the end of the current leadership to out, before a
// change to a later term, if some node's history has its resignation. On
// a quorum the resignation may reach a majority of the histories read
// after the next election does; but a node of the next leader's majority
// resigned first, so its history, read with the next term's, has it.
func (o *observer) ended(out []Leader, term int64) []Leader {
	if o.cur.Term == 0 || term == o.cur.Term {
		return out
	}
	for id := range o.seen {
		if id.kind == "resigned" && id.term == o.cur.Term {
			delete(o.seen, id)
			o.cur = Leader{}
			return append(out, o.cur)
		}
	}
	return out
}

// newer reports whether a change of term and seq comes after the last one
// sent.
func (o *observer) newer(term, seq int64) bool {
	return term > o.term || (term == o.term && seq > o.seq)
}

// nodeView is what one node says of an election (lua/leader.lua).
type nodeView struct {
	err    error
	leader Leader // Term 0 if the node knows no leader
	seq    int64
	// seqs are the seqs of the leader's changes (its term and lease) in
	// the node's history, newest first: the values it accepted. Read on
	// a quorum only.
	seqs    []int64
	pttl    time.Duration
	last    string
	entries []change
}

// accepted reports whether the node accepted the leader's change seq: it
// is the record's, or in the history. A history that does not reach
// back to the election (trimmed, or lost with the record in a restart)
// says nothing of the seqs before its oldest: those are taken as
// accepted, as a record's seq says its predecessors were sent.
func (v nodeView) accepted(seq int64) bool {
	if seq == v.seq || slices.Contains(v.seqs, seq) {
		return true
	}
	oldest := v.seq
	if len(v.seqs) > 0 {
		oldest = min(oldest, slices.Min(v.seqs))
	}
	return seq < oldest && !slices.Contains(v.seqs, 0)
}

// errPending marks the views of nodes that had not answered when a
// majority had decided.
var errPending = fmt.Errorf("%w: no answer yet", ErrNoQuorum)

// read returns every node's view of the election, with its history
// after after[i] (nil: none). On a quorum it reads the nodes at once.
// Leader (all false) needs only who leads: read returns as soon as a
// majority decides it, within the TTL, and the views of nodes that had
// not answered carry errPending. Observe (all true) needs every history
// read in the same round as the views that decide, lest it send a newer
// term before an older one that a slow node's history would have
// confirmed: read waits for every node, each for up to a quarter of the
// TTL.
func (e *Election) read(ctx context.Context, after []string, all bool) []nodeView {
	nodes := e.c.el.members()
	views := make([]nodeView, len(nodes))
	for i := range views {
		views[i].err = errPending
	}
	timeout := e.c.cfg.ttl
	if all {
		timeout /= 4
	}
	e.c.el.gather(ctx, timeout, func(ctx context.Context, i int, n *node) func() {
		from := ""
		if after != nil {
			from = after[i]
		}
		v := e.readNode(ctx, n, from)
		return func() { views[i] = v }
	}, func() bool { return !all && decide(views).decided })
	return views
}

// gather, on one node, is one read, applied.
func (n *node) gather(ctx context.Context, _ time.Duration, read func(ctx context.Context, i int, n *node) func(), _ func() bool) {
	read(ctx, 0, n)()
}

// gather, on a quorum, reads the nodes at once, each for up to timeout,
// and applies each answer on the caller's goroutine, until decided says
// the answers so far decide, every node has answered, or ctx is done.
// The answers that come later are dropped.
func (q *quorum) gather(ctx context.Context, timeout time.Duration, read func(ctx context.Context, i int, n *node) func(), decided func() bool) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	answers := make(chan func(), len(q.nodes))
	for i, n := range q.nodes {
		go func() { answers <- read(rctx, i, n) }()
	}
	pending := len(q.nodes)
	for pending > 0 && !decided() {
		select {
		case apply := <-answers:
			apply()
			pending--
		case <-ctx.Done():
			pending = -pending
		}
	}
	go func() {
		defer cancel()
		for range max(pending, -pending) {
			<-answers
		}
	}()
}

// readNode runs lua/leader.lua on n.
func (e *Election) readNode(ctx context.Context, n *node, after string) nodeView {
	cfg := &e.c.cfg
	seqs := "0" // one node's record is what it accepted last
	if len(e.c.el.members()) > 1 {
		seqs = "1"
	}
	reply, err := leaderRun.eval(ctx, n.rdb, append(leaderRun.args("3", 6),
		cfg.lockKey(e.name), cfg.leaderKey(e.name), cfg.historyKey(e.name), after, historyBatch, seqs))
	if err != nil {
		return nodeView{err: n.follow(ctx, err)}
	}
	v, err := parseLeader(reply)
	if err != nil {
		return nodeView{err: err}
	}
	return v
}

// parseLeader checks lua/leader.lua's reply.
func parseLeader(reply any) (nodeView, error) {
	bad := fmt.Errorf("fencelock: malformed leader reply %v", reply)
	r, ok := reply.([]any)
	if !ok || len(r) != 10 {
		return nodeView{}, bad
	}
	state, ok1 := r[0].(int64)
	pttl, ok2 := r[1].(int64)
	last, ok3 := r[7].(string)
	entries, ok4 := r[8].([]any)
	seqs, ok5 := r[9].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nodeView{}, bad
	}
	v := nodeView{pttl: time.Duration(pttl) * time.Millisecond, last: last}
	for _, s := range seqs {
		str, ok := s.(string)
		seq, err := strconv.ParseInt(str, 10, 64)
		if !ok || err != nil || seq < 0 {
			return nodeView{}, bad
		}
		v.seqs = append(v.seqs, seq)
	}
	if state == 1 {
		var f [5]string
		for i := range f {
			if f[i], ok = r[2+i].(string); !ok {
				return nodeView{}, bad
			}
		}
		c, err := parseChange(map[string]string{"kind": "elected", "value": f[0], "term": f[1], "lease": f[2], "seq": f[3], "since": f[4]})
		if err != nil || c.value == "" {
			return nodeView{}, bad
		}
		v.leader = Leader{Value: c.value, Term: c.id.term, LeaseID: c.id.lease, Since: c.since}
		v.seq = c.id.seq
	}
	for _, entry := range entries {
		e, ok := entry.([]any)
		if !ok || len(e) != 2 {
			return nodeView{}, bad
		}
		kv, ok := e[1].([]any)
		if !ok || len(kv)%2 != 0 {
			return nodeView{}, bad
		}
		fields := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			k, ok1 := kv[i].(string)
			val, ok2 := kv[i+1].(string)
			if !ok1 || !ok2 {
				return nodeView{}, bad
			}
			fields[k] = val
		}
		c, err := parseChange(fields)
		if err != nil {
			return nodeView{}, fmt.Errorf("%w: %w", bad, err)
		}
		v.entries = append(v.entries, c)
	}
	return v, nil
}

// parseChange reads a history entry's fields (or a record's).
func parseChange(f map[string]string) (change, error) {
	c := change{id: changeID{kind: f["kind"], lease: f["lease"]}, value: f["value"]}
	var err error
	if c.id.term, err = strconv.ParseInt(f["term"], 10, 64); err != nil || c.id.term <= 0 {
		return change{}, fmt.Errorf("term %q", f["term"])
	}
	switch c.id.kind {
	case "resigned":
		c.id.seq = math.MaxInt64
		return c, nil
	case "elected", "proclaimed":
	default:
		return change{}, fmt.Errorf("kind %q", c.id.kind)
	}
	if c.id.seq, err = strconv.ParseInt(f["seq"], 10, 64); err != nil || c.id.seq < 0 {
		return change{}, fmt.Errorf("seq %q", f["seq"])
	}
	since, err := strconv.ParseInt(f["since"], 10, 64)
	if err != nil {
		return change{}, fmt.Errorf("since %q", f["since"])
	}
	c.since = time.UnixMicro(since)
	return c, nil
}

// verdict is what a majority of views says about the current leader.
type verdict struct {
	decided bool
	leader  Leader // Term 0: nobody leads
	seq     int64
	pttl    time.Duration // until the leader's lock would expire on a node
}

// decide returns the leader a majority of views agree on (by term and
// lease), with the latest value a majority of them accepted; nobody if
// no leader can have a majority; undecided while views in error leave
// either open. A value a Proclaim wrote to a minority only (it failed
// with ErrNoQuorum) is not the leader's, even once a later Proclaim has
// reached some of the majority's nodes: what a node accepted is its
// record and its history (nodeView.accepted), not every seq below its
// record's. A node not heard from may have accepted any seq: while
// counting it as having accepted a later one gives another answer, it
// decides nothing. Nor does a value that a majority accepted and no
// node's record holds any more (each of its nodes since took a
// minority's Proclaim): the leader's next Proclaim or Campaign decides.
func decide(views []nodeView) verdict {
	type who struct {
		term  int64
		lease string
	}
	votes := map[who]int{}
	var t tally
	var winner who
	for i, v := range views {
		switch {
		case v.err != nil:
			t.errs = append(t.errs, fmt.Errorf("node %d: %w", i, v.err))
		case v.leader.Term != 0:
			k := who{v.leader.Term, v.leader.LeaseID}
			votes[k]++
			if votes[k] > t.yes {
				t.yes, winner = votes[k], k
			}
		}
	}
	t.no = len(views) - len(t.errs) - t.yes
	switch t.decide(len(views), keeping) {
	case majorityNo:
		return verdict{decided: true}
	case undecided:
		return verdict{}
	}
	var leaders []nodeView
	var seqs []int64 // every seq some node of the leader's accepted
	for _, v := range views {
		if v.err == nil && (who{v.leader.Term, v.leader.LeaseID}) == winner {
			leaders = append(leaders, v)
			seqs = append(append(seqs, v.seq), v.seqs...)
		}
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	m, e := majority(len(views)), len(t.errs)
	for _, seq := range slices.Backward(seqs) {
		n := 0
		for _, v := range leaders {
			if v.accepted(seq) {
				n++
			}
		}
		if n < m {
			if n+e >= m {
				return verdict{} // the nodes not heard from may have it
			}
			continue
		}
		out := verdict{decided: true, seq: seq}
		for i, v := range leaders {
			if v.seq == seq {
				out.leader = v.leader
			}
			if i == 0 || v.pttl < out.pttl {
				out.pttl = v.pttl
			}
		}
		if out.leader.Term == 0 {
			return verdict{} // no record holds it any more
		}
		return out
	}
	return verdict{}
}

// undecided returns the error of views that decided nothing: the node's
// error, or on a quorum ErrNoQuorum with the nodes' errors.
func (c *Client) undecided(views []nodeView) error {
	if len(views) == 1 {
		return views[0].err
	}
	var errs []error
	for i, v := range views {
		if v.err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, v.err))
		}
	}
	return fmt.Errorf("%w: %d of %d nodes answered, %d needed: %w",
		ErrNoQuorum, len(views)-len(errs), len(views), c.majority(), nodeErrors(errs))
}
