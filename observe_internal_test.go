package fencelock

import (
	"math"
	"slices"
	"testing"
	"time"
)

// The observer's rules for a quorum, on views of three nodes as
// lua/leader.lua returns them: a change is sent once a majority of histories
// have it, in term order, and never one older than a change sent.
func TestObserver_quorum(t *testing.T) {
	elected := func(term int64, value string) change {
		return change{id: changeID{kind: "elected", term: term, lease: "L" + value}, value: value, since: time.UnixMicro(term)}
	}
	resigned := func(term int64, value string) change {
		return change{id: changeID{kind: "resigned", term: term, lease: "L" + value, seq: math.MaxInt64}}
	}
	leads := func(term int64, value string) nodeView {
		return nodeView{leader: Leader{Value: value, Term: term, LeaseID: "L" + value, Since: time.UnixMicro(term)}, pttl: time.Second}
	}
	none := nodeView{}
	down := nodeView{err: errPending}
	with := func(v nodeView, entries ...change) nodeView { v.entries = entries; v.last = "x"; return v }
	terms := func(ls []Leader) []int64 {
		var out []int64
		for _, l := range ls {
			out = append(out, l.Term)
		}
		return out
	}

	o := &observer{majority: 2, last: make([]string, 3), seen: map[changeID]*seenChange{}}
	step := func(what string, views []nodeView, want []int64) {
		t.Helper()
		got, _, _ := o.update(views)
		if !slices.Equal(terms(got), want) {
			t.Errorf("%s: sent terms %v, want %v", what, terms(got), want)
		}
	}
	step("start", []nodeView{none, none, down}, []int64{0})
	// A failed campaign: elected on one history only, then resigned.
	step("minority", []nodeView{with(none, elected(5, "x"), resigned(5, "x")), none, none}, nil)
	// Term 7 on one history, then on a second: sent once, when a majority has it.
	step("one of three", []nodeView{with(leads(7, "a"), elected(7, "a")), none, down}, nil)
	step("two of three", []nodeView{leads(7, "a"), with(leads(7, "a"), elected(7, "a")), down}, []int64{7})
	step("third", []nodeView{leads(7, "a"), leads(7, "a"), with(leads(7, "a"), elected(7, "a"))}, nil)
	// 7 resigns and 9 is elected between two reads: both, in order.
	step("handover", []nodeView{
		with(leads(9, "b"), resigned(7, "a"), elected(9, "b")),
		with(leads(9, "b"), resigned(7, "a"), elected(9, "b")),
		with(none, resigned(7, "a")),
	}, []int64{0, 9})
	// The minority's term 5 can never be sent now, even if it reached a majority.
	step("old", []nodeView{leads(9, "b"), with(leads(9, "b"), elected(5, "x")), with(leads(9, "b"), elected(5, "x"))}, nil)
	// 9 expires, unannounced: the views decide nobody leads.
	step("expiry", []nodeView{none, none, down}, []int64{0})
	// A term the histories lost (a restart without persistence): the
	// views that decide it are enough.
	step("lost history", []nodeView{leads(12, "c"), leads(12, "c"), none}, []int64{12})
	// Undecided views change nothing.
	step("undecided", []nodeView{leads(12, "c"), down, down}, nil)
	if o.cur.Term != 12 {
		t.Errorf("current term = %d, want 12", o.cur.Term)
	}
}

