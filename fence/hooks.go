package fence

import (
	"context"
	"errors"
	"time"
)

// Hooks receive the decisions of a Store wrapped by Observe, for metrics
// and tracing (package fenceprom implements them for Prometheus). Every
// field is optional: a nil func is skipped.
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

// AccessInfo describes one fenced access.
type AccessInfo struct {
	// Op is the access: "put", "get" or "delete".
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

// Observe returns a Store that forwards every call to s and reports the
// outcome of each fenced access (Put, Get, Delete) to h. Load, which
// fences nothing, is forwarded unreported. One wrapper serves every Store
// implementation, so adapters need no hooks of their own. A nil h, or
// one without funcs, returns s itself.
func Observe(s Store, h *Hooks) Store {
	if h == nil || (h.Accepted == nil && h.Stale == nil && h.Failed == nil) {
		return s
	}
	return &observed{Store: s, h: *h}
}

// observed is the Store that Observe returns. Embedding the Store keeps
// it complete if the interface grows; such new methods go unreported
// until they are wrapped here.
type observed struct {
	Store
	h Hooks
}

func (o *observed) Put(ctx context.Context, resource string, f Fence, value []byte) error {
	start := time.Now()
	err := o.Store.Put(ctx, resource, f, value)
	o.report(ctx, "put", resource, f, start, err)
	return err
}

func (o *observed) Get(ctx context.Context, resource string, f Fence) ([]byte, error) {
	start := time.Now()
	v, err := o.Store.Get(ctx, resource, f)
	o.report(ctx, "get", resource, f, start, err)
	return v, err
}

func (o *observed) Delete(ctx context.Context, resource string, f Fence) error {
	start := time.Now()
	err := o.Store.Delete(ctx, resource, f)
	o.report(ctx, "delete", resource, f, start, err)
	return err
}

func (o *observed) report(ctx context.Context, op, resource string, f Fence, start time.Time, err error) {
	info := AccessInfo{Op: op, Resource: resource, Fence: f, Latency: time.Since(start), Err: err}
	hook := o.h.Accepted
	if err != nil {
		hook = o.h.Failed
		if errors.Is(err, ErrStale) {
			hook = o.h.Stale
			var serr *StaleError
			if errors.As(err, &serr) {
				info.Current = serr.Current
			}
		}
	}
	if hook != nil {
		hook(ctx, info)
	}
}
