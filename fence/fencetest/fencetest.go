// Package fencetest checks that a fence.Store keeps the fencing rule, in
// the manner of testing/slogtest: one Run call per implementation, one
// subtest per property.
package fencetest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fencelock/fencelock/fence"
)

// Run checks the store returned by newStore against the rules of
// fence.Store. newStore is called once per subtest and must return an
// empty store; it may use t for cleanup, and subtests may run in
// parallel with each other.
func Run(t *testing.T, newStore func(t *testing.T) fence.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, newStore(t))
		})
	}
}

var cases = []struct {
	name string
	run  func(*testing.T, fence.Store)
}{
	{"Unwritten", testUnwritten},
	{"PutThenRead", testPutThenRead},
	{"Stale", testStale},
	{"SameTokenSameLease", testSameTokenSameLease},
	{"SameTokenOtherLease", testSameTokenOtherLease},
	{"Newer", testNewer},
	{"OtherLock", testOtherLock},
	{"PermitSlots", testPermitSlots},
	{"FencedRead", testFencedRead},
	{"FencedReadUnwritten", testFencedReadUnwritten},
	{"Delete", testDelete},
	{"Invalid", testInvalid},
	{"LargeTokens", testLargeTokens},
	{"TokenOrder", testTokenOrder},
	{"LargeValue", testLargeValue},
	{"EmptyValue", testEmptyValue},
	{"ResourceNames", testResourceNames},
	{"Concurrent", testConcurrent},
}

const resource = "orders:42"

func fenceOf(token int64, lease string) fence.Fence {
	return fence.Fence{Lock: "orders", Token: token, Lease: lease}
}

// mustPut puts value and fails the test if it is refused.
func mustPut(t *testing.T, s fence.Store, res string, f fence.Fence, value string) {
	t.Helper()
	if err := s.Put(t.Context(), res, f, []byte(value)); err != nil {
		t.Fatalf("Put(%q, %v, %q) = %v, want nil", res, f, value, err)
	}
}

// wantState fails the test unless resource holds value and fence.
func wantState(t *testing.T, s fence.Store, res string, value string, f fence.Fence) {
	t.Helper()
	got, gotF, err := s.Load(t.Context(), res)
	if err != nil {
		t.Fatalf("Load(%q) error = %v, want nil", res, err)
	}
	if string(got) != value || gotF != f {
		t.Errorf("Load(%q) = %q, %v; want %q, %v", res, got, gotF, value, f)
	}
}

// wantStale fails the test unless err is a *fence.StaleError for rejected
// that reports current.
func wantStale(t *testing.T, call string, err error, current, rejected fence.Fence) {
	t.Helper()
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("%s = %v, want ErrStale", call, err)
		return
	}
	var se *fence.StaleError
	if !errors.As(err, &se) {
		t.Errorf("%s = %v (%T), want a *StaleError in the chain", call, err, err)
		return
	}
	if se.Current != current || se.Rejected != rejected {
		t.Errorf("%s StaleError{Current: %v, Rejected: %v}, want {%v, %v}",
			call, se.Current, se.Rejected, current, rejected)
	}
}

func testUnwritten(t *testing.T, s fence.Store) {
	wantState(t, s, resource, "", fence.Fence{})
}

func testPutThenRead(t *testing.T, s fence.Store) {
	f := fenceOf(10, "a")
	mustPut(t, s, resource, f, "v10")
	wantState(t, s, resource, "v10", f)
	got, err := s.Get(t.Context(), resource, f)
	if err != nil || string(got) != "v10" {
		t.Errorf("Get(%q, %v) = %q, %v; want %q, nil", resource, f, got, err, "v10")
	}
}

func testStale(t *testing.T, s fence.Store) {
	cur, old := fenceOf(10, "a"), fenceOf(9, "b")
	mustPut(t, s, resource, cur, "v10")
	err := s.Put(t.Context(), resource, old, []byte("v9"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, old), err, cur, old)
	_, err = s.Get(t.Context(), resource, old)
	wantStale(t, fmt.Sprintf("Get(%q, %v)", resource, old), err, cur, old)
	err = s.Delete(t.Context(), resource, old)
	wantStale(t, fmt.Sprintf("Delete(%q, %v)", resource, old), err, cur, old)
	wantState(t, s, resource, "v10", cur)
}

