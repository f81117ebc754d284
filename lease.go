package fencelock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/node"
)

// A Lease is a held lock: time-limited ownership that comes with a fencing
// token. It may end at any moment without Release (the process pauses,
// the network partitions, Redis fails over); its Context then ends with a
// cause wrapping ErrLeaseLost. The holder must send the lease's Fence with
// every write to the protected resource, which alone can reject the
// writes of a holder that lost its lease without knowing it.
//
// A Lease is safe for concurrent use.
type Lease struct {
	c     *Client
	ref   node.Ref // name, keys, owner value: what the commands send
	token int64

	// acquiredWith is the context the lease was acquired with, for its
	// values only: hooks, logs and renewals see them, never its end (an
	// acquire timeout must not end a held lease).
	acquiredWith context.Context
	acquired     time.Time // when the acquisition was sent; zero if attached

	idOnce sync.Once
	id     string // derived from the owner value on first use

	renewFailures atomic.Int32 // in a row, for Options.Logger

	mu       sync.Mutex
	deadline time.Time
	// end is why the lease ended, nil while it is held: a cause wrapping
	// ErrLeaseLost, or context.Canceled after Release. The first wins.
	end error
	// ctx is made by Context on first use, most leases being released
	// without anyone asking for it; it ends with end either way. Making
	// it watches the lock (unwatch stops that): a lease whose Context
	// someone follows learns of a loss at once, not at its next renewal.
	ctx     context.Context
	cancel  context.CancelCauseFunc
	unwatch func()

	// sched is the lease's entry in the Client's keeper, which renews it
	// and loses it at its deadline; renewing counts its renewals in flight.
	sched    schedule
	renewing sync.WaitGroup

	// Release may be retried until it reaches a decision: the server said
	// whether it deleted. releaseMu serialises Release calls.
	releaseMu  sync.Mutex
	releasing  atomic.Bool // Release was called: renewing is over
	decided    bool
	releaseErr error // the decided result
}

// start makes l, whose ref is set, a lease acquired with ctx at start
// with token, and schedules its deadline and, if keep, its background
// renewals.
func (l *Lease) start(ctx context.Context, token int64, start time.Time, keep bool) {
	l.token = token
	l.acquiredWith = ctx
	l.acquired = start
	l.deadline = start.Add(l.c.cfg.TTL - l.c.cfg.Drift)
	l.c.keep.add(l, keep && l.c.cfg.renewEvery > 0)
}

// Name returns the name of the lock, or of the semaphore whose permit the
// lease holds (its Fence names the slot).
func (l *Lease) Name() string { return l.ref.Name }

// Token returns the fencing token issued with this lease: greater than
// every token issued before for the same lock name.
func (l *Lease) Token() int64 { return l.token }

// ID returns the lease's public ID, derived from its secret owner value.
// It names the lease in fences and logs; it does not allow renewing or
// releasing the lock.
func (l *Lease) ID() string {
	l.idOnce.Do(func() { l.id = node.LeaseID(l.ref.Owner) })
	return l.id
}

// Fence returns what the holder sends with every write to a protected
// resource.
func (l *Lease) Fence() fence.Fence {
	return fence.Fence{Lock: l.fenceName(), Token: l.token, Lease: l.ID()}
}

// fenceName is the name the lease's tokens are issued for: the lock's
// name, or a permit's slot name (SlotName).
func (l *Lease) fenceName() string {
	if l.ref.Sem != nil {
		return l.ref.SlotName
	}
	return l.ref.Name
}

// Context returns a context that ends when the lease does. If the lease
// was lost, context.Cause reports an error wrapping ErrLeaseLost; after
// Release it reports context.Canceled. It carries the values, but not the
// cancellation, of the context given to Acquire.
//
// From the first call on, the lock is watched: the server tracks its key
// for a connection of the Client's (CLIENT TRACKING), and tells it when a
// command deletes, overwrites or expires the key, so that the Context
// ends within milliseconds of the loss rather than at the next renewal
// (on a quorum, once a majority of the nodes lost it). This needs a
// go-redis client on RESP3 (its default), or the valkey-go or rueidis
// transports, on every topology. Elsewhere, for a lease whose Context
// nobody asked for, and while the watch cannot track (a failover under
// way: it tries again until the lease ends), the loss is learnt at the
// next renewal.
func (l *Lease) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(l.values())
		if l.end != nil {
			l.cancel(l.end)
		} else if !l.releasing.Load() {
			// lost runs under the watch's lock, which stopping the
			// watch takes: the loss goes on on a goroutine of its own.
			l.unwatch = l.c.be.Watch(&l.ref, func() { go l.lose(l.values(), errGone) })
		}
	}
	return l.ctx
}

