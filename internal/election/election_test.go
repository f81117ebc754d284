package election

import (
	"errors"
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
	leads := func(term int64, value string) View {
		return View{Leader: Leader{Value: value, Term: term, LeaseID: "L" + value, Since: time.UnixMicro(term)}, PTTL: time.Second}
	}
	none := View{}
	down := View{Err: errors.New("no answer yet")}
	with := func(v View, entries ...change) View { v.Entries = entries; v.Last = "x"; return v }
	terms := func(ls []Leader) []int64 {
		var out []int64
		for _, l := range ls {
			out = append(out, l.Term)
		}
		return out
	}

	o := NewObserver(3)
	step := func(what string, views []View, want []int64) {
		t.Helper()
		got, _, _ := o.Update(views)
		if !slices.Equal(terms(got), want) {
			t.Errorf("%s: sent terms %v, want %v", what, terms(got), want)
		}
	}
	step("start", []View{none, none, down}, []int64{0})
	// A failed campaign: elected on one history only, then resigned.
	step("minority", []View{with(none, elected(5, "x"), resigned(5, "x")), none, none}, nil)
	// Term 7 on one history, then on a second: sent once, when a majority has it.
	step("one of three", []View{with(leads(7, "a"), elected(7, "a")), none, down}, nil)
	step("two of three", []View{leads(7, "a"), with(leads(7, "a"), elected(7, "a")), down}, []int64{7})
	step("third", []View{leads(7, "a"), leads(7, "a"), with(leads(7, "a"), elected(7, "a"))}, nil)
	// 7 resigns and 9 is elected between two reads: both, in order.
	step("handover", []View{
		with(leads(9, "b"), resigned(7, "a"), elected(9, "b")),
		with(leads(9, "b"), resigned(7, "a"), elected(9, "b")),
		with(none, resigned(7, "a")),
	}, []int64{0, 9})
	// The minority's term 5 can never be sent now, even if it reached a majority.
	step("old", []View{leads(9, "b"), with(leads(9, "b"), elected(5, "x")), with(leads(9, "b"), elected(5, "x"))}, nil)
	// 9 expires, unannounced: the views decide nobody leads.
	step("expiry", []View{none, none, down}, []int64{0})
	// A term the histories lost (a restart without persistence): the
	// views that decide it are enough.
	step("lost history", []View{leads(12, "c"), leads(12, "c"), none}, []int64{12})
	// Undecided views change nothing.
	step("undecided", []View{leads(12, "c"), down, down}, nil)
	if o.cur.Term != 12 {
		t.Errorf("current term = %d, want 12", o.cur.Term)
	}
}

