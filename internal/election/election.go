// Package election holds the pure parts of an election (the root
// package's Election): what a node's read of an election says (a View,
// from lua/leader.lua), what a majority of views decides about who leads
// (Leading), and the order in which an observer sends the changes it learns
// from the nodes' histories (Observer). Nothing here sends a command.
package election

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/script"
)

// Leader is who leads: the root package's Leader, which it is made into.
type Leader struct {
	Value   string
	Term    int64
	LeaseID string
	Since   time.Time
}

// ReadArgs returns lua/leader.lua's read of the election name, with its
// history after the entry after ("" for none); on a quorum, with the seqs
// each node accepted.
func ReadArgs(c *node.Config, name, after string, quorum bool) []any {
	seqs := "0" // one node's record is what it accepted last
	if quorum {
		seqs = "1"
	}
	return append(script.Leader.Args("3", 6), c.LockKey(name), c.LeaderKey(name), c.HistoryKey(name), after, HistoryBatch, seqs)
}

// HistoryBatch is the most history entries one read returns.
const HistoryBatch = node.HistoryLen

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

// Observer turns the nodes' views into the changes an Observe sends.
type Observer struct {
	majority int
	last     []string // each node's last history entry read
	started  bool
	cur      Leader // the last change sent; zero: nobody leads
	// term and seq are the latest change sent: nothing older is sent.
	term, seq int64
	seen      map[changeID]*seenChange
}

// NewObserver returns the observer of an election kept on nodes nodes.
func NewObserver(nodes int) *Observer {
	return &Observer{majority: quorum.Majority(nodes), last: make([]string, nodes), seen: map[changeID]*seenChange{}}
}

// After returns, for each node, the last history entry read from it: the
// next read's start.
func (o *Observer) After() []string { return o.last }

