package quorum

import (
	"fmt"
	"testing"
)

// The one majority rule, by its table: n nodes, so many ok, so many
// refused, so many errors (the rest not answered yet).
func TestQuorum_decide(t *testing.T) {
	for _, c := range []struct {
		n, yes, no, errs int
		keeping, taking  Decision
	}{
		{1, 1, 0, 0, MajorityYes, MajorityYes},
		{1, 0, 1, 0, MajorityNo, MajorityNo},
		{1, 0, 0, 1, Undecided, Undecided},
		{1, 0, 0, 0, Undecided, Undecided},
		{2, 2, 0, 0, MajorityYes, MajorityYes},
		{2, 1, 1, 0, MajorityNo, MajorityNo},
		{2, 1, 0, 1, Undecided, Undecided},
		{2, 0, 1, 1, MajorityNo, Undecided},
		{2, 0, 2, 0, MajorityNo, MajorityNo},
		{3, 2, 0, 1, MajorityYes, MajorityYes},
		{3, 2, 1, 0, MajorityYes, MajorityYes},
		{3, 1, 1, 1, Undecided, MajorityNo},
		{3, 0, 1, 1, Undecided, MajorityNo}, // one pending
		{3, 0, 2, 0, MajorityNo, MajorityNo},
		{3, 1, 0, 2, Undecided, Undecided},
		{3, 0, 1, 2, Undecided, Undecided},
		{3, 0, 0, 3, Undecided, Undecided},
		{4, 3, 1, 0, MajorityYes, MajorityYes},
		{4, 2, 2, 0, MajorityNo, MajorityNo},
		{4, 2, 1, 1, Undecided, MajorityNo},
		{4, 2, 0, 2, Undecided, Undecided},
		{4, 1, 1, 2, Undecided, Undecided},
		{5, 3, 0, 2, MajorityYes, MajorityYes},
		{5, 2, 3, 0, MajorityNo, MajorityNo},
		{5, 2, 2, 1, Undecided, MajorityNo},
		{5, 1, 2, 2, Undecided, MajorityNo},
		{5, 1, 1, 3, Undecided, Undecided},
		{5, 2, 0, 3, Undecided, Undecided},
		{5, 0, 0, 0, Undecided, Undecided},
	} {
		tl := Tally{Yes: c.yes, No: c.no, Errs: make([]error, c.errs)}
		if got := tl.Decide(c.n, Keeping); got != c.keeping {
			t.Errorf("n=%d yes=%d no=%d errs=%d keeping: got %v, want %v", c.n, c.yes, c.no, c.errs, got, c.keeping)
		}
		if got := tl.Decide(c.n, Taking); got != c.taking {
			t.Errorf("n=%d yes=%d no=%d errs=%d taking: got %v, want %v", c.n, c.yes, c.no, c.errs, got, c.taking)
		}
	}
}

// The rule's promises over every mix of n = 1..5: a yes is a majority of
// oks; a keeping no leaves no way to a majority whatever the errors and
// the pending nodes would have said; a taking no has seen a refusal, and
// errors alone never decide against.
func TestQuorum_decideProperties(t *testing.T) {
	for n := 1; n <= 5; n++ {
		maj := n/2 + 1
		for y := 0; y <= n; y++ {
			for no := 0; y+no <= n; no++ {
				for e := 0; y+no+e <= n; e++ {
					tl := Tally{Yes: y, No: no, Errs: make([]error, e)}
					name := fmt.Sprintf("n=%d yes=%d no=%d errs=%d", n, y, no, e)
					for _, r := range []Rule{Keeping, Taking} {
						d := tl.Decide(n, r)
						if (d == MajorityYes) != (y >= maj) {
							t.Errorf("%s rule %d: got %v, want yes exactly when %d >= %d", name, r, d, y, maj)
						}
						if d == MajorityNo && no == 0 {
							t.Errorf("%s rule %d: got no without a refusal", name, r)
						}
					}
					if d := tl.Decide(n, Keeping); d == MajorityNo && n-no >= maj {
						t.Errorf("%s keeping: got no, but %d nodes did not refuse", name, n-no)
					}
				}
			}
		}
	}
}
