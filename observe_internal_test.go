package fencelock

import (
	"math"
	"slices"
	"testing"
	"time"
)

// The observer's rules for a quorum, on views of three nodes as
// leader.lua returns them: a change is sent once a majority of histories
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

// decide names the leader a majority agrees on, with the latest value
// among them, and the soonest expiry.
func TestDecide(t *testing.T) {
	a1 := nodeView{leader: Leader{Value: "a", Term: 3, LeaseID: "La"}, pttl: 900 * time.Millisecond}
	a2 := nodeView{leader: Leader{Value: "a2", Term: 3, LeaseID: "La"}, seq: 1, pttl: 500 * time.Millisecond}
	b := nodeView{leader: Leader{Value: "b", Term: 4, LeaseID: "Lb"}}
	down := nodeView{err: errPending}
	for _, tc := range []struct {
		name    string
		views   []nodeView
		decided bool
		value   string
		pttl    time.Duration
	}{
		{"one node", []nodeView{a1}, true, "a", 900 * time.Millisecond},
		{"one node down", []nodeView{down}, false, "", 0},
		{"majority", []nodeView{a1, a2, {}}, true, "a2", 500 * time.Millisecond},
		{"split", []nodeView{a1, b, {}}, true, "", 0},
		{"open", []nodeView{a1, down, {}}, false, "", 0},
		{"none", []nodeView{{}, {}, down}, true, "", 0},
	} {
		v := decide(tc.views, len(tc.views)/2+1)
		if v.decided != tc.decided || v.leader.Value != tc.value || v.pttl != tc.pttl {
			t.Errorf("%s: decide = %+v, want decided %t, value %q, pttl %v", tc.name, v, tc.decided, tc.value, tc.pttl)
		}
	}
}
