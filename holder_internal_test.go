package fencelock

import (
	"errors"
	"testing"
	"time"
)

// decideHolder decides by the one majority rule: a lease holds the lock
// when a majority of nodes say so, nobody does when no lease can reach a
// majority, and errors that could tip it leave it open.
func TestDecideHolder(t *testing.T) {
	a := holderView{held: true, h: Holder{LeaseID: "a", TTL: 3 * time.Second}, counter: 7}
	a2 := holderView{held: true, h: Holder{LeaseID: "a", TTL: time.Second}, counter: 5}
	b := holderView{held: true, h: Holder{LeaseID: "b", TTL: time.Second}, counter: 9}
	free := holderView{counter: 7}
	down := holderView{err: errors.New("down")}
	for _, c := range []struct {
		name          string
		views         []holderView
		held, decided bool
		lease         string
		token         int64
		ttl           time.Duration
	}{
		{"one node", []holderView{a}, true, true, "a", 7, 3 * time.Second},
		{"one node down", []holderView{down}, false, false, "", 0, 0},
		{"majority", []holderView{a, a2, free}, true, true, "a", 7, time.Second},
		{"one node's lease", []holderView{a, free, free}, false, true, "", 0, 0},
		{"split", []holderView{a, b, free}, false, true, "", 0, 0},
		{"open", []holderView{a, free, down}, false, false, "", 0, 0},
		{"majority, one down", []holderView{a, a2, down}, true, true, "a", 5, time.Second},
		{"minority of five", []holderView{a, a2, free, free, free}, false, true, "", 0, 0},
		{"open of five", []holderView{a, a2, free, free, down}, false, false, "", 0, 0},
	} {
		h, held, decided := decideHolder(c.views)
		if held != c.held || decided != c.decided || h.LeaseID != c.lease || h.Token != c.token || h.TTL != c.ttl {
			t.Errorf("%s: decideHolder = %+v, held %t, decided %t; want lease %q token %d TTL %v, held %t, decided %t",
				c.name, h, held, decided, c.lease, c.token, c.ttl, c.held, c.decided)
		}
	}
}
