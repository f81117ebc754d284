package fenceotel

import (
	"context"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span and attribute names.
const (
	spanAcquire = "fencelock.acquire"
	spanRenew   = "fencelock.renew"
	spanRelease = "fencelock.release"
	spanLost    = "fencelock.lease_lost"

	attrLock     = attribute.Key("fencelock.lock")
	attrToken    = attribute.Key("fencelock.token")
	attrLease    = attribute.Key("fencelock.lease.id")
	attrAttempts = attribute.Key("fencelock.attempts")
	attrResult   = attribute.Key("fencelock.result")
	attrHeld     = attribute.Key("fencelock.lease.held") // seconds
	attrDeadline = attribute.Key("fencelock.lease.deadline")

	attrResource     = attribute.Key("fence.resource")
	attrOp           = attribute.Key("fence.op")
	attrFenceLock    = attribute.Key("fence.lock")
	attrFenceToken   = attribute.Key("fence.token")
	attrFenceLease   = attribute.Key("fence.lease.id")
	attrFenceResult  = attribute.Key("fence.result")
	attrCurrentToken = attribute.Key("fence.current.token")
	attrCurrentLease = attribute.Key("fence.current.lease.id")
)

// span records an operation that is over: it started took ago and ended
// now. Hooks report operations when they end, so the span is created with
// its real start time.
func (in *Instrumentation) span(ctx context.Context, name string, took time.Duration, err error, failed bool, attrs ...attribute.KeyValue) {
	now := time.Now()
	_, s := in.tracer.Start(ctx, name, trace.WithTimestamp(now.Add(-took)), trace.WithAttributes(attrs...))
	if failed {
		s.RecordError(err, trace.WithTimestamp(now))
		s.SetStatus(codes.Error, err.Error())
	}
	s.End(trace.WithTimestamp(now))
}

func (in *Instrumentation) acquireDone(ctx context.Context, i fencelock.AcquireDoneInfo) {
	result := acquireResult(i.Err)
	in.m.acquired(ctx, in.lock(i.Name), result, i)
	attrs := []attribute.KeyValue{attrLock.String(i.Name), attrAttempts.Int(i.Attempts), attrResult.String(result)}
	if i.Err == nil {
		attrs = append(attrs, attrToken.Int64(i.Token), attrLease.String(i.LeaseID))
	}
	// Not acquiring a held lock is an answer, not a failure.
	in.span(ctx, spanAcquire, i.Wait, i.Err, result == resultError || result == resultNotReplicated, attrs...)
}

func (in *Instrumentation) renewDone(ctx context.Context, i fencelock.RenewDoneInfo) {
	result := leaseResult(i.Err)
	in.m.renewed(ctx, in.lock(i.Name), result, i)
	in.span(ctx, spanRenew, i.Latency, i.Err, i.Err != nil,
		attrLock.String(i.Name), attrToken.Int64(i.Token), attrLease.String(i.LeaseID),
		attrResult.String(result), attrDeadline.String(i.Deadline.Format(time.RFC3339Nano)))
}

func (in *Instrumentation) leaseLost(ctx context.Context, i fencelock.LeaseLostInfo) {
	in.m.lost(ctx, in.lock(i.Name), i)
	// A loss is an event, not an operation: a span of no duration, so it
	// shows in the acquisition's trace.
	in.span(ctx, spanLost, 0, i.Cause, true,
		attrLock.String(i.Name), attrToken.Int64(i.Token), attrLease.String(i.LeaseID),
		attrHeld.Float64(i.Held.Seconds()))
}

func (in *Instrumentation) releaseDone(ctx context.Context, i fencelock.ReleaseDoneInfo) {
	result := leaseResult(i.Err)
	in.m.released(ctx, in.lock(i.Name), result, i)
	in.span(ctx, spanRelease, i.Latency, i.Err, i.Err != nil,
		attrLock.String(i.Name), attrToken.Int64(i.Token), attrLease.String(i.LeaseID),
		attrResult.String(result), attrHeld.Float64(i.Held.Seconds()))
}

func (in *Instrumentation) access(ctx context.Context, i fence.AccessInfo) {
	result := accessResult(i.Err)
	in.m.accessed(ctx, in.resource(i), result, i)
	attrs := []attribute.KeyValue{attrResource.String(i.Resource), attrOp.String(i.Op), attrFenceResult.String(result)}
	if i.Err == nil || result == resultStale {
		// A fence that failed otherwise may be invalid: whatever a client
		// sent is not copied into traces.
		attrs = append(attrs, attrFenceLock.String(i.Fence.Lock), attrFenceToken.Int64(i.Fence.Token), attrFenceLease.String(i.Fence.Lease))
	}
	if result == resultStale {
		attrs = append(attrs, attrCurrentToken.Int64(i.Current.Token), attrCurrentLease.String(i.Current.Lease))
	}
	in.span(ctx, "fence."+i.Op, i.Latency, i.Err, i.Err != nil, attrs...)
}