func testSameTokenSameLease(t *testing.T, s fence.Store) {
	f := fenceOf(10, "a")
	mustPut(t, s, resource, f, "first")
	mustPut(t, s, resource, f, "second")
	wantState(t, s, resource, "second", f)
}

func testSameTokenOtherLease(t *testing.T, s fence.Store) {
	cur, other := fenceOf(10, "a"), fenceOf(10, "b")
	mustPut(t, s, resource, cur, "a")
	err := s.Put(t.Context(), resource, other, []byte("b"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, other), err, cur, other)
	wantState(t, s, resource, "a", cur)
}

func testNewer(t *testing.T, s fence.Store) {
	mustPut(t, s, resource, fenceOf(10, "a"), "v10")
	f := fenceOf(11, "b")
	mustPut(t, s, resource, f, "v11")
	wantState(t, s, resource, "v11", f)
}

func testOtherLock(t *testing.T, s fence.Store) {
	cur := fenceOf(10, "a")
	other := fence.Fence{Lock: "invoices", Token: 20, Lease: "b"}
	mustPut(t, s, resource, cur, "orders")
	err := s.Put(t.Context(), resource, other, []byte("invoices"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, other), err, cur, other)
	wantState(t, s, resource, "orders", cur)
}

// testPermitSlots: a semaphore's permits are fenced per slot, with
// names that carry the slot in braces (fencelock.SlotName): such names are
// accepted, a slot re-issued to a newer holder rejects the older one, and
// two slots of one semaphore are two locks to a resource.
func testPermitSlots(t *testing.T, s fence.Store) {
	slot := func(i int, token int64, lease string) fence.Fence {
		return fence.Fence{Lock: fmt.Sprintf("jobs{permit %d}", i), Token: token, Lease: lease}
	}
	stale, cur := slot(3, 10, "a"), slot(3, 11, "b")
	mustPut(t, s, resource, stale, "a")
	mustPut(t, s, resource, cur, "b")
	err := s.Put(t.Context(), resource, stale, []byte("late"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, stale), err, cur, stale)
	other := slot(4, 20, "c")
	err = s.Put(t.Context(), resource, other, []byte("c"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, other), err, cur, other)
	wantState(t, s, resource, "b", cur)
}

func testFencedRead(t *testing.T, s fence.Store) {
	old, reader := fenceOf(10, "a"), fenceOf(12, "b")
	mustPut(t, s, resource, old, "v10")
	got, err := s.Get(t.Context(), resource, reader)
	if err != nil || string(got) != "v10" {
		t.Fatalf("Get(%q, %v) = %q, %v; want %q, nil", resource, reader, got, err, "v10")
	}
	// The reader will act on what it read: the old holder must not write
	// in between, even with a token newer than its own last write.
	older := fenceOf(11, "c")
	err = s.Put(t.Context(), resource, older, []byte("v11"))
	wantStale(t, fmt.Sprintf("Put(%q, %v) after Get with %v", resource, older, reader), err, reader, older)
	wantState(t, s, resource, "v10", reader)
	mustPut(t, s, resource, reader, "v12")
	wantState(t, s, resource, "v12", reader)
}

func testFencedReadUnwritten(t *testing.T, s fence.Store) {
	reader := fenceOf(12, "b")
	got, err := s.Get(t.Context(), resource, reader)
	if err != nil || len(got) != 0 {
		t.Fatalf("Get(%q, %v) = %q, %v; want empty, nil", resource, reader, got, err)
	}
	wantState(t, s, resource, "", reader)
	older := fenceOf(11, "a")
	err = s.Put(t.Context(), resource, older, []byte("v11"))
	wantStale(t, fmt.Sprintf("Put(%q, %v) after Get with %v", resource, older, reader), err, reader, older)
}

