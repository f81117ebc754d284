package fencelock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// What Options.Hooks and Options.Logger see: the events of acquisitions
// and leases, built only when someone listens.

// observed reports whether events are wanted; when not, none of the
// functions below reads the clock or builds an event.
func (c *config) observed() bool { return c.hooks != nil || c.logger != nil }

// now returns the time if events are wanted, else the zero Time.
func (c *config) now() time.Time {
	if !c.observed() {
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
	if !c.observed() {
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

// observeRenew reports a renewal round trip that started at start.
func (l *Lease) observeRenew(ctx context.Context, start time.Time, err error) {
	c := &l.c.cfg
	if !c.observed() {
		return
	}
	latency := time.Since(start)
	deadline := l.Deadline()
	if h := c.hooks; h != nil && h.RenewDone != nil {
		h.RenewDone(ctx, RenewDoneInfo{
			Name: l.ref.name, Token: l.token, LeaseID: l.ID(), Latency: latency, Deadline: deadline, Err: err,
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

// observeLost reports the loss of the lease with cause, which ended it.
func (l *Lease) observeLost(ctx context.Context, cause error) {
	if l.c.cfg.observed() {
		l.reportLost(ctx, cause)
	}
}

func (l *Lease) reportLost(ctx context.Context, cause error) {
	c := &l.c.cfg
	held := l.held()
	if h := c.hooks; h != nil && h.LeaseLost != nil {
		h.LeaseLost(ctx, LeaseLostInfo{Name: l.ref.name, Token: l.token, LeaseID: l.ID(), Held: held, Cause: cause})
	}
	if c.logger != nil {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: lease lost",
			l.logAttrs(slog.Duration("held", held), slog.Any("error", cause))...)
	}
}

// observeRelease reports a release round trip that started at start. A
// release that finds the lock gone or taken is the first sign of a loss
// the keeper had not seen: that is reported as a loss too.
func (l *Lease) observeRelease(ctx context.Context, start time.Time, err error) {
	c := &l.c.cfg
	if !c.observed() {
		return
	}
	if errors.Is(err, ErrLeaseLost) && !errors.Is(l.ended(), ErrLeaseLost) {
		l.reportLost(ctx, err)
	}
	if h := c.hooks; h != nil && h.ReleaseDone != nil {
		h.ReleaseDone(ctx, ReleaseDoneInfo{
			Name: l.ref.name, Token: l.token, LeaseID: l.ID(),
			Held: l.held(), Latency: time.Since(start), Err: err,
		})
	}
}

// logAttrs names the lease in log records: never by its owner value.
func (l *Lease) logAttrs(more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("lock", l.ref.name), slog.String("lease", l.ID()), slog.Int64("token", l.token),
	}, more...)
}

// held returns how long the lease has been held, 0 if it was attached.
func (l *Lease) held() time.Duration {
	if l.acquired.IsZero() {
		return 0
	}
	return time.Since(l.acquired)
}