// decide names the leader a majority agrees on, with the latest value a
// majority of records holds, and the soonest expiry.
func TestDecide(t *testing.T) {
	a1 := View{Leader: Leader{Value: "a", Term: 3, LeaseID: "La"}, PTTL: 900 * time.Millisecond}
	a2 := View{Leader: Leader{Value: "a2", Term: 3, LeaseID: "La"}, Seq: 1, PTTL: 500 * time.Millisecond}
	a3 := View{Leader: Leader{Value: "a3", Term: 3, LeaseID: "La"}, Seq: 2, PTTL: 500 * time.Millisecond}
	a4 := View{Leader: Leader{Value: "a4", Term: 3, LeaseID: "La"}, Seq: 3, PTTL: 500 * time.Millisecond}
	b := View{Leader: Leader{Value: "b", Term: 4, LeaseID: "Lb"}}
	down := View{Err: errors.New("no answer yet")}
	hist := func(v View, seqs ...int64) View { v.Seqs = seqs; return v }
	for _, tc := range []struct {
		name    string
		views   []View
		decided bool
		value   string
		pttl    time.Duration
	}{
		{"one node", []View{a1}, true, "a", 900 * time.Millisecond},
		{"one node down", []View{down}, false, "", 0},
		// A Proclaim on one node of three failed: its value is not the
		// leader's.
		{"minority value", []View{a1, a2, {}}, true, "a", 500 * time.Millisecond},
		{"majority value", []View{a2, a2, a1}, true, "a2", 500 * time.Millisecond},
		{"majority value, one down", []View{a2, a2, down}, true, "a2", 500 * time.Millisecond},
		// The node down may hold a2 (the Proclaim succeeded) or not.
		{"value open", []View{a2, a1, down}, false, "", 0},
		{"minority value, one down", []View{a1, a1, a2, down, {}}, true, "a", 500 * time.Millisecond},
		{"value open of five", []View{a1, a2, a2, down, {}}, false, "", 0},
		{"majority value of five", []View{a1, a2, a2, a2, down}, true, "a2", 500 * time.Millisecond},
		// A Proclaim (a2) reached node 0 only, and the next one (a3) is
		// on its way: node 1 has it, node 2 not yet. Node 0 is the
		// majority-th greatest record, but its value is a minority's;
		// the histories tell which seqs each node accepted.
		{"minority value, overtaken", []View{hist(a2, 0, 1), hist(a3, 0, 2), hist(a1, 0)}, true, "a", 500 * time.Millisecond},
		{"minority value, overtaken, one down", []View{hist(a2, 0, 1), hist(a3, 0, 2), down}, false, "", 0},
		// a2 reached nodes 0 and 1; a3 only node 1.
		{"majority value, overtaken", []View{hist(a2, 0, 1), hist(a3, 0, 1, 2), hist(a1, 0)}, true, "a2", 500 * time.Millisecond},
		// a2 reached nodes 0 and 1, which have both moved on to values
		// of their own: no record holds a2 any more.
		{"majority value, no record", []View{hist(a3, 0, 1, 2), hist(a4, 0, 1, 3), hist(a1, 0)}, false, "", 0},
		// A history that does not reach back to the election (trimmed,
		// or lost in a restart) says nothing of the seqs before it: the
		// node is taken to have accepted them, as without histories.
		{"history trimmed", []View{hist(a3, 2), hist(a2, 1), hist(a1, 0)}, true, "a2", 500 * time.Millisecond},
		{"split", []View{a1, b, {}}, true, "", 0},
		{"open", []View{a1, down, {}}, false, "", 0},
		{"none", []View{{}, {}, down}, true, "", 0},
	} {
		v := Leading(tc.views)
		if v.Decided != tc.decided || v.Leader.Value != tc.value || v.PTTL != tc.pttl {
			t.Errorf("%s: Leading = %+v, want decided %t, value %q, pttl %v", tc.name, v, tc.decided, tc.value, tc.pttl)
		}
	}
}

// A resignation of an older term, confirmed late (a slow node's history
// had it), does not end the current term for the observer: the current
// leader's Proclaims are still sent.
func TestObserver_oldResignation(t *testing.T) {
	leads := func(value string, seq int64) View {
		return View{Leader: Leader{Value: value, Term: 5, LeaseID: "La"}, Seq: seq, PTTL: time.Second, Last: "x"}
	}
	resigned3 := change{id: changeID{kind: "resigned", term: 3, lease: "Lx", seq: math.MaxInt64}}
	proclaimed := change{id: changeID{kind: "proclaimed", term: 5, lease: "La", seq: 1}, value: "a2"}
	o := NewObserver(3)
	if got, _, _ := o.Update([]View{leads("a", 0), leads("a", 0), leads("a", 0)}); len(got) != 1 || got[0].Value != "a" {
		t.Fatalf("first update sent %+v, want the leader a", got)
	}
	with := func(v View, entries ...change) View { v.Entries = entries; return v }
	got, _, _ := o.Update([]View{
		with(leads("a2", 1), resigned3, proclaimed),
		with(leads("a2", 1), resigned3, proclaimed),
		leads("a", 0),
	})
	if len(got) != 1 || got[0].Value != "a2" || got[0].Term != 5 {
		t.Errorf("after term 3's resignation and term 5's Proclaim, sent %+v; want a2 of term 5", got)
	}
	// A later Proclaim is sent too.
	proclaimed2 := change{id: changeID{kind: "proclaimed", term: 5, lease: "La", seq: 2}, value: "a3"}
	got, _, _ = o.Update([]View{with(leads("a3", 2), proclaimed2), with(leads("a3", 2), proclaimed2), leads("a2", 1)})
	if len(got) != 1 || got[0].Value != "a3" {
		t.Errorf("next Proclaim sent %+v; want a3", got)
	}
}
