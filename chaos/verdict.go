package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// A fenced run proves something only if its fault happened and reached
// the resource; a negative control proves something only if it breaks
// the invariants its scenario exists for. These are the rules.

// ControlShare is the share of a scenario's unfenced runs that must
// violate each invariant the scenario names, in percent.
const ControlShare = 60

// Inconclusive returns why a fenced run proves nothing, or nil: the
// nemesis injected no fault, no call was rejected as stale (so no fault
// made a stale holder reach the resource), or porcupine gave up on a
// linearizability check (which is not a pass). faults is the number of
// faults the nemesis reports having injected.
func (r *Report) Inconclusive(faults int) []string {
	var why []string
	if faults == 0 {
		why = append(why, "no fault injected")
	}
	if r.Stale == 0 && r.ResourceStale == 0 {
		why = append(why, "no stale rejection")
	}
	for _, inv := range r.TimedOut {
		why = append(why, "porcupine timed out on "+inv)
	}
	return why
}

// MaxInconclusive is how many inconclusive fenced runs a scenario may
// have on top of its runs conclusive ones before it fails: a tenth, and
// at least two, so that unlucky runs in a short test do not fail it while
// a fault that never happens does. (At least one was too few: a holder
// crash is inconclusive in about 6% of runs, which failed a 3-run test
// in about 2% of tries.)
func MaxInconclusive(runs int) int { return max(2, runs/10) }

// ControlRuns is how many unfenced runs a negative control of runs runs
// may take: when it misses after runs, it gets more, up to three times
// as many, stopping as soon as it holds (Control.Failures is nil). In a
// short test a control that holds in 90% of runs would otherwise fail
// in about 3% of tries (one hit of 3), while a control that breaks
// nothing still fails, after ControlRuns runs.
func ControlRuns(runs int) int { return 3 * runs }

// Control judges a scenario's negative control: each invariant in Want
// must be violated by at least ControlShare percent of the unfenced runs.
// Another invariant's violations do not stand in for it.
type Control struct {
	Want []string

	runs     int
	violated map[string]int
}

// Add counts one unfenced run.
func (c *Control) Add(r *Report) {
	if c.violated == nil {
		c.violated = map[string]int{}
	}
	c.runs++
	for inv, n := range r.Violations {
		if n > 0 {
			c.violated[inv]++
		}
	}
}

// need is the number of runs that must violate each wanted invariant.
func (c *Control) need() int { return (c.runs*ControlShare + 99) / 100 }

// Failures returns one line per wanted invariant that too few runs
// violated, or per wanted name that is not an invariant; nil if the
// control holds. A Control that wants nothing fails: every scenario must
// name what its control breaks.
func (c *Control) Failures() []string {
	if len(c.Want) == 0 {
		return []string{"the scenario names no invariant its negative control must violate (set scenario.control)"}
	}
	var out []string
	for _, inv := range c.Want {
		if !slices.Contains(Invariants, inv) {
			out = append(out, fmt.Sprintf("%q is not an invariant (want one of %s)", inv, strings.Join(Invariants, ", ")))
			continue
		}
		if got, want := c.violated[inv], c.need(); got < want {
			out = append(out, fmt.Sprintf("%s: violated by %d of %d unfenced runs, want at least %d (%d%%)", inv, got, c.runs, want, ControlShare))
		}
	}
	return out
}

// String sums the control up: how many runs violated each invariant,
// wanted ones marked with *.
func (c *Control) String() string {
	var parts []string
	for _, inv := range Invariants {
		mark := ""
		if slices.Contains(c.Want, inv) {
			mark = "*"
		}
		if n := c.violated[inv]; n > 0 || mark != "" {
			parts = append(parts, fmt.Sprintf("%s%s %d/%d", inv, mark, n, c.runs))
		}
	}
	return strings.Join(parts, ", ")
}
