package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
)

// lateCtx is a context whose deadline has passed but whose Done is not
// closed yet, as when its timer fires late under load: a call made with
// it still goes out.
type lateCtx struct {
	context.Context
	deadline time.Time
}

func (c lateCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// A batch's context ends at the latest of its callers' deadlines: one
// caller's deadline, past by the time the batch goes out, does not fail
// the other calls of the batch.
func TestBatch_latestDeadline(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, g, _, c := gatedBatch(t, nil)
	ctx := t.Context()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	short := lateCtx{Context: sctx, deadline: time.Now()}
	long, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var leases [2]*fencelock.Lease
	var errs [2]error
	inBatch(t, c, g, 2, nil, func(i int) {
		if i == 0 {
			leases[0], errs[0] = c.TryAcquire(short, "batch-short")
			return
		}
		leases[1], errs[1] = c.TryAcquire(long, "batch-long")
		stop() // the short call is over too, whatever its deadline did
	})
	if got := g.pipelines(); len(got) == 0 || got[0] != 2 {
		t.Fatalf("pipelines = %v, want a first one of 2 commands", got)
	}
	if errs[1] != nil {
		t.Errorf("TryAcquire with a minute left, batched with a call whose deadline passed = %v, want a lease", errs[1])
	}
	for _, l := range leases {
		if l != nil {
			l.Release(ctx)
		}
	}
}

// A batch holds at most 128 calls (internal/node's maxCalls): the calls
// queued beyond it go in another batch, and every call gets its lease.
func TestBatch_bounded(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, g, _, c := gatedBatch(t, &fencelock.Options{TTL: time.Minute})
	ctx := t.Context()
	const most, n = 128, 130
	leases := make([]*fencelock.Lease, n)
	errs := make([]error, n)
	inBatch(t, c, g, n, nil, func(i int) {
		leases[i], errs[i] = c.TryAcquire(ctx, fmt.Sprintf("batch-%d", i))
	})
	// Two batches may go at once (one per send in flight): in any order.
	pipes := g.pipelines()
	sum, largest := 0, 0
	for _, k := range pipes {
		sum, largest = sum+k, max(largest, k)
	}
	if largest != most || sum != n {
		t.Errorf("pipelines = %v, want %d calls in all, at most %d in one", pipes, n, most)
	}
	for i, l := range leases {
		if errs[i] != nil {
			t.Errorf("TryAcquire(batch-%d) = %v, want a lease", i, errs[i])
			continue
		}
		l.Release(ctx)
	}
}
