package quorum

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/node"
)

// Holder decides by the one majority rule: a lease holds the lock
// when a majority of nodes say so, nobody does when no lease can reach a
// majority, and errors that could tip it leave it open.
func TestHolder(t *testing.T) {
	a := node.View{Held: true, LeaseID: "a", TTL: 3 * time.Second, Counter: 7}
	a2 := node.View{Held: true, LeaseID: "a", TTL: time.Second, Counter: 5}
	b := node.View{Held: true, LeaseID: "b", TTL: time.Second, Counter: 9}
	free := node.View{Counter: 7}
	down := node.View{Err: errors.New("down")}
	for _, c := range []struct {
		name          string
		views         []node.View
		held, decided bool
		lease         string
		token         int64
		ttl           time.Duration
	}{
		{"one node", []node.View{a}, true, true, "a", 7, 3 * time.Second},
		{"one node down", []node.View{down}, false, false, "", 0, 0},
		{"majority", []node.View{a, a2, free}, true, true, "a", 7, time.Second},
		{"one node's lease", []node.View{a, free, free}, false, true, "", 0, 0},
		{"split", []node.View{a, b, free}, false, true, "", 0, 0},
		{"open", []node.View{a, free, down}, false, false, "", 0, 0},
		{"majority, one down", []node.View{a, a2, down}, true, true, "a", 5, time.Second},
		{"minority of five", []node.View{a, a2, free, free, free}, false, true, "", 0, 0},
		{"open of five", []node.View{a, a2, free, free, down}, false, false, "", 0, 0},
	} {
		h, d := Holder(c.views)
		held, decided := d == MajorityYes, d != Undecided
		if held != c.held || decided != c.decided || h.LeaseID != c.lease || h.Token != c.token || h.TTL != c.ttl {
			t.Errorf("%s: Holder = %+v, held %t, decided %t; want lease %q token %d TTL %v, held %t, decided %t",
				c.name, h, held, decided, c.lease, c.token, c.ttl, c.held, c.decided)
		}
	}
}
