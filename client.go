package fencelock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

// A Client acquires leases on locks kept in Redis. It is safe for
// concurrent use. A Client holds no connection or goroutine of its own
// while nobody waits in Acquire.
type Client struct {
	be  backend
	el  electorate // be, as elections use it (campaign.go)
	cfg config
	err error // from New: reported by every call

	hub  *wakeHub // shared with the Client's elections (see Election.Campaign) and WithTTL
	keep *keeper  // shared with them too
}

// A backend keeps the locks: one Redis deployment (node) or a quorum of
// independent masters. Each method is one round of requests.
type backend interface {
	// acquire takes the lock r names for r's owner and returns its token
	// (> 0), or 0 and how long the current holder's lock has left.
	acquire(ctx context.Context, r *lockRef) (token int64, held time.Duration, err error)
	// renew extends the lock if r's owner holds it and reports whether it
	// did.
	renew(ctx context.Context, r *lockRef) (bool, error)
	// release deletes the lock if r's owner holds it, wakes the waiters,
	// and reports whether it deleted.
	release(ctx context.Context, r *lockRef) (bool, error)
}

// New returns a Client that keeps its locks in rdb: a *redis.Client, a
// Sentinel failover client or a *redis.ClusterClient. A client that wraps
// a *redis.ClusterClient must keep its MasterForKey and ReloadState
// methods (embedding it does): they route WAIT and sharded wake-ups to the
// lock's master and follow failovers. A nil opts selects every default.
// Invalid options or a nil rdb are reported, wrapping ErrInvalid, by
// every call on the Client.
//
// rdb must have ContextTimeoutEnabled set in its options, or the Client
// reports ErrInvalid: go-redis otherwise bounds a request by its
// ReadTimeout and WriteTimeout (3s by default) rather than by its
// context's deadline, so on an unresponsive server a renewal would
// outlive the lease's deadline and a call its context. A client of
// another type, which has no go-redis Options method, is taken as it is:
// it must end requests at their context's deadline itself.
func New(rdb redis.UniversalClient, opts *Options) *Client {
	cfg, err := opts.config()
	err = errors.Join(err, checkRedis(rdb, "Redis client"))
	c := &Client{cfg: cfg, err: err}
	c.keep = &keeper{}
	n := newNode(rdb, &c.cfg)
	c.be, c.el, c.hub = n, n, &wakeHub{nodes: []*node{n}}
	return c
}

// checkRedis reports, wrapping ErrInvalid, a nil rdb, or one whose
// go-redis options do not bound requests by their context's deadline.
// what names it in the error.
func checkRedis(rdb redis.UniversalClient, what string) error {
	var enabled bool
	switch o := rdb.(type) {
	case nil:
		return fmt.Errorf("%w: nil %s", ErrInvalid, what)
	case interface{ Options() *redis.Options }: // a Client, a Sentinel failover client
		enabled = o.Options().ContextTimeoutEnabled
	case interface{ Options() *redis.ClusterOptions }:
		enabled = o.Options().ContextTimeoutEnabled
	case interface{ Options() *redis.RingOptions }:
		enabled = o.Options().ContextTimeoutEnabled
	default:
		return nil
	}
	if !enabled {
		return fmt.Errorf("%w: %s without ContextTimeoutEnabled: go-redis would bound its requests by ReadTimeout, not by their context's deadline", ErrInvalid, what)
	}
	return nil
}

// TryAcquire makes one attempt to acquire the lock named name. If another
// lease holds it, the error wraps ErrNotAcquired. The returned lease is
// renewed in the background (see Options.RenewInterval) until Release is
// called or it is lost.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	var t acquireTrace
	l, _, err := c.try(ctx, name, nil, &t)
	t.done(ctx, &c.cfg, name, l, err)
	return l, err
}

// Acquire waits until it holds the lock named name or ctx is done; then
// the error wraps both ErrNotAcquired and context.Cause(ctx). A release
// wakes waiters at once through a subscription the Client shares among
// them; a lock that expires instead wakes them when its TTL runs out, and
// a jittered retry (Options.RetryInterval) covers lost messages. Redis
// errors that a failover or restart may cure (connection loss, READONLY,
// LOADING) are retried in the same way; others are returned at once.
func (c *Client) Acquire(ctx context.Context, name string) (l *Lease, err error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	return c.acquire(ctx, name, nil)
}

