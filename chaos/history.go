package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/fencelock/fencelock/fence"
)

// Op is one fenced operation as recorded: by a holder around its call
// (what it saw, including errors), or by a Journal at the resource (what
// the resource decided).
type Op struct {
	ID     int64  `json:"id"`     // unique in a run; the same at both ends
	Client int    `json:"client"` // the holder
	Input  Input  `json:"input"`
	Output Output `json:"output"`
	Err    string `json:"err,omitempty"`
	Call   int64  `json:"call"`   // wall clock, ns
	Return int64  `json:"return"` // wall clock, ns
}

// Acquisition is one lease a holder acquired.
type Acquisition struct {
	Client int `json:"client"`
	// Lock is the lease's fence name (Fence().Lock): a lock's name, or a
	// semaphore's slot (SlotName). Tokens increase per fence name.
	Lock   string `json:"lock,omitempty"`
	Token  int64  `json:"token"`
	Lease  string `json:"lease"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
}

// History is what a run recorded.
type History struct {
	Ops      []Op          `json:"ops"`      // as the holders saw them
	Resource []Op          `json:"resource"` // as the resource decided, if journaled
	Leases   []Acquisition `json:"leases"`
	// Final is each resource's value and fence after the run.
	Final map[string]Final `json:"final"`
	// Permits, if not 0, says that the holders took permits of a
	// semaphore with that many, not a lock: InvPermits is checked.
	Permits int `json:"permits,omitempty"`
}

// Final is a resource's state after a run.
type Final struct {
	Value   string      `json:"value"`
	Present bool        `json:"present"`
	Fence   fence.Fence `json:"fence"`
}

// Recorder collects a History from concurrent holders.
type Recorder struct {
	// Stream, if set, receives every record as it is made, one JSON line
	// each (see ReadStream), so that a holder process killed mid-run
	// leaves behind what it did.
	Stream io.Writer

	mu sync.Mutex
	h  History
}

// streamed is one line of a Recorder's Stream.
type streamed struct {
	Op    *Op          `json:"op,omitempty"`
	Lease *Acquisition `json:"lease,omitempty"`
}

// stream writes one record; the caller holds r.mu. A line is one write,
// which a kill cannot split.
func (r *Recorder) stream(s streamed) {
	if r.Stream == nil {
		return
	}
	b, _ := json.Marshal(s)
	r.Stream.Write(append(b, '\n'))
}

// ReadStream reads what a Recorder's Stream received. A last line cut
// short (the process was killed while writing it) is left out.
func ReadStream(rd io.Reader) (History, error) {
	var h History
	sc := bufio.NewScanner(rd)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s streamed
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			if !bytes.HasSuffix(sc.Bytes(), []byte("}")) {
				break // cut short
			}
			return h, err
		}
		if s.Op != nil {
			h.Ops = append(h.Ops, *s.Op)
		}
		if s.Lease != nil {
			h.Leases = append(h.Leases, *s.Lease)
		}
	}
	return h, sc.Err()
}

// now is the clock of every record: the wall clock, so that records made
// by holder processes compare with those of the test process.
func now() int64 { return time.Now().UnixNano() }

// Op records an operation.
func (r *Recorder) Op(op Op) {
	r.mu.Lock()
	r.h.Ops = append(r.h.Ops, op)
	r.stream(streamed{Op: &op})
	r.mu.Unlock()
}

// Lease records an acquisition.
func (r *Recorder) Lease(a Acquisition) {
	r.mu.Lock()
	r.h.Leases = append(r.h.Leases, a)
	r.stream(streamed{Lease: &a})
	r.mu.Unlock()
}

// Merge adds what another recorder (a holder process) recorded.
func (r *Recorder) Merge(h History) {
	r.mu.Lock()
	r.h.Ops = append(r.h.Ops, h.Ops...)
	r.h.Leases = append(r.h.Leases, h.Leases...)
	r.mu.Unlock()
}

// MaxToken returns the greatest token acquired so far.
func (r *Recorder) MaxToken() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var m int64
	for _, a := range r.h.Leases {
		m = max(m, a.Token)
	}
	return m
}

// AcquisitionOf returns the acquisition of lease, if recorded.
func (r *Recorder) AcquisitionOf(lease string) (Acquisition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.IndexFunc(r.h.Leases, func(a Acquisition) bool { return a.Lease == lease })
	if i < 0 {
		return Acquisition{}, false
	}
	return r.h.Leases[i], true
}

// Any reports whether an operation recorded so far satisfies pred.
func (r *Recorder) Any(pred func(Op) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.h.Ops, pred)
}

// History returns a copy of what was recorded.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return History{Ops: slices.Clone(r.h.Ops), Leases: slices.Clone(r.h.Leases)}
}

// Operations converts ops into a porcupine history. An operation whose
// result is unknown may have taken effect at any time after its call:
// its return is put after the end of the history.
func Operations(ops []Op) []porcupine.Operation {
	var end int64
	for _, op := range ops {
		end = max(end, op.Return)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return
		if op.Output.Result == ResultUnknown {
			ret = min(end+1, math.MaxInt64)
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    op.Input,
			Output:   op.Output,
			Call:     op.Call,
			Return:   ret,
			Metadata: op.Err,
		})
	}
	return out
}

// WriteJSON writes h to path.
func (h History) WriteJSON(path string) error {
	b, err := json.MarshalIndent(h, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