// Update takes in the nodes' views and returns the changes to send, what
// the views decide about the current leader, and whether some node's
// history has more to read at once.
func (o *Observer) Update(views []View) (out []Leader, v Verdict, more bool) {
	for i, view := range views {
		if view.Err != nil {
			continue
		}
		o.last[i] = view.Last
		more = more || len(view.Entries) == HistoryBatch
		for _, c := range view.Entries {
			s := o.seen[c.id]
			if s == nil {
				s = &seenChange{c: c, on: map[int]bool{}}
				o.seen[c.id] = s
			}
			s.on[i] = true
		}
	}
	v = Leading(views)
	if !o.started {
		// The first read reads no history, only where it ends.
		if !v.Decided {
			return nil, v, false
		}
		o.started = true
		o.cur, o.term, o.seq = v.Leader, v.Leader.Term, v.Seq
		return []Leader{v.Leader}, v, more
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
	case !v.Decided:
	case v.Leader.Term != 0 && o.newer(v.Leader.Term, v.Seq):
		out = o.ended(out, v.Leader.Term)
		o.cur, o.term, o.seq = v.Leader, v.Leader.Term, v.Seq
		out = append(out, o.cur)
	case v.Leader.Term == 0 && o.cur.Term != 0:
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
func (o *Observer) ended(out []Leader, term int64) []Leader {
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
func (o *Observer) newer(term, seq int64) bool {
	return term > o.term || (term == o.term && seq > o.seq)
}

// View is what one node says of an election (lua/leader.lua).
type View struct {
	Err    error
	Leader Leader // Term 0 if the node knows no leader
	Seq    int64
	// Seqs are the seqs of the leader's changes (its term and lease) in
	// the node's history, newest first: the values it accepted. Read on
	// a quorum only.
	Seqs    []int64
	PTTL    time.Duration
	Last    string // the last history entry read
	Entries []change
}

// accepted reports whether the node accepted the leader's change seq: it
// is the record's, or in the history. A history that does not reach
// back to the election (trimmed, or lost with the record in a restart)
// says nothing of the seqs before its oldest: those are taken as
// accepted, as a record's seq says its predecessors were sent.
func (v View) accepted(seq int64) bool {
	if seq == v.Seq || slices.Contains(v.Seqs, seq) {
		return true
	}
	oldest := v.Seq
	if len(v.Seqs) > 0 {
		oldest = min(oldest, slices.Min(v.Seqs))
	}
	return seq < oldest && !slices.Contains(v.Seqs, 0)
}

// Parse checks lua/leader.lua's reply.
func Parse(reply any) (View, error) {
	bad := fmt.Errorf("fencelock: malformed leader reply %v", reply)
	r, ok := reply.([]any)
	if !ok || len(r) != 10 {
		return View{}, bad
	}
	state, ok1 := r[0].(int64)
	pttl, ok2 := r[1].(int64)
	last, ok3 := r[7].(string)
	entries, ok4 := r[8].([]any)
	seqs, ok5 := r[9].([]any)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return View{}, bad
	}
	v := View{PTTL: time.Duration(pttl) * time.Millisecond, Last: last}
	for _, s := range seqs {
		str, ok := s.(string)
		seq, err := strconv.ParseInt(str, 10, 64)
		if !ok || err != nil || seq < 0 {
			return View{}, bad
		}
		v.Seqs = append(v.Seqs, seq)
	}
	if state == 1 {
		var f [5]string
		for i := range f {
			if f[i], ok = r[2+i].(string); !ok {
				return View{}, bad
			}
		}
		c, err := parseChange(map[string]string{"kind": "elected", "value": f[0], "term": f[1], "lease": f[2], "seq": f[3], "since": f[4]})
		if err != nil || c.value == "" {
			return View{}, bad
		}
		v.Leader = Leader{Value: c.value, Term: c.id.term, LeaseID: c.id.lease, Since: c.since}
		v.Seq = c.id.seq
	}
	for _, entry := range entries {
		e, ok := entry.([]any)
		if !ok || len(e) != 2 {
			return View{}, bad
		}
		kv, ok := e[1].([]any)
		if !ok || len(kv)%2 != 0 {
			return View{}, bad
		}
		fields := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			k, ok1 := kv[i].(string)
			val, ok2 := kv[i+1].(string)
			if !ok1 || !ok2 {
				return View{}, bad
			}
			fields[k] = val
		}
		c, err := parseChange(fields)
		if err != nil {
			return View{}, fmt.Errorf("%w: %w", bad, err)
		}
		v.Entries = append(v.Entries, c)
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

// Verdict is what a majority of views says about the current leader.
type Verdict struct {
	Decided bool
	Leader  Leader // Term 0: nobody leads
	Seq     int64
	PTTL    time.Duration // until the leader's lock would expire on a node
}

// Leading returns the leader a majority of views agree on (by term and
// lease), with the latest value a majority of them accepted; nobody if
// no leader can have a majority; undecided while views in error leave
// either open. A value a Proclaim wrote to a minority only (it failed
// with ErrNoQuorum) is not the leader's, even once a later Proclaim has
// reached some of the majority's nodes: what a node accepted is its
// record and its history (View.accepted), not every seq below its
// record's. A node not heard from may have accepted any seq: while
// counting it as having accepted a later one gives another answer, it
// decides nothing. Nor does a value that a majority accepted and no
// node's record holds any more (each of its nodes since took a
// minority's Proclaim): the leader's next Proclaim or Campaign decides.
func Leading(views []View) Verdict {
	type who struct {
		term  int64
		lease string
	}
	winner, t := quorum.Vote(len(views), func(i int) (who, bool, error) {
		v := views[i]
		return who{v.Leader.Term, v.Leader.LeaseID}, v.Leader.Term != 0, v.Err
	})
	switch t.Decide(len(views), quorum.Keeping) {
	case quorum.MajorityNo:
		return Verdict{Decided: true}
	case quorum.Undecided:
		return Verdict{}
	}
	var leaders []View
	var seqs []int64 // every seq some node of the leader's accepted
	for _, v := range views {
		if v.Err == nil && (who{v.Leader.Term, v.Leader.LeaseID}) == winner {
			leaders = append(leaders, v)
			seqs = append(append(seqs, v.Seq), v.Seqs...)
		}
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	m, e := quorum.Majority(len(views)), len(t.Errs)
	for _, seq := range slices.Backward(seqs) {
		n := 0
		for _, v := range leaders {
			if v.accepted(seq) {
				n++
			}
		}
		if n < m {
			if n+e >= m {
				return Verdict{} // the nodes not heard from may have it
			}
			continue
		}
		out := Verdict{Decided: true, Seq: seq}
		for i, v := range leaders {
			if v.Seq == seq {
				out.Leader = v.Leader
			}
			if i == 0 || v.PTTL < out.PTTL {
				out.PTTL = v.PTTL
			}
		}
		if out.Leader.Term == 0 {
			return Verdict{} // no record holds it any more
		}
		return out
	}
	return Verdict{}
}
