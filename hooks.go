package fencelock

import (
	"context"
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
