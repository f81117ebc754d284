package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// clean is a run in which fencing did its job: holder 0 reads and writes
// under token 1, stalls, holder 1 reads and writes under token 2, and
// holder 0's late write is rejected.
func clean() History {
	op := func(id int64, client int, in Input, out Output, call int64) Op {
		return Op{ID: id, Client: client, Input: in, Output: out, Call: call, Return: call + 1}
	}
	t1, t2 := f(1, "a"), f(2, "b")
	ops := []Op{
		op(1, 0, Input{Resource: Counter, Op: OpGet, Fence: t1}, Output{Result: ResultOK}, 2),
		op(2, 0, Input{Resource: Counter, Op: OpPut, Fence: t1, Value: "1/0.2"}, Output{Result: ResultOK}, 4),
		op(3, 1, Input{Resource: Counter, Op: OpGet, Fence: t2}, Output{Result: ResultOK, Value: "1/0.2", Present: true}, 22),
		op(4, 1, Input{Resource: Counter, Op: OpPut, Fence: t2, Value: "2/1.2"}, Output{Result: ResultOK}, 24),
		op(5, 1, Input{Resource: Note, Op: OpPut, Fence: t2, Value: "0/1.3"}, Output{Result: ResultOK}, 26),
		op(6, 0, Input{Resource: Counter, Op: OpPut, Fence: t1, Value: "2/0.3"}, Output{Result: ResultStale}, 30),
	}
	return History{
		Ops:      ops,
		Resource: slices.Clone(ops),
		Leases: []Acquisition{
			{Client: 0, Token: 1, Lease: "a", Call: 0, Return: 1},
			{Client: 1, Token: 2, Lease: "b", Call: 20, Return: 21},
		},
		Final: map[string]Final{
			Counter: {Value: "2/1.2", Present: true, Fence: t2},
			Note:    {Value: "0/1.3", Present: true, Fence: t2},
		},
	}
}

func TestCheck_clean(t *testing.T) {
	r := Check(clean(), 5*time.Second)
	if r.Violated() || len(r.TimedOut) > 0 {
		t.Fatalf("Check(clean) violations = %v %q, timed out %v; want none", r.Violations, r.Details, r.TimedOut)
	}
	if r.Ops != 6 || r.Accepted != 5 || r.Stale != 1 || r.ResourceStale != 1 {
		t.Errorf("Check(clean) ops/accepted/stale/resource stale = %d/%d/%d/%d, want 6/5/1/1", r.Ops, r.Accepted, r.Stale, r.ResourceStale)
	}
	if why := r.Inconclusive(1); why != nil {
		t.Errorf("Inconclusive(1 fault) = %q, want nil", why)
	}
}

