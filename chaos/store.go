package chaos

import (
	"context"
	"errors"
	"sync"

	"github.com/fencelock/fencelock/fence"
)

type opKey struct{}

// opTag names an operation across the wire: holder and operation ID.
type opTag struct {
	client int
	id     int64
}

// WithOp returns a context that tells a Journal (directly, or through the
// HTTP resource's headers) which holder and operation a call belongs to.
func WithOp(ctx context.Context, client int, id int64) context.Context {
	return context.WithValue(ctx, opKey{}, opTag{client, id})
}

// OpFrom returns the holder and operation ID that WithOp put in ctx.
func OpFrom(ctx context.Context) (client int, id int64, ok bool) {
	t, ok := opFrom(ctx)
	return t.client, t.id, ok
}

func opFrom(ctx context.Context) (opTag, bool) {
	t, ok := ctx.Value(opKey{}).(opTag)
	return t, ok
}

// Plain is the negative control's resource: a store that ignores fences.
// Every Put, Get and Delete succeeds, as on a resource that was never
// told about fencing. It keeps the last fence only to report it in Load.
type Plain struct {
	mu sync.Mutex
	m  map[string]Final
}

var _ fence.Store = (*Plain)(nil)

// Put stores value, whatever f says.
func (p *Plain) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	return p.set(ctx, resource, Final{Value: string(value), Present: true, Fence: f})
}

// Get returns the value, whatever f says.
func (p *Plain) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[resource]
	if !e.Present {
		return nil, nil
	}
	return []byte(e.Value), nil
}

// Delete removes the value, whatever f says.
func (p *Plain) Delete(ctx context.Context, resource string, f fence.Fence) error {
	return p.set(ctx, resource, Final{Fence: f})
}

// Load returns the value and the last fence sent.
func (p *Plain) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	if err := ctx.Err(); err != nil {
		return nil, fence.Fence{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.m[resource]
	if !e.Present {
		return nil, e.Fence, nil
	}
	return []byte(e.Value), e.Fence, nil
}

func (p *Plain) set(ctx context.Context, resource string, e Final) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]Final{}
	}
	p.m[resource] = e
	return nil
}

// Journal wraps the store at the resource and records every decision:
// each call with its result, called just before it reaches the store
// and returned just after, so that the store's own atomic step lies
// within. It does not serialise the calls: what the resource is meant to
// serialise (fence.Memory's check and record, httpfence.Middleware's
// check and handler) must do so by itself, or the checks see it. Calls
// carry their holder and operation ID in the context (WithOp).
type Journal struct {
	Store fence.Store

	// AfterRead, if set, is called by the HTTP resource after an accepted
	// fenced read of Counter, before its reply leaves the resource: the
	// nemesis's hook for pausing the reader.
	AfterRead func(client int, f fence.Fence)

	mu  sync.Mutex
	ops []Op
}

var _ fence.Store = (*Journal)(nil)

// Put records and forwards a fenced write.
func (j *Journal) Put(ctx context.Context, resource string, f fence.Fence, value []byte) error {
	_, err := j.do(ctx, Input{Resource: resource, Op: OpPut, Fence: f, Value: string(value)}, func() ([]byte, error) {
		return nil, j.Store.Put(ctx, resource, f, value)
	})
	return err
}

// Get records and forwards a fenced read.
func (j *Journal) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return j.do(ctx, Input{Resource: resource, Op: OpGet, Fence: f}, func() ([]byte, error) {
		return j.Store.Get(ctx, resource, f)
	})
}

// Delete records and forwards a fenced delete.
func (j *Journal) Delete(ctx context.Context, resource string, f fence.Fence) error {
	_, err := j.do(ctx, Input{Resource: resource, Op: OpDelete, Fence: f}, func() ([]byte, error) {
		return nil, j.Store.Delete(ctx, resource, f)
	})
	return err
}

// Load forwards an unfenced read; it is not recorded.
func (j *Journal) Load(ctx context.Context, resource string) ([]byte, fence.Fence, error) {
	return j.Store.Load(ctx, resource)
}

// Ops returns the journal so far.
func (j *Journal) Ops() []Op {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Op(nil), j.ops...)
}

// Add records a decision made in front of the store (httpfence's
// rejection of a stale fence), between call and ret (ns), with what the
// caller was told.
func (j *Journal) Add(ctx context.Context, in Input, v []byte, err error, call, ret int64) {
	tag, _ := opFrom(ctx)
	op := Op{ID: tag.id, Client: tag.client, Input: in, Output: outcome(in.Op, v, err), Call: call, Return: ret}
	if err != nil {
		op.Err = err.Error()
	}
	j.mu.Lock()
	j.ops = append(j.ops, op)
	j.mu.Unlock()
}

func (j *Journal) do(ctx context.Context, in Input, f func() ([]byte, error)) ([]byte, error) {
	call := now()
	v, err := f()
	j.Add(ctx, in, v, err, call, now())
	return v, err
}

// outcome classifies what a call returned.
func outcome(op string, v []byte, err error) Output {
	switch {
	case errors.Is(err, fence.ErrStale):
		return Output{Result: ResultStale}
	case err != nil:
		return Output{Result: ResultUnknown}
	case op == OpGet:
		return Output{Result: ResultOK, Value: string(v), Present: v != nil}
	}
	return Output{Result: ResultOK}
}
