package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The invariants every run checks.
const (
	// The holders' history is linearizable against FencedRegister.
	InvLinearizable = "linearizable"
	// The resource's own journal, where there is one, is too.
	InvResourceLinearizable = "resource-linearizable"
	// Accepted tokens never decrease per resource: of two accepted
	// operations one of which returned before the other was called, the
	// later has the greater token, or the same token and lease.
	InvTokenOrder = "token-order"
	// No token is accepted for two leases.
	InvTwoLeases = "token-two-leases"
	// Every write the resource rejected was reported to its holder as
	// stale (ErrStale), and none it accepted was.
	InvStaleReported = "stale-reported"
	// No lost updates: the increments of the counter that took effect
	// wrote distinct counts, and the final count is their number.
	InvLostUpdate = "lost-update"
	// The lock issues increasing tokens: of two acquisitions one of which
	// returned before the other was called, the later has the greater
	// token; no token is issued twice.
	InvIssuedOrder = "issued-order"
)

// Invariants lists the invariants in the order reports print them.
var Invariants = []string{InvLinearizable, InvResourceLinearizable, InvTokenOrder, InvTwoLeases, InvStaleReported, InvLostUpdate, InvIssuedOrder}

// Report is the verdict on one run.
type Report struct {
	Ops, Accepted, Stale, Unknown int
	// ResourceStale counts the calls the resource's journal rejected,
	// whether or not their holder learnt it (a delayed request's holder
	// has given up by then).
	ResourceStale int
	// Violations counts the violations of each invariant, with one
	// example each in Details.
	Violations map[string]int
	Details    []string
	// TimedOut names the linearizability checks that porcupine gave up
	// on within the bound: the run is inconclusive on them, neither a
	// violation nor a pass.
	TimedOut []string
	// Info is porcupine's linearization of the holders' history, for
	// VisualizePath, when it was found illegal.
	Info *porcupine.LinearizationInfo
}

// Violated reports whether any invariant was violated.
func (r *Report) Violated() bool { return len(r.Violations) > 0 }

func (r *Report) fail(inv, format string, args ...any) {
	if r.Violations == nil {
		r.Violations = map[string]int{}
	}
	if r.Violations[inv] == 0 {
		r.Details = append(r.Details, inv+": "+fmt.Sprintf(format, args...))
	}
	r.Violations[inv]++
}

// Check checks a run's history against every invariant. timeout bounds
// each linearizability check.
func Check(h History, timeout time.Duration) *Report {
	r := &Report{Ops: len(h.Ops)}
	for _, op := range h.Ops {
		switch op.Output.Result {
		case ResultOK:
			r.Accepted++
		case ResultStale:
			r.Stale++
		default:
			r.Unknown++
		}
	}
	for _, op := range h.Resource {
		if op.Output.Result == ResultStale {
			r.ResourceStale++
		}
	}
	r.linearizable(InvLinearizable, h.Ops, timeout)
	if h.Resource != nil {
		r.linearizable(InvResourceLinearizable, h.Resource, timeout)
	}
	r.tokenOrder(h.Ops)
	if h.Resource != nil {
		r.tokenOrder(h.Resource)
		r.staleReported(h)
	}
	r.lostUpdates(h)
	r.issuedOrder(h.Leases)
	return r
}

func (r *Report) linearizable(inv string, ops []Op, timeout time.Duration) {
	res, info := porcupine.CheckOperationsVerbose(FencedRegister, Operations(ops), timeout)
	switch res {
	case porcupine.Illegal:
		r.fail(inv, "porcupine: history of %d operations is not linearizable", len(ops))
		if inv == InvLinearizable || r.Info == nil {
			r.Info = &info
		}
	case porcupine.Unknown:
		r.TimedOut = append(r.TimedOut, inv)
	}
}

