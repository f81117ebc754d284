package fenceotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fenceotel"
	"github.com/fencelock/fencelock/internal/redistest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is an Instrumentation over the SDK's in-memory span recorder
// and a manual metric reader.
type telemetry struct {
	*fenceotel.Instrumentation
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tracer trace.Tracer // the application's, for the caller's spans
}

func newTelemetry(t *testing.T, opts fenceotel.Options) *telemetry {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	opts.TracerProvider, opts.MeterProvider = tp, mp
	return &telemetry{fenceotel.New(&opts), spans, reader, tp.Tracer("app")}
}

// ended returns the ended spans named name.
func (tm *telemetry) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range tm.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// waitSpan waits for a span named name to end.
func (tm *telemetry) waitSpan(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var got sdktrace.ReadOnlySpan
	redistest.WaitFor(t, 10*time.Second, "a "+name+" span", func() bool {
		s := tm.ended(name)
		if len(s) > 0 {
			got = s[len(s)-1]
		}
		return got != nil
	})
	return got
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// sum returns the value of the Int64 sum (counter) named name at the data
// point whose attributes include want.
func (tm *telemetry) sum(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tm.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			data, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("metric %s is %T, want an Int64 sum", name, m.Data)
			}
		points:
			for _, dp := range data.DataPoints {
				for _, kv := range want {
					if v, ok := dp.Attributes.Value(kv.Key); !ok || v != kv.Value {
						continue points
					}
				}
				total += dp.Value
			}
		}
	}
	return total
}

// A lease's life, as spans under the caller's and as metrics: acquire,
// renew and release under the caller's span, the keeper's renewal and a
// loss it finds under the acquisition's, every span with its lock, token
// and lease ID, none with the secret.
func TestInstrumentation_lease(t *testing.T) {
	tm := newTelemetry(t, fenceotel.Options{LockAttribute: true})
	rdb := redistest.New(t).Client(t)
	c := fencelock.New(rdb, &fencelock.Options{TTL: time.Minute, RenewInterval: 100 * time.Millisecond, Hooks: tm.Hooks()})
	ctx, caller := tm.tracer.Start(t.Context(), "caller")

	l, err := c.TryAcquire(ctx, "traced")
	if err != nil {
		t.Fatalf("TryAcquire error = %v", err)
	}
	tm.waitSpan(t, "fencelock.renew") // the keeper's
	if err := l.Renew(ctx); err != nil {
		t.Fatalf("Renew error = %v", err)
	}
	rdb.Del(t.Context(), "fencelock:{traced}")
	lost := tm.waitSpan(t, "fencelock.lease_lost")
	if err := l.Release(ctx); !errors.Is(err, fencelock.ErrLeaseLost) {
		t.Fatalf("Release error = %v, want ErrLeaseLost", err)
	}
	caller.End()

	acq := tm.ended("fencelock.acquire")
	if len(acq) != 1 {
		t.Fatalf("%d acquire spans, want 1", len(acq))
	}
	for _, s := range append(append(acq, tm.ended("fencelock.renew")...), append(tm.ended("fencelock.release"), lost)...) {
		if s.Parent().SpanID() != caller.SpanContext().SpanID() || s.SpanContext().TraceID() != caller.SpanContext().TraceID() {
			t.Errorf("span %s: parent %v, want the caller's span %v", s.Name(), s.Parent().SpanID(), caller.SpanContext().SpanID())
		}
		if got := attr(s, "fencelock.lock").AsString(); got != "traced" {
			t.Errorf("span %s: fencelock.lock = %q, want %q", s.Name(), got, "traced")
		}
		if got := attr(s, "fencelock.lease.id").AsString(); s.Name() != "fencelock.acquire" && got != l.ID() {
			t.Errorf("span %s: fencelock.lease.id = %q, want %q", s.Name(), got, l.ID())
		}
		if got := attr(s, "fencelock.token").AsInt64(); got != l.Token() {
			t.Errorf("span %s: fencelock.token = %d, want %d", s.Name(), got, l.Token())
		}
		if !s.EndTime().After(s.StartTime()) && s.Name() != "fencelock.lease_lost" {
			t.Errorf("span %s: start %v, end %v: want the operation's duration", s.Name(), s.StartTime(), s.EndTime())
		}
		noSecret(t, s, l.Secret())
	}
	if lost.Status().Code != codes.Error {
		t.Errorf("lease_lost span status = %v, want Error", lost.Status())
	}
	if rel := tm.ended("fencelock.release"); len(rel) != 1 || attr(rel[0], "fencelock.result").AsString() != "lost" || rel[0].Status().Code != codes.Error {
		t.Errorf("release spans %v: want one, result lost, status Error", rel)
	}

	lock := attribute.String("fencelock.lock", "traced")
	for _, tc := range []struct {
		name string
		want []attribute.KeyValue
		min  int64
	}{
		{"fencelock.acquires", []attribute.KeyValue{lock, attribute.String("fencelock.result", "acquired")}, 1},
		{"fencelock.acquire.attempts", []attribute.KeyValue{lock, attribute.String("fencelock.result", "acquired")}, 1},
		{"fencelock.renewals", []attribute.KeyValue{lock, attribute.String("fencelock.result", "ok")}, 2},
		{"fencelock.leases.lost", []attribute.KeyValue{lock}, 1},
		{"fencelock.releases", []attribute.KeyValue{lock, attribute.String("fencelock.result", "lost")}, 1},
	} {
		if got := tm.sum(t, tc.name, tc.want...); got < tc.min || (tc.min == 1 && got != 1) {
			t.Errorf("metric %s%v = %d, want %d", tc.name, tc.want, got, tc.min)
		}
	}
	if got := tm.sum(t, "fencelock.leases.held", lock); got != 0 {
		t.Errorf("fencelock.leases.held = %d after the loss and release, want 0", got)
	}
}