// acquire is Acquire for the lock named name, or with permit not nil,
// for a permit of that semaphore (Semaphore.Acquire): the one waiting
// loop of both.
func (c *Client) acquire(ctx context.Context, name string, permit *permitKeys) (l *Lease, err error) {
	t := acquireTrace{waiting: true}
	defer func() { t.done(ctx, &c.cfg, name, l, err) }()
	channel := c.cfg.channel(name)
	if permit != nil {
		channel = permit.channel
	}
	// Queue behind this Client's waiters rather than barge in ahead of them.
	if c.hub.idle() || !c.hub.waiting(channel) {
		l, _, err = c.try(ctx, name, permit, &t)
		if !retryable(ctx, err) {
			return l, gaveUp(ctx, name, err)
		}
	}
	w := c.hub.join(ctx, channel, c.cfg.retry)
	defer c.hub.leave(channel, w)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for tryNow := true; ; {
		if tryNow && c.hub.head(channel, w) {
			// Drop a wake from before this attempt; one after it is kept.
			select {
			case <-w.wake:
			default:
			}
			var wait time.Duration
			if l, wait, err = c.try(ctx, name, permit, &t); !retryable(ctx, err) {
				return l, gaveUp(ctx, name, err)
			}
			timer.Reset(c.jitter(wait))
		}
		select {
		case <-w.wake:
			// After an error, wait out the retry interval: the release
			// that cleans up a failed attempt wakes this waiter too, and
			// would turn a server that keeps failing into a busy loop.
			tryNow = err == nil || errors.Is(err, ErrNotAcquired)
		case <-timer.C:
			tryNow = true
		case <-w.promoted:
			// The previous head left, most likely holding the lock: its
			// release will wake us; the timer covers its expiry. A
			// semaphore's next waiter tries at once instead: the head
			// took one permit, others may be free.
			tryNow = permit != nil
			if !tryNow {
				timer.Reset(c.jitter(c.cfg.retry))
			}
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("acquire %q: %w", name, ErrNotAcquired)
			}
			return nil, gaveUp(ctx, name, err)
		}
	}
}

// gaveUp returns the error of an Acquire that stops trying: when its
// context ended, the last attempt's error joined with ErrNotAcquired and
// the context's cause, so both can be tested with errors.Is.
func gaveUp(ctx context.Context, name string, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	if errors.Is(err, ErrNotAcquired) {
		return fmt.Errorf("acquire %q: %w", name, errors.Join(ErrNotAcquired, context.Cause(ctx)))
	}
	return fmt.Errorf("acquire %q: %w", name, errors.Join(ErrNotAcquired, context.Cause(ctx), err))
}

// Do acquires the lock named name, calls fn with a context and the
// lease's fence, and releases the lease when fn returns or panics (the
// panic then goes on). fn's context ends when the lease is lost (its
// cause wraps ErrLeaseLost) or when ctx ends; fn must stop then. The
// release is sent even if ctx is done by then, bounded by the TTL. The
// error joins fn's error and Release's (which wraps ErrLeaseLost if the
// lease was lost).
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, f fence.Fence) error) (err error) {
	l, err := c.Acquire(ctx, name)
	if err != nil {
		return err
	}
	return c.hold(ctx, l, fn)
}

// hold calls fn with l's context and fence and releases l after it, for
// Do.
func (c *Client) hold(ctx context.Context, l *Lease, fn func(ctx context.Context, f fence.Fence) error) (err error) {
	fctx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ttl)
		defer rcancel()
		err = errors.Join(err, l.Release(rctx))
	}()
	return fn(fctx, l.Fence())
}

func (c *Client) check(name string) error {
	if c.err != nil {
		return c.err
	}
	return checkName(name)
}

// try makes one acquisition attempt. When the lock is held it returns an
// error wrapping ErrNotAcquired and how long to wait: the holder's
// remaining TTL, capped by the retry interval.
//
// With permit not nil, the attempt is for a permit of the semaphore
// named name.
func (c *Client) try(ctx context.Context, name string, permit *permitKeys, t *acquireTrace) (*Lease, time.Duration, error) {
	// The lease is made first, so that its keys and owner value, which
	// the commands send, are part of its allocation.
	l := &Lease{c: c}
	c.cfg.setRef(&l.ref, name, "")
	if permit != nil {
		l.ref.usePermit(permit)
	}
	start := time.Now() // the validity is measured from before the request
	token, held, err := c.be.acquire(ctx, &l.ref)
	t.attempt(ctx, &c.cfg, name, start, token, held, err)
	if err != nil {
		return nil, c.cfg.retry, fmt.Errorf("acquire %q: %w", name, err)
	}
	if token == 0 {
		wait := c.cfg.retry
		if held > 0 && held < wait {
			wait = held
		}
		if permit != nil {
			return nil, wait, fmt.Errorf("acquire %q: %w: all %d permits held", name, ErrNotAcquired, permit.permits)
		}
		return nil, wait, fmt.Errorf("acquire %q: %w: held by another lease", name, ErrNotAcquired)
	}
	l.start(ctx, token, start, true)
	return l, 0, nil
}

// jitter spreads waiters' retries: a wait for the holder's TTL ends a
// little after it, a fallback retry anywhere in its second half.
func (c *Client) jitter(wait time.Duration) time.Duration {
	if wait < c.cfg.retry {
		return wait + rand.N(wait/8+time.Millisecond)
	}
	return wait/2 + rand.N(wait/2+1)
}

// retryable reports whether Acquire should wait and try again after err.
func retryable(ctx context.Context, err error) bool {
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, ErrNotReplicated):
		return false
	case errors.Is(err, ErrNotAcquired):
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Server replies that a failover or restart cures; others (wrong
		// type, script errors) would only repeat.
		c, _ := classOf(err)
		return c == errCured
	}
	return true // transport errors: the connection may come back
}
