package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
)

// The resources every holder uses.
const (
	// Counter is read, incremented and written back under the lock: the
	// application whose updates fencing must not lose.
	Counter = "counter"
	// Note is written, read or deleted now and then, so that histories
	// have more than one resource and the model meets Delete.
	Note = "note"
)

// Holder loops acquire → fenced read → compute → fenced write → release
// against the shared resource until its context ends. It is a worst-case
// holder: it never looks at its lease's Context before writing, as a
// process that was paused or delayed cannot; only the resource's fence
// check can stop its stale writes.
type Holder struct {
	ID    int
	Lock  *fencelock.Client
	Name  string // the lock name
	Store fence.Store
	Rec   *Recorder
	Rand  *rand.Rand

	// TTL is the lock's TTL: computations are sized against it.
	TTL time.Duration
	// OpTimeout bounds each operation on the resource and each release.
	OpTimeout time.Duration
	// AfterRead, if set, is the nemesis's hook, called after each accepted
	// fenced read of Counter with the computation the holder is about to
	// make. If it returns a channel, the holder stalls after computing
	// until the channel is closed.
	AfterRead func(client int, f fence.Fence, compute time.Duration) <-chan struct{}
	// Permits, if not 0, makes Name a semaphore of that many permits: a
	// cycle takes one permit, and its operations go to the records of the
	// permit's slot (SlotResource of the fence name).
	Permits int

	seq int64
	sem *fencelock.Semaphore
}

// Run runs cycles until ctx ends.
func (h *Holder) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if !h.cycle(ctx) {
			// The lock could not be had (the network, a failover): pace
			// the next attempt; Acquire itself waits on releases.
			select {
			case <-ctx.Done():
			case <-time.After(h.TTL / 4):
			}
		}
	}
}

func (h *Holder) cycle(ctx context.Context) bool {
	actx, cancel := context.WithTimeout(ctx, 20*h.TTL)
	call := now()
	l, err := h.acquire(actx)
	ret := now()
	cancel()
	if err != nil {
		return false
	}
	h.Rec.Lease(Acquisition{Client: h.ID, Lock: l.Fence().Lock, Token: l.Token(), Lease: l.ID(), Call: call, Return: ret})
	opctx := h.Hold(ctx, l.Fence())
	rctx, cancel := context.WithTimeout(opctx, h.OpTimeout)
	l.Release(rctx) // a lost lease is expected here; the resource decides
	cancel()
	return true
}

// acquire takes the lock, or a permit.
func (h *Holder) acquire(ctx context.Context) (*fencelock.Lease, error) {
	if h.Permits == 0 {
		return h.Lock.Acquire(ctx, h.Name)
	}
	if h.sem == nil {
		h.sem = h.Lock.Semaphore(h.Name, h.Permits)
	}
	return h.sem.Acquire(ctx)
}

// record returns the name of resource's record that f's operations go
// to: resource itself under a lock, the slot's record under a permit.
func (h *Holder) record(resource string, f fence.Fence) string {
	if h.Permits == 0 {
		return resource
	}
	return SlotResource(resource, f.Lock)
}

// Hold is what a cycle does under a lease whose fence is f, after the
// acquire and before the release: a fenced read of the counter, the
// computation, the fenced write, and now and then an operation on Note.
// A holder whose lease someone else acquired (the COMMAND of fencelock
// run) calls it directly. It returns the context of the operations, which
// outlives ctx.
func (h *Holder) Hold(ctx context.Context, f fence.Fence) context.Context {
	// Operations outlive the run's end by at most OpTimeout, so that the
	// last cycle's results are known.
	opctx := context.WithoutCancel(ctx)

	counter, note := h.record(Counter, f), h.record(Note, f)
	v, got := h.op(opctx, Input{Resource: counter, Op: OpGet, Fence: f})
	if got.Result == ResultOK {
		compute := h.compute()
		var stall <-chan struct{}
		if h.AfterRead != nil {
			stall = h.AfterRead(h.ID, f, compute)
		}
		wait(ctx, compute)
		if stall != nil {
			<-stall
		}
		count, _ := ParseCount(v)
		h.op(opctx, Input{Resource: counter, Op: OpPut, Fence: f, Value: h.value(count + 1)})
	}
	switch h.Rand.IntN(6) {
	case 0:
		h.op(opctx, Input{Resource: note, Op: OpPut, Fence: f, Value: h.value(0)})
	case 1:
		h.op(opctx, Input{Resource: note, Op: OpDelete, Fence: f})
	case 2:
		h.op(opctx, Input{Resource: note, Op: OpGet, Fence: f})
	}
	return opctx
}

// compute returns how long the holder works between its read and its
// write: mostly briefly, sometimes several TTLs (the keeper renews the
// lease meanwhile, unless a fault stops it).
func (h *Holder) compute() time.Duration {
	if h.Rand.IntN(4) == 0 {
		return 4*h.TTL + time.Duration(h.Rand.Int64N(int64(2*h.TTL)))
	}
	return time.Duration(h.Rand.Int64N(int64(h.TTL/10) + 1))
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// value returns a unique value that carries the counter: "count/client.seq".
func (h *Holder) value(count int64) string {
	return strconv.FormatInt(count, 10) + "/" + strconv.Itoa(h.ID) + "." + strconv.FormatInt(h.seq, 10)
}

// ParseCount returns the counter in a value written by a holder.
func ParseCount(v []byte) (int64, bool) {
	if v == nil {
		return 0, true
	}
	c, _, _ := strings.Cut(string(v), "/")
	n, err := strconv.ParseInt(c, 10, 64)
	return n, err == nil
}

// op performs and records one fenced operation.
func (h *Holder) op(ctx context.Context, in Input) ([]byte, Output) {
	h.seq++
	id := int64(h.ID)<<40 | h.seq
	ctx, cancel := context.WithTimeout(WithOp(ctx, h.ID, id), h.OpTimeout)
	defer cancel()
	op := Op{ID: id, Client: h.ID, Input: in, Call: now()}
	var v []byte
	var err error
	switch in.Op {
	case OpGet:
		v, err = h.Store.Get(ctx, in.Resource, in.Fence)
	case OpPut:
		err = h.Store.Put(ctx, in.Resource, in.Fence, []byte(in.Value))
	case OpDelete:
		err = h.Store.Delete(ctx, in.Resource, in.Fence)
	}
	op.Return = now()
	op.Output = outcome(in.Op, v, err)
	if err != nil && !errors.Is(err, fence.ErrStale) {
		op.Err = err.Error()
	}
	h.Rec.Op(op)
	return v, op.Output
}
