// Package fenceotel reports the events of fencelock's leases and of fenced
// stores to OpenTelemetry: a span for each acquisition (its wait
// included), renewal, release, loss and fenced access, with stale
// rejections marked, and metrics for the same events.
//
// An Instrumentation gives hooks for fencelock.Options and for
// fence.WithHooks:
//
//	otl := fenceotel.New(nil) // the global TracerProvider and MeterProvider
//	c := fencelock.New(rdb, &fencelock.Options{Hooks: otl.Hooks()})
//	store := fence.WithHooks(redisfence.New(rdb, nil), otl.FenceHooks())
//
// The adapters whose fenced accesses are not fence.Store methods take the
// same hooks themselves: sqlfence's Store.WithHooks (for Tx), and the
// Hooks field of httpfence.Middleware and grpcfence.Server.
//
// Spans start under the span in the context given to TryAcquire, Acquire,
// Renew, Release and the store's calls; the keeper's renewals and the
// losses it finds go under the span of the acquisition's context. Hooks
// report operations once they are over, so each span is created with its
// real start time and ended at once.
//
// No span attribute or metric attribute ever holds a lease's secret
// owner value: leases are named by their public ID. Lock names are span
// attributes always, but metric attributes only when Options asks for
// them, since each distinct name would make time series of its own.
//
// The module is separate from fencelock's, so that the library's go.mod
// needs no OpenTelemetry: its only dependencies are the OpenTelemetry API
// (go.opentelemetry.io/otel, /trace, /metric), and the SDK for its tests.
package fenceotel
