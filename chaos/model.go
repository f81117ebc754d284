package chaos

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/fencelock/fencelock/fence"
)

// The operations on a fenced resource.
const (
	OpGet    = "get"
	OpPut    = "put"
	OpDelete = "delete"
)

// The results of an operation, as its caller saw them.
const (
	ResultOK      = "ok"      // accepted
	ResultStale   = "stale"   // rejected with an error wrapping fence.ErrStale
	ResultUnknown = "unknown" // any other error: it may or may not have taken effect
)

// Input is what a fenced operation sends to the resource.
type Input struct {
	Resource string
	Op       string
	Fence    fence.Fence
	Value    string // for OpPut
}

// Output is what a fenced operation returned.
type Output struct {
	Result  string
	Value   string // for OpGet with ResultOK
	Present bool   // for OpGet with ResultOK: the resource had a value
}

// registerState is one resource: its value and the fence it last accepted.
type registerState struct {
	Value   string
	Present bool
	Fence   fence.Fence
}

// admits is the fence rule of DESIGN §4, written out again here rather
// than taken from package fence, so that the model is a specification and
// not the code under test: a resource that never accepted a fence takes
// any; otherwise the lock must be the same and the token greater, or
// equal with the same lease.
func admits(current, f fence.Fence) bool {
	switch {
	case current == fence.Fence{}:
		return true
	case f.Lock != current.Lock:
		return false
	case f.Token > current.Token:
		return true
	default:
		return f.Token == current.Token && f.Lease == current.Lease
	}
}

// step returns the states a resource can be in after in, given that the
// caller saw out, or none if out is impossible from s.
func step(s registerState, in Input, out Output) []any {
	ok := admits(s.Fence, in.Fence)
	next := s
	next.Fence = in.Fence
	switch in.Op {
	case OpPut:
		next.Value, next.Present = in.Value, true
	case OpDelete:
		next.Value, next.Present = "", false
	}
	switch out.Result {
	case ResultOK:
		if !ok {
			return nil
		}
		if in.Op == OpGet && (out.Value != s.Value || out.Present != s.Present) {
			return nil
		}
		return []any{next}
	case ResultStale:
		if ok {
			return nil
		}
		return []any{s}
	default: // unknown: it took effect, or it did not
		if ok && next != s {
			return []any{s, next}
		}
		return []any{s}
	}
}

// FencedRegister is the porcupine model of a fenced resource (DESIGN §4):
// per resource a register of (value, fence), where Put, Get and Delete
// are accepted iff the fence rule admits their fence, and then set the
// stored fence to it (a fenced read records the fence too). Accepted Puts
// and Deletes change the value, accepted Gets return it, and rejected
// operations return stale and change nothing. An operation whose caller
// got another error may or may not have taken effect.
//
// Histories are partitioned by resource.
var FencedRegister = fencedRegister.ToModel()

var fencedRegister = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byResource := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			r := op.Input.(Input).Resource
			if _, seen := byResource[r]; !seen {
				order = append(order, r)
			}
			byResource[r] = append(byResource[r], op)
		}
		parts := make([][]porcupine.Operation, 0, len(order))
		for _, r := range order {
			parts = append(parts, byResource[r])
		}
		return parts
	},
	Init: func() []any { return []any{registerState{}} },
	Step: func(state, input, output any) []any {
		return step(state.(registerState), input.(Input), output.(Output))
	},
	Equal: func(a, b any) bool { return a.(registerState) == b.(registerState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		s := fmt.Sprintf("%s(%s, t%d/%s", in.Op, in.Resource, in.Fence.Token%1e6, short(in.Fence.Lease))
		if in.Op == OpPut {
			s += ", " + in.Value
		}
		s += ") → " + out.Result
		if in.Op == OpGet && out.Result == ResultOK {
			if out.Present {
				s += " " + out.Value
			} else {
				s += " <none>"
			}
		}
		return s
	},
	DescribeState: func(state any) string {
		s := state.(registerState)
		v := "<none>"
		if s.Present {
			v = s.Value
		}
		return fmt.Sprintf("%s @ t%d/%s", v, s.Fence.Token%1e6, short(s.Fence.Lease))
	},
}

func short(s string) string {
	if len(s) > 6 {
		return s[:6]
	}
	return s
}
