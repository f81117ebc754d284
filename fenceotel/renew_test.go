package fenceotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fenceotel"
	"github.com/fencelock/fencelock/internal/redistest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// A renewal that fails without the lease being lost (Redis does not
// answer in time; the lease lives on until its deadline) is an error: its
// span is marked so and counted with result error, as a lost one is
// with result lost.
func TestInstrumentation_renewError(t *testing.T) {
	tm := newTelemetry(t, fenceotel.Options{})
	s := redistest.New(t)
	c := fencelock.New(s.Client(t), &fencelock.Options{TTL: time.Minute, RenewInterval: -1, Hooks: tm.Hooks()})
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "unanswered")
	if err != nil {
		t.Fatal(err)
	}
	s.Pause(t)
	rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err = l.Renew(rctx)
	cancel()
	s.Resume(t)
	if err == nil || errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Renew of a paused server = %v, want an error that is not ErrLeaseLost", err)
	}
	spans := tm.ended("fencelock.renew")
	if len(spans) != 1 {
		t.Fatalf("%d renew spans, want 1", len(spans))
	}
	if r, st := attr(spans[0], "fencelock.result").AsString(), spans[0].Status(); r != "error" || st.Code != codes.Error {
		t.Errorf("failed renewal's span: result %q, status %v; want error and status Error", r, st)
	}
	if got := tm.sum(t, "fencelock.renewals", attribute.String("fencelock.result", "error")); got != 1 {
		t.Errorf("fencelock.renewals{result=error} = %d, want 1", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release after the server came back = %v, want nil", err)
	}
}
