package fenceotel

import (
	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/fencelock/fencelock/fenceotel"

// Options configure an Instrumentation. A nil *Options is valid and
// selects every default.
type Options struct {
	// TracerProvider creates the tracer.
	// Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MeterProvider creates the meter.
	// Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// LockAttribute adds a "fencelock.lock" attribute, the lock's name, to
	// every metric, and "fence.resource" to the fence metrics. Each name
	// then makes time series of its own: set it only when the application
	// uses a small, fixed set of names.
	// Default: false.
	LockAttribute bool
}

// An Instrumentation turns lease and fence events into spans and metrics.
// It is safe for concurrent use, and one Instrumentation may serve many
// Clients and Stores.
type Instrumentation struct {
	tracer trace.Tracer
	names  bool // Options.LockAttribute
	m      instruments
}

// New returns an Instrumentation configured by opts. Like
// fencelock.New, it never fails: an instrument the meter cannot create
// is reported to otel.Handle and replaced by a no-op one.
func New(opts *Options) *Instrumentation {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	return &Instrumentation{
		tracer: o.TracerProvider.Tracer(ScopeName, trace.WithInstrumentationVersion(version)),
		names:  o.LockAttribute,
		m:      newInstruments(o.MeterProvider.Meter(ScopeName, metric.WithInstrumentationVersion(version))),
	}
}

// version is the instrumentation's version, reported with its scope.
const version = "0.1.0"

// Hooks returns the hooks to set as fencelock.Options.Hooks.
func (in *Instrumentation) Hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: in.acquireAttempt,
		AcquireDone:    in.acquireDone,
		RenewDone:      in.renewDone,
		LeaseLost:      in.leaseLost,
		ReleaseDone:    in.releaseDone,
	}
}

// FenceHooks returns the hooks to give fence.WithHooks.
func (in *Instrumentation) FenceHooks() *fence.Hooks {
	return &fence.Hooks{Accepted: in.access, Stale: in.access, Failed: in.access}
}
