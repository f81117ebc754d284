package fencelock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Hooks receive the events of a Client's leases, for metrics and tracing
// (package fenceprom implements them for Prometheus). Every field is
// optional: a nil func is skipped, and a nil *Hooks in Options costs
// nothing (no clock reading, no allocation).
//
// Hooks are called synchronously, from the goroutine that saw the event:
// the caller of Acquire, Renew or Release, a lease's keeper or its
// deadline timer. They must be quick, must not block, and must be safe for
// concurrent use. They must not call back into the lease they report on.
//
// Each hook gets a context for tracing and log correlation: the caller's
// for TryAcquire, Acquire, Renew and Release; for the keeper's renewals and
// for losses, a context with the values (not the cancellation) of the
// context the lease was acquired with. A hook may start spans under it; it
// must not wait for it to end.
//
// No hook ever sees a lease's secret owner value: leases are named by
// their public ID, which does not allow renewing or releasing the lock.
//
// Hooks is a struct of funcs, as net/http/httptrace.ClientTrace is, rather
// than an interface: a user sets only the events they want, new events can
// be added as fields without breaking anyone, and an unset event is one
// nil check.
type Hooks struct {
	// AcquireAttempt is called after each acquisition round trip, by
	// TryAcquire and by every attempt of Acquire. An attempt with Token > 0
	// issued that token.
	AcquireAttempt func(context.Context, AcquireAttemptInfo)

	// AcquireDone is called when TryAcquire or Acquire returns after at
	// least one attempt, acquired or not. Calls rejected before anything
	// is sent (ErrInvalid) report nothing.
	AcquireDone func(context.Context, AcquireDoneInfo)

	// RenewDone is called after each renewal round trip, by the keeper or
	// by Lease.Renew.
	RenewDone func(context.Context, RenewDoneInfo)

	// LeaseLost is called once when a lease is lost: its lock was seen
	// gone or held by another owner, or its deadline passed without a
	// successful renewal. It is called before the RenewDone or ReleaseDone
	// that reports the same loss: a Release that finds the lock gone
	// reports a loss the lease had not noticed (its Context then ends
	// with that loss as its cause, wrapping ErrLeaseLost).
	LeaseLost func(context.Context, LeaseLostInfo)

	// ReleaseDone is called after each Release round trip: once per
	// lease, unless a Release failed without a decision (a network or
	// Redis error) and was called again. Calls after a decided Release
	// send nothing and report nothing.
	ReleaseDone func(context.Context, ReleaseDoneInfo)
}

// JoinHooks returns Hooks that call, for each event, the funcs of hs in
// the order given: Prometheus and OpenTelemetry hooks, say, on one
// Client. Nil Hooks and nil funcs are skipped; if no func is set at all,
// JoinHooks returns nil, which costs nothing in Options. The fields are
// read when JoinHooks is called. A func that panics stops the ones after
// it for that event.
func JoinHooks(hs ...*Hooks) *Hooks {
	var j Hooks
	for _, h := range hs {
		if h == nil {
			continue
		}
		j.AcquireAttempt = joinHook(j.AcquireAttempt, h.AcquireAttempt)
		j.AcquireDone = joinHook(j.AcquireDone, h.AcquireDone)
		j.RenewDone = joinHook(j.RenewDone, h.RenewDone)
		j.LeaseLost = joinHook(j.LeaseLost, h.LeaseLost)
		j.ReleaseDone = joinHook(j.ReleaseDone, h.ReleaseDone)
	}
	if j.AcquireAttempt == nil && j.AcquireDone == nil && j.RenewDone == nil && j.LeaseLost == nil && j.ReleaseDone == nil {
		return nil
	}
	return &j
}

// joinHook returns a func that calls a, then b; either alone if the other
// is nil.
func joinHook[I any](a, b func(context.Context, I)) func(context.Context, I) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(ctx context.Context, i I) {
		a(ctx, i)
		b(ctx, i)
	}
}

