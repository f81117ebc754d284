package fence

import (
	"context"
	"errors"
	"time"
)

// Hooks receive the decisions of fenced accesses, for metrics and tracing
// (package fenceprom implements them for Prometheus): those of a Store
// wrapped by WithHooks, and those of the adapters whose accesses are not
// Store methods, which take Hooks of their own and report through
// Report: sqlfence's Store.WithHooks (Tx), httpfence.Middleware.Hooks and
// grpcfence.Server.Hooks. Every field is optional: a nil func is skipped.
//
// Hooks are called synchronously, after the access returned, from the
// goroutine that made it, with the access's context (for tracing and log
// correlation). They must be quick and safe for concurrent use.
type Hooks struct {
	// Accepted is called after a fenced access (Put, Get, Delete) was
	// accepted.
	Accepted func(context.Context, AccessInfo)

	// Stale is called after a fenced access was refused because the
	// resource had accepted a newer fence, or one of another lock: the
	// error wraps ErrStale.
	Stale func(context.Context, AccessInfo)

	// Failed is called after a fenced access failed otherwise: an invalid
	// fence (ErrInvalid), a context that ended, or the store's own error.
	Failed func(context.Context, AccessInfo)
}

// JoinHooks returns Hooks that call, for each decision, the funcs of hs
// in the order given: Prometheus and OpenTelemetry hooks, say, on one
// store. Nil Hooks and nil funcs are skipped; if no func is set at all,
// JoinHooks returns nil. The fields are read when JoinHooks is called.
func JoinHooks(hs ...*Hooks) *Hooks {
	var j Hooks
	for _, h := range hs {
		if h != nil {
			j.Accepted = joinHook(j.Accepted, h.Accepted)
			j.Stale = joinHook(j.Stale, h.Stale)
			j.Failed = joinHook(j.Failed, h.Failed)
		}
	}
	if j.Accepted == nil && j.Stale == nil && j.Failed == nil {
		return nil
	}
	return &j
}

// joinHook returns a func that calls a, then b; either alone if the other
// is nil.
func joinHook(a, b func(context.Context, AccessInfo)) func(context.Context, AccessInfo) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(ctx context.Context, i AccessInfo) {
		a(ctx, i)
		b(ctx, i)
	}
}

// AccessInfo describes one fenced access.
type AccessInfo struct {
	// Op is the access: "put", "get" or "delete" for the Store methods,
	// "tx" for sqlfence's Store.Tx, "http" for a request that
	// httpfence's Middleware checked, "grpc" for a call that grpcfence's
	// Server checked.
	Op string
	// Resource is the resource's name.
	Resource string
	// Fence is the fence the access carried.
	Fence Fence
	// Current is, for a stale access, the fence that the resource had
	// accepted last and that refused this one; else the zero Fence.
	Current Fence
	// Latency is the access's duration.
	Latency time.Duration
	// Err is the access's error, nil if it was accepted.
	Err error
}

// WithHooks returns a Store that forwards every call to s and reports the
// outcome of each fenced access (Put, Get, Delete) to h. Load, which
// fences nothing, is forwarded unreported. One wrapper serves every Store
// implementation, so adapters need no hooks of their own. A nil h, or
// one without funcs, returns s itself.
func WithHooks(s Store, h *Hooks) Store {
	if h == nil || (h.Accepted == nil && h.Stale == nil && h.Failed == nil) {
		return s
	}
	return &hooked{Store: s, h: *h}
}

// hooked is the Store that WithHooks returns. Embedding the Store keeps
// it complete if the interface grows; such new methods go unreported
// until they are wrapped here.
type hooked struct {
	Store
	h Hooks
}

func (o *hooked) Put(ctx context.Context, resource string, f Fence, value []byte) error {
	start := time.Now()
	err := o.Store.Put(ctx, resource, f, value)
	o.report(ctx, "put", resource, f, start, err)
	return err
}

func (o *hooked) Get(ctx context.Context, resource string, f Fence) ([]byte, error) {
	start := time.Now()
	v, err := o.Store.Get(ctx, resource, f)
	o.report(ctx, "get", resource, f, start, err)
	return v, err
}

func (o *hooked) Delete(ctx context.Context, resource string, f Fence) error {
	start := time.Now()
	err := o.Store.Delete(ctx, resource, f)
	o.report(ctx, "delete", resource, f, start, err)
	return err
}

func (o *hooked) report(ctx context.Context, op, resource string, f Fence, start time.Time, err error) {
	o.h.Report(ctx, AccessInfo{Op: op, Resource: resource, Fence: f, Latency: time.Since(start), Err: err})
}

// Report passes one fenced access to the func of h that its error calls
// for: Accepted if info.Err is nil, Stale if it wraps ErrStale (with
// info.Current set from its *StaleError), Failed otherwise. A nil h or
// func is skipped. WithHooks reports through it; an adapter whose fenced
// accesses are not Store methods calls it once for each of them.
func (h *Hooks) Report(ctx context.Context, info AccessInfo) {
	if h == nil {
		return
	}
	hook := h.Accepted
	if info.Err != nil {
		hook = h.Failed
		if errors.Is(info.Err, ErrStale) {
			hook = h.Stale
			var serr *StaleError
			if errors.As(info.Err, &serr) {
				info.Current = serr.Current
			}
		}
	}
	if hook != nil {
		hook(ctx, info)
	}
}
