package chaos

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencelock/fencelock/fence"
)

// Hand-made histories for the model: each violating one breaks the fence
// rule in one way, and the checks that use the model must say so.

// f returns a fence of lock "L".
func f(token int64, lease string) fence.Fence {
	return fence.Fence{Lock: "L", Token: token, Lease: lease}
}

// seq builds a sequential history on one resource from (input, output)
// pairs: each call returns before the next is made.
func seq(ops ...Op) []Op {
	for i := range ops {
		ops[i].ID = int64(i + 1)
		ops[i].Client = i % 3
		ops[i].Call, ops[i].Return = int64(10*i), int64(10*i+5)
		if ops[i].Input.Resource == "" {
			ops[i].Input.Resource = Counter
		}
	}
	return ops
}

func put(fe fence.Fence, v string, result string) Op {
	return Op{Input: Input{Op: OpPut, Fence: fe, Value: v}, Output: Output{Result: result}}
}

func get(fe fence.Fence, result string, v string, present bool) Op {
	return Op{Input: Input{Op: OpGet, Fence: fe}, Output: Output{Result: result, Value: v, Present: present}}
}

func del(fe fence.Fence, result string) Op {
	return Op{Input: Input{Op: OpDelete, Fence: fe}, Output: Output{Result: result}}
}

func TestAdmits(t *testing.T) {
	cases := []struct {
		name     string
		cur, new fence.Fence
		want     bool
	}{
		{"nothing stored", fence.Fence{}, f(1, "a"), true},
		{"greater token", f(5, "a"), f(6, "b"), true},
		{"equal token, same lease", f(5, "a"), f(5, "a"), true},
		{"equal token, other lease", f(5, "a"), f(5, "b"), false},
		{"smaller token", f(5, "a"), f(4, "a"), false},
		{"other lock, greater token", f(5, "a"), fence.Fence{Lock: "M", Token: 9, Lease: "a"}, false},
	}
	for _, c := range cases {
		if got := admits(c.cur, c.new); got != c.want {
			t.Errorf("%s: admits(%v, %v) = %t, want %t", c.name, c.cur, c.new, got, c.want)
		}
	}
}

func TestFencedRegister(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		want porcupine.CheckResult
	}{
		{"increasing tokens accepted, stale rejected", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			get(f(2, "b"), ResultOK, "1/0.1", true),
			put(f(2, "b"), "2/1.1", ResultOK),
			put(f(1, "a"), "2/0.2", ResultStale),
			get(f(2, "b"), ResultOK, "2/1.1", true),
			del(f(3, "c"), ResultOK),
			get(f(3, "c"), ResultOK, "", false),
		), porcupine.Ok},
		{"a fenced read records its fence", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			get(f(2, "b"), ResultOK, "1/0.1", true),
			put(f(1, "a"), "2/0.2", ResultStale),
		), porcupine.Ok},
		{"an unknown put that took effect", seq(
			put(f(1, "a"), "1/0.1", ResultUnknown),
			get(f(2, "b"), ResultOK, "1/0.1", true),
		), porcupine.Ok},
		{"an unknown put that did not", seq(
			put(f(1, "a"), "1/0.1", ResultUnknown),
			get(f(2, "b"), ResultOK, "", false),
		), porcupine.Ok},
		{"resources are independent", seq(
			put(f(2, "b"), "2/1.1", ResultOK),
			Op{Input: Input{Resource: Note, Op: OpPut, Fence: f(1, "a"), Value: "0/0.1"}, Output: Output{Result: ResultOK}},
		), porcupine.Ok},

		{"stale put accepted", seq(
			put(f(2, "b"), "1/1.1", ResultOK),
			put(f(1, "a"), "1/0.1", ResultOK),
		), porcupine.Illegal},
		{"stale put accepted after a fenced read", seq(
			get(f(2, "b"), ResultOK, "", false),
			put(f(1, "a"), "1/0.1", ResultOK),
		), porcupine.Illegal},
		{"equal token of another lease accepted", seq(
			put(f(2, "b"), "1/1.1", ResultOK),
			put(f(2, "c"), "1/2.1", ResultOK),
		), porcupine.Illegal},
		{"another lock's fence accepted", seq(
			put(f(2, "b"), "1/1.1", ResultOK),
			put(fence.Fence{Lock: "M", Token: 3, Lease: "c"}, "1/2.1", ResultOK),
		), porcupine.Illegal},
		{"stale delete accepted", seq(
			put(f(2, "b"), "1/1.1", ResultOK),
			del(f(1, "a"), ResultOK),
		), porcupine.Illegal},
		{"admissible put reported stale", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			put(f(2, "b"), "2/1.1", ResultStale),
		), porcupine.Illegal},
		{"read returns a value never written", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			get(f(2, "b"), ResultOK, "7/2.1", true),
		), porcupine.Illegal},
		{"read misses a write", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			get(f(2, "b"), ResultOK, "", false),
		), porcupine.Illegal},
		{"read after a delete returns the value", seq(
			put(f(1, "a"), "1/0.1", ResultOK),
			del(f(2, "b"), ResultOK),
			get(f(3, "c"), ResultOK, "1/0.1", true),
		), porcupine.Illegal},
	}
	for _, c := range cases {
		got := porcupine.CheckOperationsTimeout(FencedRegister, Operations(c.ops), 5*time.Second)
		if got != c.want {
			t.Errorf("%s: porcupine = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFencedRegister_concurrent: overlapping calls may take effect in
// either order, but not in one the fences forbid.
func TestFencedRegister_concurrent(t *testing.T) {
	ops := []Op{
		{ID: 1, Client: 0, Input: Input{Resource: Counter, Op: OpPut, Fence: f(2, "b"), Value: "x"}, Output: Output{Result: ResultOK}, Call: 0, Return: 10},
		{ID: 2, Client: 1, Input: Input{Resource: Counter, Op: OpPut, Fence: f(1, "a"), Value: "y"}, Output: Output{Result: ResultOK}, Call: 1, Return: 11},
	}
	if got := porcupine.CheckOperationsTimeout(FencedRegister, Operations(ops), 5*time.Second); got != porcupine.Ok {
		t.Errorf("overlapping puts t1, t2 both accepted: porcupine = %v, want Ok (t1 first)", got)
	}
	ops = append(ops, Op{ID: 3, Client: 2, Input: Input{Resource: Counter, Op: OpGet, Fence: f(3, "c")}, Output: Output{Result: ResultOK, Value: "y", Present: true}, Call: 20, Return: 21})
	if got := porcupine.CheckOperationsTimeout(FencedRegister, Operations(ops), 5*time.Second); got != porcupine.Illegal {
		t.Errorf("then a read returns t1's value: porcupine = %v, want Illegal (t1 must have come first)", got)
	}
}