// AcquireAttemptInfo describes one acquisition round trip.
type AcquireAttemptInfo struct {
	// Name is the lock's name.
	Name string
	// Attempt counts the attempts of this TryAcquire or Acquire call,
	// from 1.
	Attempt int
	// Token is the fencing token issued by this attempt, 0 if none was.
	Token int64
	// Remaining is, when another lease holds the lock, how long its TTL
	// has left.
	Remaining time.Duration
	// Latency is the round trip's duration.
	Latency time.Duration
	// Err is nil if the lock was acquired, ErrNotAcquired if another lease
	// holds it, and the Redis or network error otherwise.
	Err error
}

// AcquireDoneInfo describes the end of a TryAcquire or Acquire call.
type AcquireDoneInfo struct {
	// Name is the lock's name.
	Name string
	// Token is the acquired lease's fencing token, 0 if none.
	Token int64
	// LeaseID is the acquired lease's public ID, "" if none.
	LeaseID string
	// Attempts is the number of round trips made.
	Attempts int
	// Wait is the time from the start of the first attempt to the end of
	// the last.
	Wait time.Duration
	// Latency is the last attempt's round trip.
	Latency time.Duration
	// Err is the error the call returned: nil if acquired, else wrapping
	// ErrNotAcquired (another lease holds the lock, or Acquire's context
	// ended) or a Redis or network error.
	Err error
}

// RenewDoneInfo describes one renewal round trip.
type RenewDoneInfo struct {
	// Name is the lock's name.
	Name string
	// Token is the lease's fencing token.
	Token int64
	// LeaseID is the lease's public ID.
	LeaseID string
	// Latency is the round trip's duration.
	Latency time.Duration
	// Deadline is the lease's deadline after this renewal.
	Deadline time.Time
	// Err is nil if the lease was renewed. If it wraps ErrLeaseLost the
	// lease is lost; otherwise (a Redis or network error) the lease lives
	// on until Deadline unless a later renewal succeeds.
	Err error
}

// LeaseLostInfo describes the loss of a lease.
type LeaseLostInfo struct {
	// Name is the lock's name.
	Name string
	// Token is the lease's fencing token.
	Token int64
	// LeaseID is the lease's public ID.
	LeaseID string
	// Held is the time since the lease's acquisition was sent, 0 for a
	// lease from Client.Attach.
	Held time.Duration
	// Cause wraps ErrLeaseLost: the cause of the lease's Context, or
	// Release's error if Release found the loss.
	Cause error
}

// ReleaseDoneInfo describes a Release.
type ReleaseDoneInfo struct {
	// Name is the lock's name.
	Name string
	// Token is the lease's fencing token.
	Token int64
	// LeaseID is the lease's public ID.
	LeaseID string
	// Held is the time since the lease's acquisition was sent, 0 for a
	// lease from Client.Attach.
	Held time.Duration
	// Latency is the release round trip's duration.
	Latency time.Duration
	// Err is Release's result: nil if the lock was deleted, wrapping
	// ErrLeaseLost if the lease had been lost or the lock was gone or held
	// by another owner, else a Redis or network error.
	Err error
}

// What Options.Hooks and Options.Logger see: the events of acquisitions
// and leases, built only when someone listens.

// listened reports whether events are wanted; when not, none of the
// functions below reads the clock or builds an event.
func (c *config) listened() bool { return c.hooks != nil || c.logger != nil }

// now returns the time if events are wanted, else the zero Time.
func (c *config) now() time.Time {
	if !c.listened() {
		return time.Time{}
	}
	return time.Now()
}

// acquireTrace follows one TryAcquire or Acquire call.
type acquireTrace struct {
	waiting  bool // in Acquire, which retries
	attempts int
	first    time.Time
	latency  time.Duration
}

// attempt records one acquisition round trip that started at start and
// returned token, held and err from the backend.
func (t *acquireTrace) attempt(ctx context.Context, c *config, name string, start time.Time, token int64, held time.Duration, err error) {
	t.attempts++
	if !c.listened() {
		return
	}
	if t.attempts == 1 {
		t.first = start
	}
	t.latency = time.Since(start)
	if err == nil && token == 0 {
		err = ErrNotAcquired
	}
	if h := c.hooks; h != nil && h.AcquireAttempt != nil {
		h.AcquireAttempt(ctx, AcquireAttemptInfo{
			Name: name, Attempt: t.attempts, Token: token, Remaining: held, Latency: t.latency, Err: err,
		})
	}
	if c.logger != nil && t.waiting && err != nil && !errors.Is(err, ErrNotAcquired) {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: acquire attempt failed, retrying",
			slog.String("lock", name), slog.Int("attempt", t.attempts), slog.Any("error", err))
	}
}

