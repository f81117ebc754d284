package fencelock

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/node"
)

// keeper runs the background work of a Client's leases from one timer:
// each lease's renewal every RenewInterval, and its loss at its Deadline
// if no renewal moved it. A held lease costs an entry in a heap, not
// timers, goroutines or contexts of its own, so holding many leases, or
// acquiring and releasing them quickly, costs little; a renewal runs in a
// goroutine of its own only while it is in flight.
//
// The timer fires at the earliest entry: exactly at a deadline, since a
// lease must be lost before Redis could grant the lock to another holder;
// renewals due within a sixteenth of RenewInterval are sent with it, a
// little early, which is harmless and lets renewals of leases acquired
// close together share the timer's wake-up, and, on a single deployment,
// one pipeline (up to maxBatch of them per round trip): a Client holding
// many leases renews them at a fraction of a round trip each.
type keeper struct {
	mu    sync.Mutex
	queue leaseHeap   // a min-heap by schedule.at
	timer *time.Timer // fires keeper.fire; made on first use
	armed time.Time   // when the timer fires; zero while it is not armed
}

// schedule is a lease's entry in its Client's keeper, guarded by
// keeper.mu.
type schedule struct {
	at       time.Time // the next event: renewAt, or deadline if sooner
	renewAt  time.Time // the next background renewal; zero for none
	deadline time.Time // the keeper's copy of the lease's deadline
	pos      int       // 1 + index in keeper.queue; 0 when not queued
	inflight bool      // a background renewal is in flight
	stopped  bool      // Release ended the background work
	cancel   context.CancelFunc
}

// next sets s.at to the earlier of its events.
func (s *schedule) next() {
	s.at = s.deadline
	if !s.renewAt.IsZero() && s.renewAt.Before(s.at) {
		s.at = s.renewAt
	}
}

// add schedules a new lease's deadline and, if renew, its renewals (a
// lease without them is lost at its deadline unless Renew is called).
func (k *keeper) add(l *Lease, renew bool) {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := &l.sched
	s.deadline = l.deadline // l is not shared yet
	if renew {
		s.renewAt = now.Add(l.c.cfg.renewEvery)
	}
	s.next()
	k.push(l)
	k.arm(s.at)
}

// remove ends the lease's background work, cancelling a renewal in
// flight, and reports whether one is; the caller waits for it with
// l.renewing.
func (k *keeper) remove(l *Lease) (inflight bool) {
	k.mu.Lock()
	s := &l.sched
	s.stopped = true
	s.renewAt = time.Time{}
	if s.pos > 0 {
		k.delete(s.pos - 1)
	}
	cancel, inflight := s.cancel, s.inflight
	k.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return inflight
}

// extended moves a lease's deadline to d after a renewal.
func (k *keeper) extended(l *Lease, d time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := &l.sched
	if !d.After(s.deadline) {
		return
	}
	s.deadline = d
	if s.pos > 0 { // else removed, or being expired, which checks again
		s.next()
		k.fix(s.pos - 1)
	}
}

// renewing records the cancel func of a background renewal about to be
// sent, and reports whether it is still wanted.
func (k *keeper) renewing(l *Lease, cancel context.CancelFunc) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.sched.stopped {
		return false
	}
	l.sched.cancel = cancel
	return true
}

// renewed schedules the next renewal after one ended with err: after
// RenewInterval, or sooner after a failure, unless the lease is over.
func (k *keeper) renewed(l *Lease, err error) {
	end := l.ended()
	deadline := l.Deadline()
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := &l.sched
	s.inflight, s.cancel = false, nil
	if s.stopped || end != nil || errors.Is(err, ErrLeaseLost) {
		if s.pos > 0 {
			k.delete(s.pos - 1)
		}
		return
	}
	next := l.c.cfg.renewEvery
	if err != nil {
		next = max(next/4, time.Millisecond)
	}
	s.renewAt = now.Add(next)
	s.deadline = later(s.deadline, deadline)
	s.next()
	if s.pos > 0 {
		k.fix(s.pos - 1)
	} else {
		k.push(l)
	}
	k.arm(s.at)
}