// TestCheck_violations: each hand-made history breaks one invariant (and
// may break others with it); Check must report that one.
func TestCheck_violations(t *testing.T) {
	cases := []struct {
		inv    string
		name   string
		mutate func(h *History)
		// only, if set, says the history breaks nothing else.
		only bool
	}{
		{InvLinearizable, "a holder read a value never written", func(h *History) {
			h.Ops[2].Output.Value = "9/2.1"
		}, true},
		{InvResourceLinearizable, "the resource read a value never written", func(h *History) {
			h.Resource[2].Output.Value = "9/2.1"
		}, true},
		{InvTokenOrder, "the late write with token 1 was accepted", func(h *History) {
			h.Ops[5].Output.Result = ResultOK
			h.Resource[5].Output.Result = ResultOK
			h.Final[Counter] = Final{Value: "2/0.3", Present: true, Fence: f(1, "a")}
		}, false},
		{InvTwoLeases, "token 1 accepted for two leases", func(h *History) {
			for _, ops := range [][]Op{h.Ops, h.Resource} {
				ops[2].Input.Fence, ops[3].Input.Fence = f(1, "b"), f(1, "b")
				ops[4].Input.Fence = f(1, "b")
			}
		}, false},
		{InvStaleReported, "a rejection reported as accepted", func(h *History) {
			h.Ops[5].Output.Result = ResultOK
		}, false},
		{InvStaleReported, "an acceptance reported as stale", func(h *History) {
			h.Ops[4].Output.Result = ResultStale
		}, false},
		{InvStaleReported, "a decision no holder recorded", func(h *History) {
			h.Resource = append(h.Resource, Op{ID: 99, Client: 2, Input: Input{Resource: Note, Op: OpGet, Fence: f(2, "b")},
				Output: Output{Result: ResultOK, Value: "0/1.3", Present: true}, Call: 40, Return: 41})
		}, true},
		{InvLostUpdate, "the final count is not the number of increments", func(h *History) {
			h.Final[Counter] = Final{Value: "3/1.2", Present: true, Fence: f(2, "b")}
		}, true},
		{InvLostUpdate, "two increments wrote the same count", func(h *History) {
			// Holder 1 read before holder 0's write landed: both write 1.
			for _, ops := range [][]Op{h.Ops, h.Resource} {
				ops[2].Output = Output{Result: ResultOK}
				ops[3].Input.Value = "1/1.2"
			}
			h.Final[Counter] = Final{Value: "1/1.2", Present: true, Fence: f(2, "b")}
		}, false},
		{InvIssuedOrder, "a later acquisition got a smaller token", func(h *History) {
			h.Leases = append(h.Leases, Acquisition{Client: 2, Token: 1, Lease: "c", Call: 40, Return: 41})
		}, true},
		{InvIssuedOrder, "one token issued to two leases", func(h *History) {
			h.Leases = append(h.Leases, Acquisition{Client: 2, Token: 2, Lease: "c", Call: 20, Return: 21})
		}, true},
	}
	for _, c := range cases {
		h := clean()
		h.Final = maps.Clone(h.Final)
		c.mutate(&h)
		r := Check(h, 5*time.Second)
		if len(r.TimedOut) > 0 {
			t.Errorf("%s: porcupine timed out on %v", c.name, r.TimedOut)
			continue
		}
		if r.Violations[c.inv] == 0 {
			t.Errorf("%s: violations = %v, want %s", c.name, r.Violations, c.inv)
			continue
		}
		if c.only && len(r.Violations) != 1 {
			t.Errorf("%s: violations = %v %q, want only %s", c.name, r.Violations, r.Details, c.inv)
		}
	}
}

// TestCheck_timeout: a history porcupine cannot decide within the bound
// is inconclusive, neither a violation nor a pass.
func TestCheck_timeout(t *testing.T) {
	h := hard(24)
	r := Check(h, 20*time.Millisecond)
	if !slices.Contains(r.TimedOut, InvLinearizable) {
		t.Fatalf("Check(hard history, 20ms) timed out on %v, want %s", r.TimedOut, InvLinearizable)
	}
	if r.Violations[InvLinearizable] != 0 {
		t.Errorf("Check(hard history, 20ms) counts a timeout as a violation: %v", r.Violations)
	}
	why := r.Inconclusive(1)
	if !slices.Contains(why, "porcupine timed out on "+InvLinearizable) {
		t.Errorf("Inconclusive = %q, want it to name the timeout", why)
	}
}

// hard returns a history that is not linearizable but takes porcupine
// an exponential search to say so: n concurrent puts of unknown outcome,
// each under a greater token, then a read of a value none of them wrote.
func hard(n int) History {
	var h History
	for i := range n {
		h.Ops = append(h.Ops, Op{ID: int64(i + 1), Client: i,
			Input:  Input{Resource: Counter, Op: OpPut, Fence: f(int64(i+1), fmt.Sprint(i)), Value: fmt.Sprintf("1/%d.1", i)},
			Output: Output{Result: ResultUnknown}, Call: int64(i), Return: int64(100 + i)})
	}
	h.Ops = append(h.Ops, Op{ID: int64(n + 1), Client: n,
		Input:  Input{Resource: Counter, Op: OpGet, Fence: f(int64(n+1), "x")},
		Output: Output{Result: ResultOK, Value: "nobody's", Present: true}, Call: 200, Return: 201})
	return h
}

