package grpcfence

import (
	"context"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
)

// A FenceFunc returns the fence to send with a call made with ctx,
// usually the current lease's (lease.Fence()); if ok is false the call
// goes without one.
type FenceFunc func(ctx context.Context) (f fence.Fence, ok bool)

// UnaryClientInterceptor returns an interceptor that sends the fence of
// fenceOf with each unary call, in place of any the caller set. A fence
// that fails fence.Fence.Validate is an error wrapping fence.ErrInvalid,
// and the call is not sent. A STALE_FENCE refusal is returned as an error
// wrapping fence.ErrStale (see the package documentation).
func UnaryClientInterceptor(fenceOf FenceFunc) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, f, err := withFence(ctx, method, fenceOf)
		if err != nil {
			return err
		}
		return staleError(invoker(ctx, method, req, reply, cc, opts...), f)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams. The
// refusal of a stream shows in its first RecvMsg (or CloseAndRecv).
func StreamClientInterceptor(fenceOf FenceFunc) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, f, err := withFence(ctx, method, fenceOf)
		if err != nil {
			return nil, err
		}
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, staleError(err, f)
		}
		return &clientStream{ClientStream: cs, f: f}, nil
	}
}

// clientStream turns the stream's refusal into a stale error.
type clientStream struct {
	grpc.ClientStream
	f fence.Fence
}

func (s *clientStream) RecvMsg(m any) error { return staleError(s.ClientStream.RecvMsg(m), s.f) }

// withFence returns ctx with the fence of fenceOf as the only
// fencing-token metadata value, and the fence (the zero Fence if none).
func withFence(ctx context.Context, method string, fenceOf FenceFunc) (context.Context, fence.Fence, error) {
	f, ok := fenceOf(ctx)
	if !ok {
		return ctx, fence.Fence{}, nil
	}
	if err := f.Validate(); err != nil {
		return nil, fence.Fence{}, fmt.Errorf("grpcfence: %s: %w", method, err)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(MetadataKey, f.String())
	return metadata.NewOutgoingContext(ctx, md), f, nil
}

// staleError returns err, or, for a STALE_FENCE refusal of a call that
// sent sent, an error that also wraps a *fence.StaleError.
func staleError(err error, sent fence.Fence) error {
	if err == nil || sent == (fence.Fence{}) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Aborted {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != Domain || info.GetReason() != ReasonStale {
			continue
		}
		cur, perr := fence.Parse(info.GetMetadata()["current_fence"])
		if perr != nil {
			return err
		}
		return &staleStatusError{StaleError: fence.StaleError{Current: cur, Rejected: sent}, status: st}
	}
	return err
}

// staleStatusError is the error of a call refused for a stale fence: a
// *fence.StaleError that still carries the call's status.
type staleStatusError struct {
	fence.StaleError
	status *status.Status
}

// GRPCStatus returns the call's status, so that status.FromError and
// status.Code see it.
func (e *staleStatusError) GRPCStatus() *status.Status { return e.status }

// Unwrap returns the *fence.StaleError, which wraps fence.ErrStale.
func (e *staleStatusError) Unwrap() error { return &e.StaleError }