// done reports the end of a TryAcquire or Acquire call.
func (t *acquireTrace) done(ctx context.Context, c *config, name string, l *Lease, err error) {
	h := c.hooks
	if h == nil || h.AcquireDone == nil || t.attempts == 0 {
		return
	}
	info := AcquireDoneInfo{
		Name: name, Attempts: t.attempts, Wait: time.Since(t.first), Latency: t.latency, Err: err,
	}
	if l != nil {
		info.Token, info.LeaseID = l.token, l.ID()
	}
	h.AcquireDone(ctx, info)
}

// emitRenew reports a renewal round trip that started at start.
func (l *Lease) emitRenew(ctx context.Context, start time.Time, err error) {
	c := &l.c.cfg
	if !c.listened() {
		return
	}
	latency := time.Since(start)
	deadline := l.Deadline()
	if h := c.hooks; h != nil && h.RenewDone != nil {
		h.RenewDone(ctx, RenewDoneInfo{
			Name: l.ref.Name, Token: l.token, LeaseID: l.ID(), Latency: latency, Deadline: deadline, Err: err,
		})
	}
	if c.logger == nil {
		return
	}
	switch {
	case err == nil:
		if n := l.renewFailures.Swap(0); n > 0 {
			c.logger.LogAttrs(ctx, slog.LevelInfo, "fencelock: renew succeeded after failures",
				l.logAttrs(slog.Int("failures", int(n)), slog.Time("deadline", deadline))...)
		}
	case errors.Is(err, ErrLeaseLost):
		// LeaseLost logged it.
	case errors.Is(err, context.Canceled) && l.releasing.Load():
		// Release stopped the keeper mid-renewal: no failure.
	default:
		n := l.renewFailures.Add(1)
		c.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: renew failed",
			l.logAttrs(slog.Int("failures", int(n)), slog.Duration("remaining", time.Until(deadline)), slog.Any("error", err))...)
	}
}

// emitLost reports the loss of the lease with cause, which ended it.
func (l *Lease) emitLost(ctx context.Context, cause error) {
	if l.c.cfg.listened() {
		l.sendLost(ctx, cause)
	}
}

func (l *Lease) sendLost(ctx context.Context, cause error) {
	c := &l.c.cfg
	held := l.held()
	if h := c.hooks; h != nil && h.LeaseLost != nil {
		h.LeaseLost(ctx, LeaseLostInfo{Name: l.ref.Name, Token: l.token, LeaseID: l.ID(), Held: held, Cause: cause})
	}
	if c.logger != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: lease lost",
			l.logAttrs(slog.Duration("held", held), slog.Any("error", cause))...)
	}
}

// emitRelease reports a release round trip that started at start. A
// release that finds the lock gone or taken is the first sign of a loss
// the keeper had not seen: that is reported as a loss too.
func (l *Lease) emitRelease(ctx context.Context, start time.Time, err error) {
	c := &l.c.cfg
	if !c.listened() {
		return
	}
	if errors.Is(err, ErrLeaseLost) && !errors.Is(l.ended(), ErrLeaseLost) {
		l.sendLost(ctx, err)
	}
	if h := c.hooks; h != nil && h.ReleaseDone != nil {
		h.ReleaseDone(ctx, ReleaseDoneInfo{
			Name: l.ref.Name, Token: l.token, LeaseID: l.ID(),
			Held: l.held(), Latency: time.Since(start), Err: err,
		})
	}
}

// logAttrs names the lease in log records: never by its owner value.
func (l *Lease) logAttrs(more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("lock", l.ref.Name), slog.String("lease", l.ID()), slog.Int64("token", l.token),
	}, more...)
}

// held returns how long the lease has been held, 0 if it was attached.
func (l *Lease) held() time.Duration {
	if l.acquired.IsZero() {
		return 0
	}
	return time.Since(l.acquired)
}