// noSecret fails if the secret appears anywhere in a span.
func noSecret(t *testing.T, s sdktrace.ReadOnlySpan, secret string) {
	t.Helper()
	text := fmt.Sprintf("%s %v %v %v", s.Name(), s.Attributes(), s.Events(), s.Status())
	if strings.Contains(text, secret) {
		t.Errorf("span %s carries the lease's secret: %s", s.Name(), text)
	}
}

// An acquisition that waited is one span from its first attempt to the
// lock being acquired: its wait is included.
func TestInstrumentation_acquireWaits(t *testing.T) {
	tm := newTelemetry(t, fenceotel.Options{})
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	holder, err := fencelock.New(rdb, nil).TryAcquire(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	c := fencelock.New(rdb, &fencelock.Options{RetryInterval: time.Minute, Hooks: tm.Hooks()})
	if _, err := c.TryAcquire(ctx, "busy"); !errors.Is(err, fencelock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock error = %v, want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		l, err := c.Acquire(ctx, "busy")
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	redistest.WaitFor(t, 5*time.Second, "the waiter to subscribe", func() bool {
		return rdb.PubSubNumSub(ctx, "fencelock:{busy}:released").Val()["fencelock:{busy}:released"] == 1
	})
	const held = 100 * time.Millisecond
	time.Sleep(held) // the wait the span must include, not a synchronisation
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Acquire error = %v", err)
	}
	spans := tm.ended("fencelock.acquire")
	if len(spans) != 2 {
		t.Fatalf("%d acquire spans, want 2 (TryAcquire, Acquire)", len(spans))
	}
	if r := attr(spans[0], "fencelock.result").AsString(); r != "not_acquired" || spans[0].Status().Code == codes.Error {
		t.Errorf("TryAcquire of a held lock: span result %q status %v, want not_acquired and no error status", r, spans[0].Status())
	}
	waited := spans[1]
	if d := waited.EndTime().Sub(waited.StartTime()); d < held || waited.StartTime().Before(start.Add(-time.Millisecond)) {
		t.Errorf("Acquire span from %v to %v (%v), want it to cover the wait of at least %v from %v", waited.StartTime(), waited.EndTime(), d, held, start)
	}
	if tm.sum(t, "fencelock.acquires", attribute.String("fencelock.result", "not_acquired")) != 1 {
		t.Errorf("fencelock.acquires{not_acquired} != 1")
	}
}

// Fenced accesses are spans too, stale rejections marked with the fence
// that refused them.
func TestInstrumentation_fence(t *testing.T) {
	tm := newTelemetry(t, fenceotel.Options{})
	s := fence.WithHooks(&fence.Memory{}, tm.FenceHooks())
	ctx, caller := tm.tracer.Start(t.Context(), "caller")
	newer := fence.Fence{Lock: "orders", Token: 7, Lease: "b"}
	older := fence.Fence{Lock: "orders", Token: 5, Lease: "a"}
	if err := s.Put(ctx, "row", newer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "row", older, []byte("y")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("Put(older) error = %v, want ErrStale", err)
	}
	caller.End()
	puts := tm.ended("fence.put")
	if len(puts) != 2 {
		t.Fatalf("%d fence.put spans, want 2", len(puts))
	}
	ok, stale := puts[0], puts[1]
	if attr(ok, "fence.result").AsString() != "accepted" || ok.Status().Code == codes.Error || attr(ok, "fence.token").AsInt64() != 7 {
		t.Errorf("accepted put: attributes %v status %v", ok.Attributes(), ok.Status())
	}
	if attr(stale, "fence.result").AsString() != "stale" || stale.Status().Code != codes.Error ||
		attr(stale, "fence.current.token").AsInt64() != 7 || attr(stale, "fence.token").AsInt64() != 5 {
		t.Errorf("stale put: attributes %v status %v; want result stale, status Error, token 5, current token 7", stale.Attributes(), stale.Status())
	}
	for _, sp := range puts {
		if sp.Parent().SpanID() != caller.SpanContext().SpanID() {
			t.Errorf("span %s: parent %v, want the caller's", sp.Name(), sp.Parent().SpanID())
		}
	}
	if got := tm.sum(t, "fence.accesses", attribute.String("fence.result", "stale"), attribute.String("fence.op", "put")); got != 1 {
		t.Errorf("fence.accesses{put, stale} = %d, want 1", got)
	}
}

// An acquisition too few replicas acknowledged is counted, and its span
// marked, as not_replicated, not as not_acquired or an error.
func TestInstrumentation_notReplicated(t *testing.T) {
	tm := newTelemetry(t, fenceotel.Options{})
	rdb := redistest.New(t).Client(t) // no replica: WAIT is never satisfied
	c := fencelock.New(rdb, &fencelock.Options{MinReplicas: 1, ReplicaTimeout: 50 * time.Millisecond, Hooks: tm.Hooks()})
	if _, err := c.TryAcquire(t.Context(), "unreplicated"); !errors.Is(err, fencelock.ErrNotReplicated) {
		t.Fatalf("TryAcquire error = %v, want ErrNotReplicated", err)
	}
	for result, want := range map[string]int64{"not_replicated": 1, "not_acquired": 0, "error": 0, "acquired": 0} {
		if got := tm.sum(t, "fencelock.acquires", attribute.String("fencelock.result", result)); got != want {
			t.Errorf("fencelock.acquires{result=%q} = %v, want %v", result, got, want)
		}
	}
	if spans := tm.ended("fencelock.acquire"); len(spans) != 1 || attr(spans[0], "fencelock.result").AsString() != "not_replicated" {
		t.Errorf("acquire spans = %d, want 1 with fencelock.result not_replicated", len(spans))
	}
}