// values returns a context with the values, not the cancellation, of the
// context the lease was acquired with.
func (l *Lease) values() context.Context { return context.WithoutCancel(l.acquiredWith) }

// ended returns why the lease ended, nil while it is held.
func (l *Lease) ended() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// finish ends the lease with cause (context.Canceled for a Release) and
// reports whether this call ended it: the first cause wins.
func (l *Lease) finish(cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != nil {
		return false
	}
	l.end = cause
	if l.cancel != nil {
		l.cancel(cause)
	}
	return true
}

// Deadline returns when the lease ends unless renewed: measured on the
// local monotonic clock from before the last successful acquire or renew
// request was sent, minus an allowance for clock drift, so it passes
// before Redis could grant the lock to another holder.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Renew extends the lease by the TTL now, in one round trip. It never
// re-creates a lock that is gone. If the lock is gone or held by another
// owner, the lease is lost and the error wraps ErrLeaseLost; other errors
// (the network, Redis) leave the lease as it was, to be lost at its
// Deadline unless a later renew succeeds.
func (l *Lease) Renew(ctx context.Context) error {
	if l.releasing.Load() {
		return fmt.Errorf("renew %q: %w: released", l.ref.Name, ErrLeaseLost)
	}
	if end := l.ended(); end != nil {
		return fmt.Errorf("renew %q: %w", l.ref.Name, end)
	}
	return l.renew(ctx)
}

func (l *Lease) renew(ctx context.Context) error {
	start := time.Now()
	held, err := l.c.be.Renew(ctx, &l.ref)
	return l.renewed(ctx, start, held, err)
}

// renewed takes in the outcome of a renewal sent at start: whether the
// lock was still held, or the error. ctx is for the hooks.
func (l *Lease) renewed(ctx context.Context, start time.Time, held bool, err error) (result error) {
	defer func() { l.emitRenew(ctx, start, result) }()
	if err != nil {
		return fmt.Errorf("renew %q: %w", l.ref.Name, err)
	}
	if !held {
		l.lose(ctx, errGone)
		return fmt.Errorf("renew %q: %w", l.ref.Name, l.ended())
	}
	return l.extend(start)
}

// extend moves the deadline after a renewal sent at start succeeded.
func (l *Lease) extend(start time.Time) error {
	l.mu.Lock()
	if l.end != nil { // lost while the request was in flight
		end := l.end
		l.mu.Unlock()
		return fmt.Errorf("renew %q: %w", l.ref.Name, end)
	}
	d := start.Add(l.c.cfg.TTL - l.c.cfg.Drift)
	moved := d.After(l.deadline)
	if moved {
		l.deadline = d
	}
	l.mu.Unlock()
	if moved {
		l.c.keep.extended(l, d)
	}
	return nil
}

// renewInBackground is a background renewal, run by the keeper in a goroutine of its
// own; the keeper has counted it in l.renewing.
func (l *Lease) renewInBackground() {
	defer l.renewing.Done()
	// A renewal that cannot finish before the deadline is of no use; one
	// that Release stops is cancelled.
	ctx, cancel := context.WithDeadline(l.values(), l.Deadline())
	defer cancel()
	var err error
	if l.c.keep.renewing(l, cancel) {
		err = l.renew(ctx)
	}
	l.c.keep.renewed(l, err)
}

// stopKeeper ends the background renewal and the deadline's watch, and
// waits for a renewal in flight, which it cancels, until ctx is done: a
// cancelled request still waits for its read on a server that answers
// nothing, and a batch cannot be cancelled at all.
func (l *Lease) stopKeeper(ctx context.Context) error {
	if !l.c.keep.remove(l) {
		l.renewing.Wait() // at most the renewal's last bookkeeping
		return nil
	}
	done := make(chan struct{})
	go func() {
		l.renewing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("a renewal in flight did not end: %w", context.Cause(ctx))
	}
}

// expire runs when the keeper finds the deadline passed; a renewal may
// have moved it in the meantime. It reports whether the lease is over.
func (l *Lease) expire(now time.Time) bool {
	l.mu.Lock()
	deadline, end := l.deadline, l.end
	l.mu.Unlock()
	if end != nil {
		return true
	}
	if now.Before(deadline) {
		return false
	}
	l.lose(l.values(), errExpired)
	return true
}

// stopWatching ends the watch of the lease's lock, if Context made one.
func (l *Lease) stopWatching() {
	l.mu.Lock()
	unwatch := l.unwatch
	l.unwatch = nil
	l.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
}

