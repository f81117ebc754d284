package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencelock/fencelock/fence"
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
	// token; no token is issued twice. Per fence name: a semaphore's
	// slots issue their tokens each on its own.
	InvIssuedOrder = "issued-order"
	// A semaphore's runs (History.Permits > 0): never more than Permits
	// leases in use at the resource at once. Lease L is surely in use on a
	// resource family (Counter, Note: each slot's record of it, see
	// SlotResource) from the return of its first accepted operation there
	// to the call of its last: its first decision came before that return,
	// its last after that call. No instant may lie strictly within the
	// spans of more than Permits leases of one family. Fencing guarantees
	// it: two leases of one slot write one record, where a newer token
	// shuts the older out, so their spans cannot overlap, and there are
	// Permits slots.
	InvPermits = "permits"
)

// Invariants lists the invariants in the order reports print them.
var Invariants = []string{InvLinearizable, InvResourceLinearizable, InvTokenOrder, InvTwoLeases, InvStaleReported, InvLostUpdate, InvIssuedOrder, InvPermits}

// SlotResource is the name of resource's record for the fence name lock
// (a semaphore's slot, SlotName): each slot writes a record of its own, as
// package fence wants one fence name per record.
func SlotResource(resource, lock string) string { return resource + "@" + lock }

// family returns the resource a record is of: Counter for Counter and
// for every slot's counter.
func family(resource string) string {
	f, _, _ := strings.Cut(resource, "@")
	return f
}

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
	if h.Permits > 0 {
		r.permits(h.Ops, h.Permits)
		if h.Resource != nil {
			r.permits(h.Resource, h.Permits)
		}
	}
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
	// Tokens are issued per fence name: two slots of a semaphore may
	// issue the same one.
	type issued struct {
		lock  string
		token int64
	}
	leaseOf := map[issued]string{}
	for _, op := range ops {
		if op.Output.Result != ResultOK {
			continue
		}
		byResource[op.Input.Resource] = append(byResource[op.Input.Resource], op)
		f := op.Input.Fence
		if l, ok := leaseOf[issued{f.Lock, f.Token}]; ok && l != f.Lease {
			r.fail(InvTwoLeases, "token %d accepted for leases %s and %s", f.Token, l, f.Lease)
		}
		leaseOf[issued{f.Lock, f.Token}] = f.Lease
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
// and the final count is their number. A semaphore's slots each have a
// counter of their own (SlotResource), checked each on its own.
func (r *Report) lostUpdates(h History) {
	counters := map[string]bool{}
	for _, op := range h.Ops {
		if family(op.Input.Resource) == Counter {
			counters[op.Input.Resource] = true
		}
	}
	for res := range h.Final {
		if family(res) == Counter {
			counters[res] = true
		}
	}
	for _, res := range slices.Sorted(maps.Keys(counters)) {
		r.lostUpdatesOf(h, res)
	}
}

// lostUpdatesOf checks the counter res.
func (r *Report) lostUpdatesOf(h History, res string) {
	observed := map[string]bool{}
	for _, op := range h.Ops {
		if op.Input.Resource == res && op.Input.Op == OpGet && op.Output.Result == ResultOK && op.Output.Present {
			observed[op.Output.Value] = true
		}
	}
	final, haveFinal := h.Final[res]
	if haveFinal && final.Present {
		observed[final.Value] = true
	}
	counts := map[int64]string{}
	effective := 0
	for _, op := range h.Ops {
		if op.Input.Resource != res || op.Input.Op != OpPut {
			continue
		}
		if op.Output.Result != ResultOK && !observed[op.Input.Value] {
			continue
		}
		effective++
		n, _ := ParseCount([]byte(op.Input.Value))
		if other, dup := counts[n]; dup {
			r.fail(InvLostUpdate, "%s: writes %s and %s both took effect with count %d: one increment was lost", res, other, op.Input.Value, n)
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
		r.fail(InvLostUpdate, "%s: final count %d, want %d (the increments that took effect)", res, n, effective)
	}
}

// issuedOrder checks the acquisitions of each fence name (a lock's, or
// each slot's of a semaphore) on their own.
func (r *Report) issuedOrder(leases []Acquisition) {
	byLock := map[string][]Acquisition{}
	for _, a := range leases {
		byLock[a.Lock] = append(byLock[a.Lock], a)
	}
	for _, lock := range slices.Sorted(maps.Keys(byLock)) {
		r.issuedOrderOf(byLock[lock])
	}
}

func (r *Report) issuedOrderOf(leases []Acquisition) {
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

// permits checks InvPermits on ops: per resource family, the span in
// which each lease was surely in use at the resource (from the return of
// its first accepted operation to the call of its last; empty unless
// the first returned before the last was called), and no instant strictly
// within more than n of them.
func (r *Report) permits(ops []Op, n int) {
	type key struct{ family, lease string }
	type span struct {
		from, to int64
		f        fence.Fence
		client   int
	}
	spans := map[key]*span{}
	var order []key
	for _, op := range ops {
		if op.Output.Result != ResultOK {
			continue
		}
		k := key{family(op.Input.Resource), op.Input.Fence.Lease}
		s, ok := spans[k]
		if !ok {
			s = &span{from: op.Return, to: op.Call, f: op.Input.Fence, client: op.Client}
			spans[k] = s
			order = append(order, k)
			continue
		}
		s.from, s.to = min(s.from, op.Return), max(s.to, op.Call)
	}
	// Sweep each family's spans in time order; at equal times an end
	// comes before a start, as spans are open.
	type edge struct {
		at    int64
		start bool
		s     *span
	}
	byFamily := map[string][]edge{}
	for _, k := range order {
		if s := spans[k]; s.from < s.to {
			byFamily[k.family] = append(byFamily[k.family], edge{s.from, true, s}, edge{s.to, false, s})
		}
	}
	for _, fam := range slices.Sorted(maps.Keys(byFamily)) {
		edges := byFamily[fam]
		slices.SortStableFunc(edges, func(a, b edge) int {
			if c := cmpInt(a.at, b.at); c != 0 {
				return c
			}
			switch {
			case a.start == b.start:
				return 0
			case a.start:
				return 1
			}
			return -1
		})
		var open []*span
		for _, e := range edges {
			if !e.start {
				open = slices.DeleteFunc(open, func(s *span) bool { return s == e.s })
				continue
			}
			open = append(open, e.s)
			if len(open) > n {
				var who []string
				for _, s := range open {
					who = append(who, fmt.Sprintf("client %d %s token %d lease %s", s.client, s.f.Lock, s.f.Token, short(s.f.Lease)))
				}
				r.fail(InvPermits, "%s: %d leases in use at once, want at most %d: %s", fam, len(open), n, strings.Join(who, "; "))
			}
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
