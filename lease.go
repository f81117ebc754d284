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
	name  string
	owner string // secret: knowing it allows renew and release
	id    string
	token int64

	acquired      time.Time    // when the acquisition was sent; zero if attached
	renewFailures atomic.Int32 // in a row, for Options.Logger

	ctx    context.Context
	cancel context.CancelCauseFunc

	// The keeper renews in the background, run by a timer rather than a
	// goroutine of its own, so a lease released within RenewInterval never
	// starts one. stopKeeper ends it and waits for a renewal in flight.
	keeperCtx    context.Context
	cancelKeeper context.CancelFunc
	keeper       *time.Timer // nil without background renewal
	keepMu       sync.Mutex  // guards keepStop and keeping.Add
	keepStop     bool
	keeping      sync.WaitGroup

	mu       sync.Mutex
	deadline time.Time
	expiry   *time.Timer // loses the lease at deadline

	// Release may be retried until it reaches a decision: the server said
	// whether it deleted. releaseMu serialises Release calls.
	releaseMu  sync.Mutex
	releasing  atomic.Bool // Release was called: renewing is over
	decided    bool
	releaseErr error // the decided result
}

func newLease(ctx context.Context, c *Client, name, owner string, token int64, start time.Time) *Lease {
	l := &Lease{
		c:        c,
		name:     name,
		owner:    owner,
		id:       leaseID(owner),
		token:    token,
		acquired: start,
		deadline: start.Add(c.cfg.ttl - c.cfg.drift),
	}
	// The lease keeps the values of the acquiring context, not its end: an
	// acquire timeout must not end a held lease.
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	l.keeperCtx, l.cancelKeeper = context.WithCancel(l.ctx)
	l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
	if c.cfg.renewEvery > 0 {
		l.keepMu.Lock() // keep may run before AfterFunc returns
		l.keeper = time.AfterFunc(c.cfg.renewEvery, l.keep)
		l.keepMu.Unlock()
	}
	return l
}

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token issued with this lease: greater than
// every token issued before for the same lock name.
func (l *Lease) Token() int64 { return l.token }

// ID returns the lease's public ID, derived from its secret owner value.
// It names the lease in fences and logs; it does not allow renewing or
// releasing the lock.
func (l *Lease) ID() string { return l.id }

// Fence returns what the holder sends with every write to a protected
// resource.
func (l *Lease) Fence() fence.Fence {
	return fence.Fence{Lock: l.name, Token: l.token, Lease: l.id}
}

// Context returns a context that ends when the lease does. If the lease
// was lost, context.Cause reports an error wrapping ErrLeaseLost; after
// Release it reports context.Canceled. It carries the values, but not the
// cancellation, of the context given to Acquire.
func (l *Lease) Context() context.Context { return l.ctx }

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
		return fmt.Errorf("renew %q: %w: released", l.name, ErrLeaseLost)
	}
	if l.ctx.Err() != nil {
		return fmt.Errorf("renew %q: %w", l.name, context.Cause(l.ctx))
	}
	return l.renew(ctx)
}

