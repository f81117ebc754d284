package grpcfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/internal/keyed"
)

// MetadataKey is the metadata entry that carries a fence.
const MetadataKey = "fencing-token"

// Domain and the reasons are those of the google.rpc.ErrorInfo detail of
// a refused call.
const (
	Domain         = "fencelock"
	ReasonStale    = "STALE_FENCE"
	ReasonRequired = "FENCE_REQUIRED"
	ReasonInvalid  = "MALFORMED_FENCE"
)

// Server checks the fence of each call against a Store. A Server must not
// be copied after first use.
type Server struct {
	// Store keeps the resources' fences. The interceptors record fences
	// with Store.Get, so values kept in it under the same resource names
	// are read and discarded: give the Server a Store, or a prefix, of its
	// own. Required.
	Store fence.Store

	// Resource names the resource a call to method (the full method name,
	// "/package.Service/Method") touches. req is the request of a unary
	// call, nil for a stream, which is checked before its first message.
	// If ok is false the call is not fenced and passes through unchecked.
	// Required.
	Resource func(ctx context.Context, method string, req any) (resource string, ok bool)

	// Optional lets a call for a resource pass through unchecked if it
	// has no fence. A call that has one is checked all the same. Default:
	// false, such calls fail with InvalidArgument.
	Optional bool

	// Hooks, if set, receive the decision on each call the interceptors
	// fence, with Op "grpc", before the handler runs: accepted (the
	// handler runs), stale (Aborted), or failed (InvalidArgument, with an
	// error wrapping fence.ErrInvalid; Unavailable, with the Store's or
	// the context's error). Calls that pass through unchecked are not
	// reported. Set it rather than wrapping Store with fence.WithHooks,
	// which would report each checked call again, as a "get", and none of
	// those refused before the Store is asked. Default: nil, nothing is
	// reported.
	Hooks *fence.Hooks

	locks keyed.Mutex
}

// UnaryInterceptor returns the interceptor that fences unary calls. For
// an admitted call, FromContext(ctx) in the handler returns the fence.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		var resp any
		err := s.admit(ctx, info.FullMethod, req, func(ctx context.Context) error {
			var err error
			resp, err = handler(ctx, req)
			return err
		})
		return resp, err
	}
}

// StreamInterceptor returns the interceptor that fences streams. For an
// admitted stream, FromContext(stream.Context()) in the handler returns
// the fence.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return s.admit(ss.Context(), info.FullMethod, nil, func(ctx context.Context) error {
			if ctx == ss.Context() {
				return handler(srv, ss)
			}
			return handler(srv, &fencedStream{ServerStream: ss, ctx: ctx})
		})
	}
}

// fencedStream is a ServerStream whose context carries the fence.
type fencedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *fencedStream) Context() context.Context { return s.ctx }

// admit applies the rule to one call and runs handle, with the fence in
// its context, if the call is admitted or not fenced.
func (s *Server) admit(ctx context.Context, method string, req any, handle func(context.Context) error) error {
	resource, ok := s.Resource(ctx, method, req)
	if !ok {
		return handle(ctx)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get(MetadataKey)
	if len(values) == 0 && s.Optional {
		return handle(ctx)
	}
	start := time.Now()
	var f fence.Fence
	report := func(err error) {
		s.Hooks.Report(ctx, fence.AccessInfo{Op: "grpc", Resource: resource, Fence: f, Latency: time.Since(start), Err: err})
	}
	switch {
	case len(values) == 0:
		report(fmt.Errorf("%w: no %s metadata", fence.ErrInvalid, MetadataKey))
		return refusal(codes.InvalidArgument, ReasonRequired, "send the lease's fence in the "+MetadataKey+" metadata", nil)
	case len(values) > 1:
		report(fmt.Errorf("%w: more than one %s metadata value", fence.ErrInvalid, MetadataKey))
		return refusal(codes.InvalidArgument, ReasonInvalid, "more than one "+MetadataKey+" metadata value", nil)
	}
	f, err := fence.Parse(values[0])
	if err != nil {
		report(err)
		return refusal(codes.InvalidArgument, ReasonInvalid, err.Error(), nil)
	}

	unlock, err := s.locks.Lock(ctx, resource)
	if err != nil {
		report(err)
		return status.Errorf(codes.Unavailable, "grpcfence: waiting for resource %q: %v", resource, err)
	}
	defer unlock()
	_, err = s.Store.Get(ctx, resource, f)
	report(err)
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		return refusal(codes.Aborted, ReasonStale, stale.Error(), map[string]string{
			"current_fence": stale.Current.String(),
			"current_lock":  stale.Current.Lock,
			"current_token": strconv.FormatInt(stale.Current.Token, 10),
		})
	case err != nil:
		return status.Error(codes.Unavailable, "grpcfence: the fence store could not be reached")
	}
	return handle(context.WithValue(ctx, fenceKey{}, f))
}

// refusal is the status of a refused call, with its ErrorInfo.
func refusal(code codes.Code, reason, msg string, md map[string]string) error {
	st := status.New(code, "grpcfence: "+msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: Domain, Metadata: md}); err == nil {
		st = withInfo
	}
	return st.Err()
}

type fenceKey struct{}

// FromContext returns the fence the interceptors admitted the call with.
// ok is false for a call that passed through unchecked.
func FromContext(ctx context.Context) (f fence.Fence, ok bool) {
	f, ok = ctx.Value(fenceKey{}).(fence.Fence)
	return f, ok
}