func (r *Report) tokenOrder(ops []Op) {
	byResource := map[string][]Op{}
	leaseOf := map[int64]string{}
	for _, op := range ops {
		if op.Output.Result != ResultOK {
			continue
		}
		byResource[op.Input.Resource] = append(byResource[op.Input.Resource], op)
		f := op.Input.Fence
		if l, ok := leaseOf[f.Token]; ok && l != f.Lease {
			r.fail(InvTwoLeases, "token %d accepted for leases %s and %s", f.Token, l, f.Lease)
		}
		leaseOf[f.Token] = f.Lease
	}
	for res, acc := range byResource {
		slices.SortFunc(acc, func(a, b Op) int { return cmpInt(a.Return, b.Return) })
		// Scan in return order, keeping the greatest fence among the
		// operations that returned before each call.
		byCall := slices.Clone(acc)
		slices.SortFunc(byCall, func(a, b Op) int { return cmpInt(a.Call, b.Call) })
		var best Op
		var have bool
		i := 0
		for _, b := range byCall {
			for ; i < len(acc) && acc[i].Return < b.Call; i++ {
				if !have || acc[i].Input.Fence.Token > best.Input.Fence.Token {
					best, have = acc[i], true
				}
			}
			if !have {
				continue
			}
			bf, f := best.Input.Fence, b.Input.Fence
			if f.Token < bf.Token || (f.Token == bf.Token && f.Lease != bf.Lease) {
				r.fail(InvTokenOrder, "%s: %s with token %d (lease %s, client %d) accepted after token %d (lease %s, client %d) was",
					res, b.Input.Op, f.Token, f.Lease, b.Client, bf.Token, bf.Lease, best.Client)
			}
		}
	}
}

func (r *Report) staleReported(h History) {
	seen := map[int64]Op{}
	for _, op := range h.Ops {
		seen[op.ID] = op
	}
	for _, d := range h.Resource {
		c, ok := seen[d.ID]
		switch {
		case !ok:
			r.fail(InvStaleReported, "resource decided operation %d (client %d), which no holder recorded", d.ID, d.Client)
		case d.Output.Result == ResultStale && c.Output.Result == ResultOK:
			r.fail(InvStaleReported, "%s by client %d with token %d: rejected by the resource, reported as accepted", d.Input.Op, d.Client, d.Input.Fence.Token)
		case d.Output.Result == ResultOK && c.Output.Result == ResultStale:
			r.fail(InvStaleReported, "%s by client %d with token %d: accepted by the resource, reported as stale", d.Input.Op, d.Client, d.Input.Fence.Token)
		}
		// A holder whose call ended in another error (it timed out while
		// the request was delayed) could not learn the decision.
	}
}

// lostUpdates checks the application invariant: each increment of the
// counter writes the count it read plus one, so with fencing the writes
// that took effect (accepted, or seen by a later read) carry 1, 2, 3, …
// and the final count is their number.
func (r *Report) lostUpdates(h History) {
	observed := map[string]bool{}
	for _, op := range h.Ops {
		if op.Input.Resource == Counter && op.Input.Op == OpGet && op.Output.Result == ResultOK && op.Output.Present {
			observed[op.Output.Value] = true
		}
	}
	final, haveFinal := h.Final[Counter]
	if haveFinal && final.Present {
		observed[final.Value] = true
	}
	counts := map[int64]string{}
	effective := 0
	for _, op := range h.Ops {
		if op.Input.Resource != Counter || op.Input.Op != OpPut {
			continue
		}
		if op.Output.Result != ResultOK && !observed[op.Input.Value] {
			continue
		}
		effective++
		n, _ := ParseCount([]byte(op.Input.Value))
		if other, dup := counts[n]; dup {
			r.fail(InvLostUpdate, "writes %s and %s both took effect with count %d: one increment was lost", other, op.Input.Value, n)
		}
		counts[n] = op.Input.Value
	}
	if !haveFinal {
		return
	}
	n, _ := ParseCount([]byte(final.Value))
	if !final.Present {
		n = 0
	}
	if n != int64(effective) {
		r.fail(InvLostUpdate, "final count %d, want %d (the increments that took effect)", n, effective)
	}
}

func (r *Report) issuedOrder(leases []Acquisition) {
	byToken := map[int64]Acquisition{}
	for _, a := range leases {
		if b, dup := byToken[a.Token]; dup && b.Lease != a.Lease {
			r.fail(InvIssuedOrder, "token %d issued to leases %s (client %d) and %s (client %d)", a.Token, b.Lease, b.Client, a.Lease, a.Client)
		}
		byToken[a.Token] = a
	}
	byReturn := slices.Clone(leases)
	slices.SortFunc(byReturn, func(a, b Acquisition) int { return cmpInt(a.Return, b.Return) })
	byCall := slices.Clone(leases)
	slices.SortFunc(byCall, func(a, b Acquisition) int { return cmpInt(a.Call, b.Call) })
	var best Acquisition
	i := 0
	for _, b := range byCall {
		for ; i < len(byReturn) && byReturn[i].Return < b.Call; i++ {
			if byReturn[i].Token > best.Token {
				best = byReturn[i]
			}
		}
		if best.Token != 0 && b.Token <= best.Token {
			r.fail(InvIssuedOrder, "client %d acquired token %d after client %d had acquired token %d", b.Client, b.Token, best.Client, best.Token)
		}
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