func (l *Lease) renew(ctx context.Context) (err error) {
	start := time.Now()
	defer func() { l.observeRenew(ctx, start, err) }()
	held, err := l.c.be.renew(ctx, l.name, l.owner)
	if err != nil {
		return fmt.Errorf("renew %q: %w", l.name, err)
	}
	if !held {
		err := fmt.Errorf("renew %q: %w: lock is gone or held by another owner", l.name, ErrLeaseLost)
		l.lose(ctx, err)
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil { // lost while the request was in flight
		return fmt.Errorf("renew %q: %w", l.name, context.Cause(l.ctx))
	}
	if d := start.Add(l.c.cfg.ttl - l.c.cfg.drift); d.After(l.deadline) {
		l.deadline = d
		l.expiry.Reset(time.Until(d))
	}
	return nil
}

// keep renews the lease when the keeper timer fires, and schedules the
// next renewal: after RenewInterval, or sooner after a failure, until the
// lease ends or Release stops it.
func (l *Lease) keep() {
	l.keepMu.Lock()
	if l.keepStop {
		l.keepMu.Unlock()
		return
	}
	l.keeping.Add(1)
	l.keepMu.Unlock()
	defer l.keeping.Done()
	if l.keeperCtx.Err() != nil { // lost: nothing left to renew
		return
	}
	// A renewal that cannot finish before the deadline is of no use.
	ctx, cancel := context.WithDeadline(l.keeperCtx, l.Deadline())
	err := l.renew(ctx)
	cancel()
	next := l.c.cfg.renewEvery
	switch {
	case errors.Is(err, ErrLeaseLost):
		return
	case err != nil:
		next = max(next/4, time.Millisecond)
	}
	l.keepMu.Lock()
	if !l.keepStop {
		l.keeper.Reset(next)
	}
	l.keepMu.Unlock()
}

// stopKeeper ends the background renewal and waits for one in flight,
// which it cancels.
func (l *Lease) stopKeeper() {
	l.keepMu.Lock()
	l.keepStop = true
	if l.keeper != nil {
		l.keeper.Stop()
	}
	l.keepMu.Unlock()
	l.cancelKeeper()
	l.keeping.Wait()
}

// expire runs when the deadline timer fires; a renewal may have moved the
// deadline in the meantime.
func (l *Lease) expire() {
	l.mu.Lock()
	deadline := l.deadline
	l.mu.Unlock()
	if time.Now().Before(deadline) {
		return
	}
	l.lose(context.WithoutCancel(l.ctx), fmt.Errorf("%w: %q not renewed before its deadline", ErrLeaseLost, l.name))
}

// lose ends the lease with cause; the first cause wins. ctx is for the
// hooks.
func (l *Lease) lose(ctx context.Context, cause error) {
	l.cancel(cause)
	l.observeLost(ctx, cause)
}

// Release ends the lease: it stops the renewal, waits for it to exit, and
// deletes the lock if this lease still holds it (compare-and-delete, one
// round trip), waking the lock's waiters. If the lease had been lost, or
// the lock is gone or held by another owner, the error wraps
// ErrLeaseLost and the other holder's lock is untouched.
//
// A Release that reached no decision (a network or Redis error: the lock
// may still be held until its TTL runs out) returns that error and may be
// called again; the lease is not renewed any more all the same, and its
// Context ends. Once a Release has reached a decision, later calls return
// its result and send nothing.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.decided {
		return l.releaseErr
	}
	l.releasing.Store(true)
	decided, err := l.release(ctx)
	if decided {
		l.decided, l.releaseErr = true, err
	}
	return err
}

func (l *Lease) release(ctx context.Context) (decided bool, err error) {
	l.stopKeeper()
	l.expiry.Stop()
	var lost error
	if cause := context.Cause(l.ctx); errors.Is(cause, ErrLeaseLost) {
		lost = cause
	}
	start := l.c.cfg.now()
	defer func() { l.observeRelease(ctx, start, err) }()
	deleted, err := l.c.be.release(ctx, l.name, l.owner)
	if deleted {
		// This Client's next waiter need not wait for the publish to come back.
		l.c.hub.wakeHead(l.c.cfg.channel(l.name))
	}
	switch {
	case err != nil:
		l.cancel(nil) // context.Canceled, unless lost first: nobody renews it now
		if lost != nil {
			return false, fmt.Errorf("release %q: %w", l.name, errors.Join(lost, err))
		}
		return false, fmt.Errorf("release %q: %w", l.name, err)
	case lost == nil && !deleted:
		// The first sign of a loss the keeper had not seen: the lease's
		// context ends with it, as it would have at the next renewal.
		lost = fmt.Errorf("%w: lock is gone or held by another owner", ErrLeaseLost)
		l.lose(ctx, lost)
	}
	l.cancel(nil) // context.Canceled, unless lost first
	if lost != nil {
		return true, fmt.Errorf("release %q: %w", l.name, lost)
	}
	return true, nil
}

// String names the lease by its lock, token and public ID, never by its
// secret owner value: a Lease printed with fmt's %v or %+v, or logged,
// reveals nothing that allows renewing or releasing the lock.
func (l *Lease) String() string {
	return fmt.Sprintf("fencelock.Lease{lock %q, token %d, lease %s}", l.name, l.token, l.id)
}

// GoString is String, for fmt's %#v.
func (l *Lease) GoString() string { return l.String() }

// LogValue names the lease in log records by its lock, token and public
// ID, as String does.
func (l *Lease) LogValue() slog.Value {
	return slog.GroupValue(slog.String("lock", l.name), slog.Int64("token", l.token), slog.String("lease", l.id))
}