// lose ends the lease with cause; the first cause wins. ctx is for the
// hooks.
func (l *Lease) lose(ctx context.Context, cause error) {
	if l.finish(cause) {
		l.stopWatching()
		l.emitLost(ctx, cause)
	}
}

// Release ends the lease: it stops the renewal, waits for it to exit
// (until ctx is done), and deletes the lock if this lease still holds it (compare-and-delete, one
// round trip), waking the lock's waiters. If the lease had been lost, or
// the lock is gone or held by another owner, the error wraps
// ErrLeaseLost and the other holder's lock is untouched.
//
// A Release that reached no decision (a network or Redis error: the lock
// may still be held until its TTL runs out) returns that error and may be
// called again; the lease is not renewed any more all the same, and its
// Context ends. So does a Release whose ctx ends before the request is
// decided, a renewal in flight included: its error wraps ctx's error, and
// the lock may be held until the lease's Deadline, which no renewal moves
// after Release. Once a Release has reached a decision, later calls return
// its result and send nothing.
func (l *Lease) Release(ctx context.Context) error {
	_, err := l.settle(ctx)
	return err
}

// settle is Release; it also reports whether a Release reached a
// decision, this one or an earlier one (Election.Resign forgets a
// leadership then).
func (l *Lease) settle(ctx context.Context) (bool, error) {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.decided {
		return true, l.releaseErr
	}
	l.releasing.Store(true)
	decided, err := l.release(ctx)
	if decided {
		l.decided, l.releaseErr = true, err
	}
	return decided, err
}

// releaseCalled reports whether Release was called: renewing is over.
func (l *Lease) releaseCalled() bool { return l.releasing.Load() }

func (l *Lease) release(ctx context.Context) (decided bool, err error) {
	start := l.c.cfg.now()
	defer func() { l.emitRelease(ctx, start, err) }()
	// The release's own delete must not read as a loss.
	l.stopWatching()
	if err := l.stopKeeper(ctx); err != nil {
		// Nothing was sent: the lock stays held until the deadline,
		// which the renewal, ending after Release, cannot move.
		l.finish(context.Canceled)
		return false, fmt.Errorf("release %q: %w", l.ref.Name, err)
	}
	var lost error
	if end := l.ended(); errors.Is(end, ErrLeaseLost) {
		lost = end
	}
	deleted, err := l.c.be.Release(ctx, &l.ref)
	if err != nil {
		err = joinCause(ctx, err)
	}
	if deleted {
		// This Client's next waiter need not wait for the publish to come back.
		l.c.hub.WakeHead(l.ref.Channel)
	}
	switch {
	case err != nil:
		l.finish(context.Canceled) // unless lost first: nobody renews it now
		if lost != nil {
			return false, fmt.Errorf("release %q: %w", l.ref.Name, errs.Join(lost, err))
		}
		return false, fmt.Errorf("release %q: %w", l.ref.Name, err)
	case lost == nil && !deleted:
		// The first sign of a loss the keeper had not seen: the lease's
		// context ends with it, as it would have at the next renewal.
		lost = errGone
		l.lose(ctx, lost)
	}
	l.finish(context.Canceled) // unless lost first
	if lost != nil {
		return true, fmt.Errorf("release %q: %w", l.ref.Name, lost)
	}
	return true, nil
}

// The causes of a lost lease, as its Context reports them; the calls that
// meet them name the lock and their step ("renew \"x\": ...").
var (
	errGone    = fmt.Errorf("%w: the lock is gone or held by another owner", ErrLeaseLost)
	errExpired = fmt.Errorf("%w: not renewed before its deadline", ErrLeaseLost)
)

// joinCause joins the cause of ctx to err, a request's, if ctx ended it,
// unless err says so already: go-redis reports a request cut at the
// context's deadline as an i/o timeout, sometimes a moment before the
// context itself is done.
func joinCause(ctx context.Context, err error) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		<-ctx.Done()
	}
	if ctx.Err() == nil || errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx)) {
		return err
	}
	return errs.Join(err, context.Cause(ctx))
}

// String names the lease by its lock, token and public ID, never by its
// secret owner value: a Lease printed with fmt's %v or %+v, or logged,
// reveals nothing that allows renewing or releasing the lock.
func (l *Lease) String() string {
	return fmt.Sprintf("fencelock.Lease{lock %q, token %d, lease %s}", l.fenceName(), l.token, l.ID())
}

// GoString is String, for fmt's %#v.
func (l *Lease) GoString() string { return l.String() }

// LogValue names the lease in log records by its lock, token and public
// ID, as String does.
func (l *Lease) LogValue() slog.Value {
	return slog.GroupValue(slog.String("lock", l.fenceName()), slog.Int64("token", l.token), slog.String("lease", l.ID()))
}