// fire runs when the timer does: it loses the leases whose deadline
// passed and starts the renewals that are due.
func (k *keeper) fire() {
	var expired, due []*Lease
	k.mu.Lock()
	k.armed = time.Time{}
	now := time.Now()
	for len(k.queue) > 0 {
		l := k.queue[0]
		s := &l.sched
		soon := now.Add(l.c.cfg.renewEvery / 16) // Clients from WithTTL share the keeper
		renew := !s.inflight && !s.renewAt.IsZero() && !s.renewAt.After(soon) && s.at.Equal(s.renewAt)
		if !renew && s.at.After(now) {
			break
		}
		k.delete(0)
		if !renew {
			expired = append(expired, l)
			continue
		}
		// While the renewal is in flight, the deadline still stands.
		s.inflight, s.renewAt = true, time.Time{}
		s.next()
		k.push(l)
		l.renewing.Add(1)
		due = append(due, l)
	}
	if len(k.queue) > 0 {
		k.arm(k.queue[0].sched.at)
	}
	k.mu.Unlock()
	for _, l := range expired {
		if !l.expire(now) {
			k.requeue(l)
		}
	}
	// Each lease is renewed by its own Client's backend (an election's
	// leases share the keeper with the lock's): those that can renew in
	// batches do.
	var batch []*Lease
	var b batchRenewer
	for _, l := range due {
		lb, ok := l.c.be.(batchRenewer)
		if !ok || len(due) == 1 {
			go l.renewInBackground()
			continue
		}
		if len(batch) == maxBatch || (len(batch) > 0 && lb != b) {
			go renewBatch(b, batch)
			batch = nil
		}
		b, batch = lb, append(batch, l)
	}
	if len(batch) > 0 {
		go renewBatch(b, batch)
	}
}

// renewBatch renews leases of one Client in the background together, in
// one round trip per batch (batchRenewer); the keeper has counted each in
// its l.renewing. Release cannot cancel a batch; it waits for it until
// its context ends.
func renewBatch(b batchRenewer, leases []*Lease) {
	var refs []*node.Ref
	var kept []*Lease
	deadline := time.Time{}
	for _, l := range leases {
		if !l.c.keep.renewing(l, nil) {
			l.c.keep.renewed(l, nil)
			l.renewing.Done()
			continue
		}
		d := l.Deadline()
		if deadline.IsZero() || d.Before(deadline) {
			deadline = d
		}
		refs, kept = append(refs, &l.ref), append(kept, l)
	}
	if len(kept) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	held, errs := b.RenewMany(ctx, refs)
	for i, l := range kept {
		err := l.renewed(l.values(), start, held[i], errs[i])
		l.c.keep.renewed(l, err)
		l.renewing.Done()
	}
}

// maxBatch bounds the renewals sent in one pipeline.
const maxBatch = 128

// A batchRenewer renews many locks in one round trip: a node does, a
// quorum does not (each of its renewals is a round to every node).
type batchRenewer interface {
	// RenewMany reports, for each of refs, whether its owner still held
	// the lock and was renewed, or the error.
	RenewMany(ctx context.Context, refs []*node.Ref) ([]bool, []error)
}

// requeue schedules a lease again whose deadline a renewal moved while
// the keeper was about to expire it.
func (k *keeper) requeue(l *Lease) {
	deadline := l.Deadline()
	k.mu.Lock()
	defer k.mu.Unlock()
	s := &l.sched
	if s.pos > 0 || s.stopped {
		return
	}
	s.deadline = later(s.deadline, deadline)
	s.next()
	k.push(l)
	k.arm(s.at)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// arm makes the timer fire by t.
func (k *keeper) arm(t time.Time) {
	if !k.armed.IsZero() && !t.Before(k.armed) {
		return
	}
	k.armed = t
	d := time.Until(t)
	if k.timer == nil {
		k.timer = time.AfterFunc(d, k.fire)
		return
	}
	k.timer.Reset(d)
}

// The heap: queue[0] has the earliest schedule.at; each lease knows its
// position, so that any entry can be moved or removed.

func (k *keeper) push(l *Lease) { heap.Push(&k.queue, l) }
func (k *keeper) delete(i int)  { heap.Remove(&k.queue, i) }
func (k *keeper) fix(i int)     { heap.Fix(&k.queue, i) }

// leaseHeap is a container/heap of leases by schedule.at, which keeps
// each lease's schedule.pos (1 + its index, 0 once removed).
type leaseHeap []*Lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].sched.at.Before(h[j].sched.at) }

func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sched.pos = i + 1
	h[j].sched.pos = j + 1
}

func (h *leaseHeap) Push(x any) {
	l := x.(*Lease)
	*h = append(*h, l)
	l.sched.pos = len(*h)
}

func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.sched.pos = 0
	return l
}