func TestInconclusive(t *testing.T) {
	cases := []struct {
		name   string
		r      Report
		faults int
		want   []string
	}{
		{"fault and stale", Report{Stale: 1}, 1, nil},
		{"stale at the resource only", Report{ResourceStale: 2}, 1, nil},
		{"no fault", Report{Stale: 1}, 0, []string{"no fault injected"}},
		{"no stale", Report{}, 2, []string{"no stale rejection"}},
		{"timeout", Report{Stale: 1, TimedOut: []string{InvResourceLinearizable}}, 1, []string{"porcupine timed out on " + InvResourceLinearizable}},
	}
	for _, c := range cases {
		if got := c.r.Inconclusive(c.faults); !slices.Equal(got, c.want) {
			t.Errorf("%s: Inconclusive = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMaxInconclusive(t *testing.T) {
	for _, c := range []struct{ runs, want int }{{1, 2}, {3, 2}, {20, 2}, {29, 2}, {30, 3}, {200, 20}} {
		if got := MaxInconclusive(c.runs); got != c.want {
			t.Errorf("MaxInconclusive(%d) = %d, want %d", c.runs, got, c.want)
		}
	}
}

// TestControl: the control counts each wanted invariant on its own; a
// violation of another does not stand in for it.
func TestControl(t *testing.T) {
	lin := &Report{Violations: map[string]int{InvLinearizable: 1, InvLostUpdate: 3}}
	lost := &Report{Violations: map[string]int{InvLostUpdate: 2}}
	none := &Report{}
	cases := []struct {
		name string
		want []string
		runs []*Report
		fail int // lines of Failures
	}{
		{"all violate both", []string{InvLinearizable, InvLostUpdate}, []*Report{lin, lin, lin}, 0},
		{"2 of 3 is 60%", []string{InvLinearizable}, []*Report{lin, lin, none}, 0},
		{"1 of 3 is not", []string{InvLinearizable}, []*Report{lin, none, none}, 1},
		{"another invariant does not count", []string{InvLinearizable}, []*Report{lost, lost, lost}, 1},
		{"each wanted one counts", []string{InvLinearizable, InvLostUpdate}, []*Report{lost, lost, lost}, 1},
		{"nothing wanted", nil, []*Report{lin, lin, lin}, 1},
		{"not an invariant", []string{"linearisable"}, []*Report{lin, lin, lin}, 1},
		{"6 of 10", []string{InvLostUpdate}, []*Report{lin, lin, lost, lost, lin, lost, none, none, none, none}, 0},
		{"5 of 10", []string{InvLostUpdate}, []*Report{lin, lin, lost, lost, lin, none, none, none, none, none}, 1},
	}
	for _, c := range cases {
		ctl := &Control{Want: c.want}
		for _, r := range c.runs {
			ctl.Add(r)
		}
		if got := ctl.Failures(); len(got) != c.fail {
			t.Errorf("%s: Failures() = %q, want %d line(s)", c.name, got, c.fail)
		}
	}
}

// semaphore is a run of a semaphore of 2 permits in which fencing did
// its job: lease a (slot 0) and lease b (slot 1) hold at once, both with
// token 1 (each slot issues its own), a stalls, c takes slot 0 with token
// 2, and a's late write is rejected. In use (from the return of the first
// accepted operation to the call of the last): a 3–10, b 5–40, c 21–34.
func semaphore() History {
	slot := func(i int, token int64, lease string) fence.Fence {
		return fence.Fence{Lock: "S{permit " + strconv.Itoa(i) + "}", Token: token, Lease: lease}
	}
	fa, fb, fc := slot(0, 1, "a"), slot(1, 1, "b"), slot(0, 2, "c")
	c0, c1 := SlotResource(Counter, fa.Lock), SlotResource(Counter, fb.Lock)
	op := func(id int64, client int, in Input, out Output, call int64) Op {
		return Op{ID: id, Client: client, Input: in, Output: out, Call: call, Return: call + 1}
	}
	ops := []Op{
		op(1, 0, Input{Resource: c0, Op: OpGet, Fence: fa}, Output{Result: ResultOK}, 2),
		op(2, 1, Input{Resource: c1, Op: OpGet, Fence: fb}, Output{Result: ResultOK}, 4),
		op(3, 0, Input{Resource: c0, Op: OpPut, Fence: fa, Value: "1/0.2"}, Output{Result: ResultOK}, 10),
		op(4, 2, Input{Resource: c0, Op: OpGet, Fence: fc}, Output{Result: ResultOK, Value: "1/0.2", Present: true}, 20),
		op(5, 0, Input{Resource: c0, Op: OpPut, Fence: fa, Value: "2/0.3"}, Output{Result: ResultStale}, 30),
		op(6, 2, Input{Resource: c0, Op: OpPut, Fence: fc, Value: "2/2.2"}, Output{Result: ResultOK}, 34),
		op(7, 1, Input{Resource: c1, Op: OpPut, Fence: fb, Value: "1/1.2"}, Output{Result: ResultOK}, 40),
	}
	return History{
		Ops:      ops,
		Resource: slices.Clone(ops),
		Leases: []Acquisition{
			{Client: 0, Lock: fa.Lock, Token: 1, Lease: "a", Call: 0, Return: 1},
			{Client: 1, Lock: fb.Lock, Token: 1, Lease: "b", Call: 1, Return: 2},
			{Client: 2, Lock: fc.Lock, Token: 2, Lease: "c", Call: 18, Return: 19},
		},
		Final: map[string]Final{
			c0: {Value: "2/2.2", Present: true, Fence: fc},
			c1: {Value: "1/1.2", Present: true, Fence: fb},
		},
		Permits: 2,
	}
}

func TestCheck_semaphore(t *testing.T) {
	r := Check(semaphore(), 5*time.Second)
	if r.Violated() || len(r.TimedOut) > 0 {
		t.Fatalf("Check(semaphore) violations = %v %q, timed out %v; want none", r.Violations, r.Details, r.TimedOut)
	}
}

// TestCheck_permits: InvPermits fails when more than Permits leases are
// in use at once, and only then.
func TestCheck_permits(t *testing.T) {
	third := fence.Fence{Lock: "S{permit 2}", Token: 1, Lease: "d"}
	c2 := SlotResource(Counter, third.Lock)
	// d reads at 6–7 and writes at 8–9: in use 7–8, with a and b.
	overlapping := []Op{
		{ID: 8, Client: 3, Input: Input{Resource: c2, Op: OpGet, Fence: third}, Output: Output{Result: ResultOK}, Call: 6, Return: 7},
		{ID: 9, Client: 3, Input: Input{Resource: c2, Op: OpPut, Fence: third, Value: "1/3.2"}, Output: Output{Result: ResultOK}, Call: 8, Return: 9},
	}
	cases := []struct {
		name   string
		mutate func(h *History)
		want   bool
		// only, if set and want, says the history breaks nothing else.
		only bool
	}{
		{"a third slot's lease in use with a and b", func(h *History) {
			h.Ops = append(h.Ops, overlapping...)
			h.Resource = append(h.Resource, overlapping...)
			h.Leases = append(h.Leases, Acquisition{Client: 3, Lock: third.Lock, Token: 1, Lease: "d", Call: 5, Return: 6})
			h.Final[c2] = Final{Value: "1/3.2", Present: true, Fence: third}
		}, true, true},
		{"the same, checked against 3 permits", func(h *History) {
			h.Ops = append(h.Ops, overlapping...)
			h.Resource = append(h.Resource, overlapping...)
			h.Leases = append(h.Leases, Acquisition{Client: 3, Lock: third.Lock, Token: 1, Lease: "d", Call: 5, Return: 6})
			h.Final[c2] = Final{Value: "1/3.2", Present: true, Fence: third}
			h.Permits = 3
		}, false, false},
		{"the stale holder's late write accepted: a, b and c in use at 21–30", func(h *History) {
			h.Ops[4].Output.Result = ResultOK
			h.Resource[4].Output.Result = ResultOK
		}, true, false},
		{"a's last call at c's first return: spans only touch", func(h *History) {
			// a's span ends at 21, c's starts at 21: two in use at once.
			for _, ops := range [][]Op{h.Ops, h.Resource} {
				ops[2].Call, ops[2].Return = 21, 22
			}
		}, false, false},
		{"a lease with one accepted operation is in use at no instant", func(h *History) {
			h.Ops = append(h.Ops, overlapping[1])
			h.Resource = append(h.Resource, overlapping[1])
			h.Final[c2] = Final{Value: "1/3.2", Present: true, Fence: third}
		}, false, false},
	}
	for _, c := range cases {
		h := semaphore()
		c.mutate(&h)
		r := Check(h, 5*time.Second)
		if len(r.TimedOut) > 0 {
			t.Errorf("%s: porcupine timed out on %v", c.name, r.TimedOut)
			continue
		}
		if got := r.Violations[InvPermits] > 0; got != c.want {
			t.Errorf("%s: %s violated = %t (violations %v %q), want %t", c.name, InvPermits, got, r.Violations, r.Details, c.want)
			continue
		}
		if c.only && len(r.Violations) != 1 {
			t.Errorf("%s: violations = %v %q, want only %s", c.name, r.Violations, r.Details, InvPermits)
		}
	}
}
