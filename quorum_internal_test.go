package fencelock

import (
	"fmt"
	"testing"
)

// The one majority rule, by its table: n nodes, so many ok, so many
// refused, so many errors (the rest not answered yet).
func TestQuorum_decide(t *testing.T) {
	for _, c := range []struct {
		n, yes, no, errs int
		keeping, taking  decision
	}{
		{1, 1, 0, 0, majorityYes, majorityYes},
		{1, 0, 1, 0, majorityNo, majorityNo},
		{1, 0, 0, 1, undecided, undecided},
		{1, 0, 0, 0, undecided, undecided},
		{2, 2, 0, 0, majorityYes, majorityYes},
		{2, 1, 1, 0, majorityNo, majorityNo},
		{2, 1, 0, 1, undecided, undecided},
		{2, 0, 1, 1, majorityNo, undecided},
		{2, 0, 2, 0, majorityNo, majorityNo},
		{3, 2, 0, 1, majorityYes, majorityYes},
		{3, 2, 1, 0, majorityYes, majorityYes},
		{3, 1, 1, 1, undecided, majorityNo},
		{3, 0, 1, 1, undecided, majorityNo}, // one pending
		{3, 0, 2, 0, majorityNo, majorityNo},
		{3, 1, 0, 2, undecided, undecided},
		{3, 0, 1, 2, undecided, undecided},
		{3, 0, 0, 3, undecided, undecided},
		{4, 3, 1, 0, majorityYes, majorityYes},
		{4, 2, 2, 0, majorityNo, majorityNo},
		{4, 2, 1, 1, undecided, majorityNo},
		{4, 2, 0, 2, undecided, undecided},
		{4, 1, 1, 2, undecided, undecided},
		{5, 3, 0, 2, majorityYes, majorityYes},
		{5, 2, 3, 0, majorityNo, majorityNo},
		{5, 2, 2, 1, undecided, majorityNo},
		{5, 1, 2, 2, undecided, majorityNo},
		{5, 1, 1, 3, undecided, undecided},
		{5, 2, 0, 3, undecided, undecided},
		{5, 0, 0, 0, undecided, undecided},
	} {
		tl := tally{yes: c.yes, no: c.no, errs: make([]error, c.errs)}
		if got := tl.decide(c.n, keeping); got != c.keeping {
			t.Errorf("n=%d yes=%d no=%d errs=%d keeping: got %v, want %v", c.n, c.yes, c.no, c.errs, got, c.keeping)
		}
		if got := tl.decide(c.n, taking); got != c.taking {
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
					tl := tally{yes: y, no: no, errs: make([]error, e)}
					name := fmt.Sprintf("n=%d yes=%d no=%d errs=%d", n, y, no, e)
					for _, r := range []rule{keeping, taking} {
						d := tl.decide(n, r)
						if (d == majorityYes) != (y >= maj) {
							t.Errorf("%s rule %d: got %v, want yes exactly when %d >= %d", name, r, d, y, maj)
						}
						if d == majorityNo && no == 0 {
							t.Errorf("%s rule %d: got no without a refusal", name, r)
						}
					}
					if d := tl.decide(n, keeping); d == majorityNo && n-no >= maj {
						t.Errorf("%s keeping: got no, but %d nodes did not refuse", name, n-no)
					}
				}
			}
		}
	}
}

func (d decision) String() string {
	return [...]string{"undecided", "yes", "no"}[d]
}

