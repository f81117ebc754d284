package fencelock

import (
	"context"
	"testing"
	"time"
)

// benchmarkDispatch measures what the hooks add to one acquisition
// without Redis: an attempt and its result, as TryAcquire reports them.
func benchmarkDispatch(b *testing.B, opts *Options) {
	cfg, err := opts.config()
	if err != nil {
		b.Fatal(err)
	}
	l := &Lease{ref: lockRef{name: "bench", owner: "owner"}, token: 1}
	// The ID is derived on first use: once, before the loop.
	l.ID()
	start := time.Now() // try reads the clock anyway, hooks or not
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		var t acquireTrace
		t.attempt(ctx, &cfg, "bench", start, 1, 0, nil)
		t.done(ctx, &cfg, "bench", l, nil)
	}
}

// BenchmarkHooks_dispatchNil: no hooks, the cost is a nil check.
func BenchmarkHooks_dispatchNil(b *testing.B) { benchmarkDispatch(b, nil) }

// BenchmarkHooks_dispatchNoop: every hook set to a function that does
// nothing: reading the clock and building the events.
func BenchmarkHooks_dispatchNoop(b *testing.B) {
	benchmarkDispatch(b, &Options{Hooks: &Hooks{
		AcquireAttempt: func(context.Context, AcquireAttemptInfo) {},
		AcquireDone:    func(context.Context, AcquireDoneInfo) {},
	}})
}