func testDelete(t *testing.T, s fence.Store) {
	mustPut(t, s, resource, fenceOf(10, "a"), "v10")
	del := fenceOf(11, "b")
	if err := s.Delete(t.Context(), resource, del); err != nil {
		t.Fatalf("Delete(%q, %v) = %v, want nil", resource, del, err)
	}
	wantState(t, s, resource, "", del)
	old := fenceOf(10, "a")
	err := s.Put(t.Context(), resource, old, []byte("again"))
	wantStale(t, fmt.Sprintf("Put(%q, %v) after Delete", resource, old), err, del, old)
	if err := s.Delete(t.Context(), resource, del); err != nil {
		t.Errorf("Delete(%q, %v) again = %v, want nil", resource, del, err)
	}
}

func testInvalid(t *testing.T, s fence.Store) {
	cur := fenceOf(10, "a")
	mustPut(t, s, resource, cur, "v10")
	for _, f := range []fence.Fence{
		{Lock: "orders", Token: 0, Lease: "a"},
		{Lock: "orders", Token: -11, Lease: "a"},
		{Lock: "", Token: 11, Lease: "a"},
		{Lock: "orders", Token: 11, Lease: ""},
		{Lock: "orders\n", Token: 11, Lease: "a"},
		{Lock: "orders", Token: 11, Lease: "l\x00"},
		{Lock: "ordérs", Token: 11, Lease: "a"},
		{},
	} {
		if err := s.Put(t.Context(), resource, f, []byte("bad")); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Put(%q, %#v) = %v, want ErrInvalid", resource, f, err)
		}
		if _, err := s.Get(t.Context(), resource, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Get(%q, %#v) = %v, want ErrInvalid", resource, f, err)
		}
		if err := s.Delete(t.Context(), resource, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Delete(%q, %#v) = %v, want ErrInvalid", resource, f, err)
		}
		if err := s.Put(t.Context(), "other", f, []byte("bad")); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Put(%q, %#v) = %v, want ErrInvalid", "other", f, err)
		}
	}
	wantState(t, s, resource, "v10", cur)
	wantState(t, s, "other", "", fence.Fence{})
}

// testLargeTokens uses tokens that differ only beyond the 53 bits a
// float64 holds exactly.
func testLargeTokens(t *testing.T, s fence.Store) {
	top := fenceOf(math.MaxInt64-1, "a")
	mustPut(t, s, resource, top, "top")
	older := fenceOf(math.MaxInt64-2, "b")
	err := s.Put(t.Context(), resource, older, []byte("older"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, older), err, top, older)
	same := fenceOf(math.MaxInt64-1, "c")
	err = s.Put(t.Context(), resource, same, []byte("same"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", resource, same), err, top, same)
	newest := fenceOf(math.MaxInt64, "d")
	mustPut(t, s, resource, newest, "newest")
	wantState(t, s, resource, "newest", newest)

	// 2^53+1 is not a float64; 2^53 is, and equals float64(2^53+1). A
	// store that compares doubles refuses 2^53 after 2^53+1 by luck, so
	// both orders are tried.
	res := "precision"
	hi := fenceOf(1<<53+1, "a")
	mustPut(t, s, res, hi, "hi")
	lo := fenceOf(1<<53, "b")
	err = s.Put(t.Context(), res, lo, []byte("lo"))
	wantStale(t, fmt.Sprintf("Put(%q, %v)", res, lo), err, hi, lo)
	wantState(t, s, res, "hi", hi)

	res = "precision, rising"
	mustPut(t, s, res, lo, "lo")
	mustPut(t, s, res, hi, "hi")
	wantState(t, s, res, "hi", hi)
}

// tokenPairs are pairs of tokens that a store comparing anything but
// int64s gets wrong in at least one order: neighbours beyond 2^53, where
// doubles round them together; numbers of different lengths, which
// strings compare by their first digit; and numbers that differ only in
// their last digits, or only in their first, whatever the cut a
// comparison in parts makes.
var tokenPairs = [][2]int64{
	{1, 2},
	{9, 10},
	{99, 100},
	{999999999999999, 1000000000000000},
	{1000000000000000, 1000000000000001},
	{1 << 53, 1<<53 + 1},
	{1<<53 + 1, 1<<53 + 2},
	{1796112827851832, 1796112827851833},
	{1796112827851832, 2796112827851832},
	{1796112827851832, 17961128278518320},
	{4611686018427387903, 4611686018427387904},
	{5000000000000000000, 5000000000000000001},
	{1999999999000000000, 2000000000000000000},
	{math.MaxInt64 - 1, math.MaxInt64},
}

// testTokenOrder writes each pair of tokenPairs in both orders, each on a
// resource of its own, and wants the store to decide as Go's comparison
// of int64s does.
func testTokenOrder(t *testing.T, s fence.Store) {
	for i, p := range tokenPairs {
		CheckTokenOrder(t, s, fmt.Sprintf("rising %d", i), p[0], p[1])
		CheckTokenOrder(t, s, fmt.Sprintf("falling %d", i), p[1], p[0])
		CheckTokenOrder(t, s, fmt.Sprintf("equal %d", i), p[1], p[1])
	}
}

// CheckTokenOrder puts a fence with token first, then one of another
// lease with token second, on resource, which must be unwritten, and fails
// t unless the store accepts the second exactly when second > first, the
// int64 comparison, and ends up with the newer fence. Tokens must be
// positive.
func CheckTokenOrder(t *testing.T, s fence.Store, resource string, first, second int64) {
	t.Helper()
	a, b := fenceOf(first, "a"), fenceOf(second, "b")
	mustPut(t, s, resource, a, "first")
	err := s.Put(t.Context(), resource, b, []byte("second"))
	if second > first {
		if err != nil {
			t.Errorf("Put(%q, %v) after %v = %v, want nil: %d > %d", resource, b, a, err, second, first)
		}
		wantState(t, s, resource, "second", b)
		return
	}
	wantStale(t, fmt.Sprintf("Put(%q, %v) after %v", resource, b, a), err, a, b)
	wantState(t, s, resource, "first", a)
}

// FuzzTokenOrder fuzzes CheckTokenOrder on each of stores, one resource
// per input, starting from the pairs that Run's TokenOrder checks. Call it
// from a Fuzz function of the stores' tests; without -fuzz it runs just
// those pairs. Inputs are made positive by clearing the sign bit (0
// becomes 1).
func FuzzTokenOrder(f *testing.F, stores ...fence.Store) {
	for _, p := range tokenPairs {
		f.Add(p[0], p[1])
		f.Add(p[1], p[0])
	}
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, first, second int64) {
		first, second = positive(first), positive(second)
		resource := fmt.Sprintf("fuzz %d: %d then %d", n.Add(1), first, second)
		for _, s := range stores {
			CheckTokenOrder(t, s, resource, first, second)
		}
	})
}

func positive(n int64) int64 {
	if n &= math.MaxInt64; n == 0 {
		return 1
	}
	return n
}

func testLargeValue(t *testing.T, s fence.Store) {
	value := make([]byte, 1<<20)
	for i := range value {
		value[i] = byte(i * 7)
	}
	f := fenceOf(10, "a")
	if err := s.Put(t.Context(), resource, f, value); err != nil {
		t.Fatalf("Put(%q, %v, 1 MiB) = %v, want nil", resource, f, err)
	}
	got, err := s.Get(t.Context(), resource, f)
	if err != nil || !bytes.Equal(got, value) {
		t.Errorf("Get(%q, %v) = %d bytes, %v; want the 1 MiB written, nil", resource, f, len(got), err)
	}
}

func testEmptyValue(t *testing.T, s fence.Store) {
	f := fenceOf(10, "a")
	mustPut(t, s, resource, f, "")
	wantState(t, s, resource, "", f)
}

// testResourceNames writes a different fence to each name and checks that
// every name kept its own: names are opaque and compared byte for byte.
func testResourceNames(t *testing.T, s fence.Store) {
	names := []string{
		"", " ", "a", "A", "a ", "orders:42", "orders:42:fence", "{orders}",
		"}", "}x", "{", "a}b{c", "with space", "ünïcödé 😀", "-- ;'\"\\",
	}
	for i, name := range names {
		mustPut(t, s, name, fenceOf(int64(100+i), "a"), "value of "+name)
	}
	for i, name := range names {
		wantState(t, s, name, "value of "+name, fenceOf(int64(100+i), "a"))
	}
	// A newer token on one name leaves the others alone.
	mustPut(t, s, "a", fenceOf(1000, "b"), "new")
	mustPut(t, s, "A", fenceOf(104, "c"), "still accepted")
	wantState(t, s, "A", "still accepted", fenceOf(104, "c"))
}

// Concurrent checks only the property that Run's Concurrent subtest
// checks, on s, which may have been written to before (it uses resource
// names of its own). A store in process memory may need it many times
// over to meet the rare interleavings that a broken one gets wrong: its
// accesses are so short that writers seldom overlap.
func Concurrent(t *testing.T, s fence.Store) {
	t.Helper()
	testConcurrentOn(t, s, fmt.Sprintf("concurrent %d", concurrentRuns.Add(1)))
}

var concurrentRuns atomic.Int64

func testConcurrent(t *testing.T, s fence.Store) { testConcurrentOn(t, s, resource) }

// testConcurrentOn runs writers with mixed tokens and leases against one
// resource. Each writer does a fenced read and then a Put with the same
// fence whose value is what it read plus its own fence, so the value is a
// log of accepted writes in the order the store accepted them. Separately,
// every writer keeps the fences the store accepted from it. In a correct
// store the log's tokens never decrease, and no token is accepted for two
// leases, in the log or anywhere in the run.
func testConcurrentOn(t *testing.T, s fence.Store, resource string) {
	const writers, perWriter = 8, 25
	var clock atomic.Int64
	accepted := make([][]fence.Fence, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range perWriter {
				// Tokens mostly rise but arrive out of order, and
				// every token is tried with two leases.
				f := fenceOf(clock.Add(1)/4+1+r.Int64N(3), []string{"x", "y"}[r.IntN(2)])
				old, err := s.Get(t.Context(), resource, f)
				if errors.Is(err, fence.ErrStale) {
					continue
				}
				if err != nil {
					errs[w] = fmt.Errorf("Get(%q, %v) = %v", resource, f, err)
					return
				}
				accepted[w] = append(accepted[w], f)
				entry := fmt.Sprintf("%d %s\n", f.Token, f.Lease)
				err = s.Put(t.Context(), resource, f, append(old, entry...))
				if errors.Is(err, fence.ErrStale) {
					continue
				}
				if err != nil {
					errs[w] = fmt.Errorf("Put(%q, %v) = %v", resource, f, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	value, current, err := s.Load(t.Context(), resource)
	if err != nil {
		t.Fatalf("Load(%q) error = %v", resource, err)
	}
	leaseOf := map[int64]string{}
	var top fence.Fence
	for _, fs := range accepted {
		for _, f := range fs {
			if l, ok := leaseOf[f.Token]; ok && l != f.Lease {
				t.Errorf("token %d accepted for leases %q and %q", f.Token, l, f.Lease)
			}
			leaseOf[f.Token] = f.Lease
			if f.Token > top.Token {
				top = f
			}
		}
	}
	if current != top {
		t.Errorf("Load(%q) fence = %v, want the newest accepted, %v", resource, current, top)
	}
	var last fence.Fence
	lines := strings.Split(strings.TrimSuffix(string(value), "\n"), "\n")
	for i, line := range lines {
		tok, lease, _ := strings.Cut(line, " ")
		n, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			t.Fatalf("log line %d = %q, not written by this test", i, line)
		}
		f := fenceOf(n, lease)
		if f.Token < last.Token || (f.Token == last.Token && f.Lease != last.Lease) {
			t.Errorf("log line %d: %v accepted after %v", i, f, last)
		}
		last = f
	}
	if len(lines) < 2 {
		t.Errorf("log has %d entries, want several: too little was accepted to test anything", len(lines))
	}
	t.Logf("%d tokens accepted, %d writes in the log", len(leaseOf), len(lines))
}