// decide names the leader a majority agrees on, with the latest value a
// majority of records holds, and the soonest expiry.
func TestDecide(t *testing.T) {
	a1 := nodeView{leader: Leader{Value: "a", Term: 3, LeaseID: "La"}, pttl: 900 * time.Millisecond}
	a2 := nodeView{leader: Leader{Value: "a2", Term: 3, LeaseID: "La"}, seq: 1, pttl: 500 * time.Millisecond}
	a3 := nodeView{leader: Leader{Value: "a3", Term: 3, LeaseID: "La"}, seq: 2, pttl: 500 * time.Millisecond}
	a4 := nodeView{leader: Leader{Value: "a4", Term: 3, LeaseID: "La"}, seq: 3, pttl: 500 * time.Millisecond}
	b := nodeView{leader: Leader{Value: "b", Term: 4, LeaseID: "Lb"}}
	down := nodeView{err: errPending}
	hist := func(v nodeView, seqs ...int64) nodeView { v.seqs = seqs; return v }
	for _, tc := range []struct {
		name    string
		views   []nodeView
		decided bool
		value   string
		pttl    time.Duration
	}{
		{"one node", []nodeView{a1}, true, "a", 900 * time.Millisecond},
		{"one node down", []nodeView{down}, false, "", 0},
		// A Proclaim on one node of three failed: its value is not the
		// leader's.
		{"minority value", []nodeView{a1, a2, {}}, true, "a", 500 * time.Millisecond},
		{"majority value", []nodeView{a2, a2, a1}, true, "a2", 500 * time.Millisecond},
		{"majority value, one down", []nodeView{a2, a2, down}, true, "a2", 500 * time.Millisecond},
		// The node down may hold a2 (the Proclaim succeeded) or not.
		{"value open", []nodeView{a2, a1, down}, false, "", 0},
		{"minority value, one down", []nodeView{a1, a1, a2, down, {}}, true, "a", 500 * time.Millisecond},
		{"value open of five", []nodeView{a1, a2, a2, down, {}}, false, "", 0},
		{"majority value of five", []nodeView{a1, a2, a2, a2, down}, true, "a2", 500 * time.Millisecond},
		// A Proclaim (a2) reached node 0 only, and the next one (a3) is
		// on its way: node 1 has it, node 2 not yet. Node 0 is the
		// majority-th greatest record, but its value is a minority's;
		// the histories tell which seqs each node accepted.
		{"minority value, overtaken", []nodeView{hist(a2, 0, 1), hist(a3, 0, 2), hist(a1, 0)}, true, "a", 500 * time.Millisecond},
		{"minority value, overtaken, one down", []nodeView{hist(a2, 0, 1), hist(a3, 0, 2), down}, false, "", 0},
		// a2 reached nodes 0 and 1; a3 only node 1.
		{"majority value, overtaken", []nodeView{hist(a2, 0, 1), hist(a3, 0, 1, 2), hist(a1, 0)}, true, "a2", 500 * time.Millisecond},
		// a2 reached nodes 0 and 1, which have both moved on to values
		// of their own: no record holds a2 any more.
		{"majority value, no record", []nodeView{hist(a3, 0, 1, 2), hist(a4, 0, 1, 3), hist(a1, 0)}, false, "", 0},
		// A history that does not reach back to the election (trimmed,
		// or lost in a restart) says nothing of the seqs before it: the
		// node is taken to have accepted them, as without histories.
		{"history trimmed", []nodeView{hist(a3, 2), hist(a2, 1), hist(a1, 0)}, true, "a2", 500 * time.Millisecond},
		{"split", []nodeView{a1, b, {}}, true, "", 0},
		{"open", []nodeView{a1, down, {}}, false, "", 0},
		{"none", []nodeView{{}, {}, down}, true, "", 0},
	} {
		v := decide(tc.views)
		if v.decided != tc.decided || v.leader.Value != tc.value || v.pttl != tc.pttl {
			t.Errorf("%s: decide = %+v, want decided %t, value %q, pttl %v", tc.name, v, tc.decided, tc.value, tc.pttl)
		}
	}
}

// A resignation of an older term, confirmed late (a slow node's history
// had it), does not end the current term for the observer: the current
// leader's Proclaims are still sent.
func TestObserver_oldResignation(t *testing.T) {
	leads := func(value string, seq int64) nodeView {
		return nodeView{leader: Leader{Value: value, Term: 5, LeaseID: "La"}, seq: seq, pttl: time.Second, last: "x"}
	}
	resigned3 := change{id: changeID{kind: "resigned", term: 3, lease: "Lx", seq: math.MaxInt64}}
	proclaimed := change{id: changeID{kind: "proclaimed", term: 5, lease: "La", seq: 1}, value: "a2"}
	o := &observer{majority: 2, last: make([]string, 3), seen: map[changeID]*seenChange{}}
	if got, _, _ := o.update([]nodeView{leads("a", 0), leads("a", 0), leads("a", 0)}); len(got) != 1 || got[0].Value != "a" {
		t.Fatalf("first update sent %+v, want the leader a", got)
	}
	with := func(v nodeView, entries ...change) nodeView { v.entries = entries; return v }
	got, _, _ := o.update([]nodeView{
		with(leads("a2", 1), resigned3, proclaimed),
		with(leads("a2", 1), resigned3, proclaimed),
		leads("a", 0),
	})
	if len(got) != 1 || got[0].Value != "a2" || got[0].Term != 5 {
		t.Errorf("after term 3's resignation and term 5's Proclaim, sent %+v; want a2 of term 5", got)
	}
	// A later Proclaim is sent too.
	proclaimed2 := change{id: changeID{kind: "proclaimed", term: 5, lease: "La", seq: 2}, value: "a3"}
	got, _, _ = o.update([]nodeView{with(leads("a3", 2), proclaimed2), with(leads("a3", 2), proclaimed2), leads("a2", 1)})
	if len(got) != 1 || got[0].Value != "a3" {
		t.Errorf("next Proclaim sent %+v; want a3", got)
	}
}
