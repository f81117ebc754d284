package fenceotel

import (
	"context"
	"sync"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// instruments are the metrics: the same events as fenceprom's, named in
// OpenTelemetry's style (dots, units in metadata).
type instruments struct {
	attempts       metric.Int64Counter
	attemptLatency metric.Float64Histogram
	acquires       metric.Int64Counter
	wait           metric.Float64Histogram
	renewals       metric.Int64Counter
	renewLatency   metric.Float64Histogram
	losses         metric.Int64Counter
	releases       metric.Int64Counter
	releaseLatency metric.Float64Histogram
	leaseDuration  metric.Float64Histogram
	held           metric.Int64UpDownCounter
	accesses       metric.Int64Counter
	accessLatency  metric.Float64Histogram

	// leases holds the IDs of the leases seen acquired and not ended yet:
	// a lease ends once, at the first of its loss and its release, and a
	// lease attached or acquired elsewhere never counted as held here.
	leases sync.Map
}

func newInstruments(m metric.Meter) instruments {
	nop := noop.Meter{}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			otel.Handle(err)
			c, _ = nop.Int64Counter(name)
		}
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
		if err != nil {
			otel.Handle(err)
			h, _ = nop.Float64Histogram(name)
		}
		return h
	}
	held, err := m.Int64UpDownCounter("fencelock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases acquired and neither released nor lost yet."))
	if err != nil {
		otel.Handle(err)
		held, _ = nop.Int64UpDownCounter("fencelock.leases.held")
	}
	return instruments{
		attempts: counter("fencelock.acquire.attempts", "{attempt}",
			"Acquisition round trips, by result: acquired, not_acquired (another lease holds the lock), error."),
		attemptLatency: histogram("fencelock.acquire.attempt.duration", "Duration of acquisition round trips."),
		acquires: counter("fencelock.acquires", "{call}",
			"TryAcquire and Acquire calls, by result: acquired, not_acquired, not_replicated, error."),
		wait: histogram("fencelock.acquire.wait", "Time from the first attempt of a successful acquisition to the lock being acquired."),
		renewals: counter("fencelock.renewals", "{renewal}",
			"Renewal round trips, by result: ok, error (the lease lives on until its deadline), lost."),
		renewLatency: histogram("fencelock.renew.duration", "Duration of renewal round trips."),
		losses: counter("fencelock.leases.lost", "{lease}",
			"Leases lost: the lock was found gone or taken, or the lease's deadline passed without a renewal."),
		releases: counter("fencelock.releases", "{release}",
			"Release round trips, by result: ok, lost (the lease had been lost or the lock was gone or taken), error."),
		releaseLatency: histogram("fencelock.release.duration", "Duration of release round trips."),
		leaseDuration:  histogram("fencelock.lease.duration", "How long leases were held, from acquisition to release or loss."),
		held:           held,
		accesses: counter("fence.accesses", "{access}",
			"Fenced accesses to protected resources (put, get, delete), by result: accepted, stale (refused: the resource accepted a newer fence), error."),
		accessLatency: histogram("fence.access.duration", "Duration of fenced accesses to protected resources."),
	}
}

// lock returns the attributes that name a lock on metrics: none unless
// Options.LockAttribute.
func (in *Instrumentation) lock(name string) []attribute.KeyValue {
	if !in.names {
		return nil
	}
	return []attribute.KeyValue{attrLock.String(name)}
}

// resource returns the attributes that name a fenced access's resource
// and lock on metrics, likewise.
func (in *Instrumentation) resource(i fence.AccessInfo) []attribute.KeyValue {
	if !in.names {
		return nil
	}
	lock := i.Fence.Lock
	if i.Err != nil && accessResult(i.Err) == resultError {
		lock = "" // whatever a client sent: no attribute values from it
	}
	return []attribute.KeyValue{attrResource.String(i.Resource), attrFenceLock.String(lock)}
}

func with(attrs []attribute.KeyValue, more ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(append([]attribute.KeyValue(nil), attrs...), more...)...)
}

func (in *Instrumentation) acquireAttempt(ctx context.Context, i fencelock.AcquireAttemptInfo) {
	names := in.lock(i.Name)
	result := resultError
	switch {
	case i.Err == nil:
		result = resultAcquired
	case acquireResult(i.Err) == resultNotAcquired:
		result = resultNotAcquired
	}
	in.m.attempts.Add(ctx, 1, with(names, attrResult.String(result)))
	in.m.attemptLatency.Record(ctx, i.Latency.Seconds(), with(names))
}

func (m *instruments) acquired(ctx context.Context, names []attribute.KeyValue, result string, i fencelock.AcquireDoneInfo) {
	m.acquires.Add(ctx, 1, with(names, attrResult.String(result)))
	if i.Err == nil {
		m.wait.Record(ctx, i.Wait.Seconds(), with(names))
		m.leases.Store(i.LeaseID, struct{}{})
		m.held.Add(ctx, 1, with(names))
	}
}

func (m *instruments) renewed(ctx context.Context, names []attribute.KeyValue, result string, i fencelock.RenewDoneInfo) {
	m.renewals.Add(ctx, 1, with(names, attrResult.String(result)))
	m.renewLatency.Record(ctx, i.Latency.Seconds(), with(names))
}

func (m *instruments) lost(ctx context.Context, names []attribute.KeyValue, i fencelock.LeaseLostInfo) {
	m.losses.Add(ctx, 1, with(names))
	m.ended(ctx, names, i.LeaseID, i.Held.Seconds())
}

func (m *instruments) released(ctx context.Context, names []attribute.KeyValue, result string, i fencelock.ReleaseDoneInfo) {
	m.releases.Add(ctx, 1, with(names, attrResult.String(result)))
	m.releaseLatency.Record(ctx, i.Latency.Seconds(), with(names))
	m.ended(ctx, names, i.LeaseID, i.Held.Seconds())
}

// ended records the end of a lease, if it is one seen acquired and not
// ended yet.
func (m *instruments) ended(ctx context.Context, names []attribute.KeyValue, id string, held float64) {
	if _, ok := m.leases.LoadAndDelete(id); !ok {
		return
	}
	m.held.Add(ctx, -1, with(names))
	m.leaseDuration.Record(ctx, held, with(names))
}

func (m *instruments) accessed(ctx context.Context, names []attribute.KeyValue, result string, i fence.AccessInfo) {
	m.accesses.Add(ctx, 1, with(names, attrOp.String(i.Op), attrFenceResult.String(result)))
	m.accessLatency.Record(ctx, i.Latency.Seconds(), with(names, attrOp.String(i.Op)))
}
