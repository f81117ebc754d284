package grpcfence_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/fencetest"
	"github.com/fencelock/fencelock/fence/grpcfence"
)

// byPayload fences UnaryCall on the resource its payload names, and
// StreamingInputCall on "stream"; other methods pass unchecked.
func byPayload(_ context.Context, method string, req any) (string, bool) {
	switch method {
	case testgrpc.TestService_UnaryCall_FullMethodName:
		return string(req.(*testgrpc.SimpleRequest).GetPayload().GetBody()), true
	case testgrpc.TestService_StreamingInputCall_FullMethodName:
		return "stream", true
	}
	return "", false
}

// service answers UnaryCall with the admitted fence's text form (or
// "unfenced"), and StreamingInputCall with the number of messages, after
// handing the stream's fence to streamed.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	calls    atomic.Int64
	unary    func(fence.Fence)
	streamed func(fence.Fence)
}

func (s *service) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.calls.Add(1)
	return &testgrpc.Empty{}, nil
}

func (s *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	s.calls.Add(1)
	body := "unfenced"
	if f, ok := grpcfence.FromContext(ctx); ok {
		body = f.String()
		if s.unary != nil {
			s.unary(f)
		}
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: []byte(body)}}, nil
}

func (s *service) StreamingInputCall(stream grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	s.calls.Add(1)
	f, _ := grpcfence.FromContext(stream.Context())
	if s.streamed != nil {
		s.streamed(f)
	}
	n := int32(0)
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n++
	}
}

// serve runs svc behind srv's interceptors on a loopback TCP listener
// and returns its address.
func serve(t *testing.T, srv *grpcfence.Server, svc testgrpc.TestServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(srv.UnaryInterceptor()), grpc.StreamInterceptor(srv.StreamInterceptor()))
	testgrpc.RegisterTestServiceServer(s, svc)
	done := make(chan error, 1)
	go func() { done <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// sendKey is the context key under which the tests put the fence their
// client interceptors send.
type sendKey struct{}

func sendFence(ctx context.Context) (fence.Fence, bool) {
	f, ok := ctx.Value(sendKey{}).(fence.Fence)
	return f, ok
}

func with(ctx context.Context, f fence.Fence) context.Context {
	return context.WithValue(ctx, sendKey{}, f)
}

// dial returns a client for addr whose calls send the fence of sendFence.
func dial(t *testing.T, addr string) testgrpc.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcfence.UnaryClientInterceptor(sendFence)),
		grpc.WithStreamInterceptor(grpcfence.StreamClientInterceptor(sendFence)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

func unary(ctx context.Context, c testgrpc.TestServiceClient, resource string) (string, error) {
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte(resource)}})
	return string(resp.GetPayload().GetBody()), err
}

// errorInfo returns the ErrorInfo detail of err's status.
func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

func TestUnary(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	f11 := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
	store := &fence.Memory{}
	if err := store.Put(t.Context(), "orders/42", f10, nil); err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	c := dial(t, serve(t, &grpcfence.Server{Store: store, Resource: byPayload}, svc))
	ctx := t.Context()

	if got, err := unary(with(ctx, f11), c, "orders/42"); err != nil || got != f11.String() {
		t.Fatalf("UnaryCall with %v = %q, %v; want %q, nil", f11, got, err, f11.String())
	}
	if got, err := unary(with(ctx, f11), c, "orders/42"); err != nil || got != f11.String() {
		t.Errorf("UnaryCall with %v again = %q, %v; want %q, nil", f11, got, err, f11.String())
	}

	for _, stale := range []fence.Fence{
		f10,
		{Lock: "orders", Token: 11, Lease: "c"},
		{Lock: "invoices", Token: 99, Lease: "c"},
	} {
		before := svc.calls.Load()
		_, err := unary(with(ctx, stale), c, "orders/42")
		var se *fence.StaleError
		if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) || se.Current != f11 || se.Rejected != stale {
			t.Errorf("UnaryCall with %v = %v, want a *fence.StaleError{%v, %v}", stale, err, f11, stale)
		}
		if code := status.Code(err); code != codes.Aborted {
			t.Errorf("UnaryCall with %v: code %v, want Aborted", stale, code)
		}
		info := errorInfo(err)
		if info.GetDomain() != grpcfence.Domain || info.GetReason() != grpcfence.ReasonStale ||
			info.GetMetadata()["current_fence"] != f11.String() || info.GetMetadata()["current_token"] != "11" || info.GetMetadata()["current_lock"] != "orders" {
			t.Errorf("UnaryCall with %v: ErrorInfo %v, want domain %q, reason %q and the current fence %v", stale, info, grpcfence.Domain, grpcfence.ReasonStale, f11)
		}
		if n := svc.calls.Load() - before; n != 0 {
			t.Errorf("UnaryCall with %v reached the handler %d times, want 0", stale, n)
		}
	}

	if _, err := unary(ctx, c, "orders/42"); status.Code(err) != codes.InvalidArgument || errorInfo(err).GetReason() != grpcfence.ReasonRequired {
		t.Errorf("UnaryCall without a fence = %v, want InvalidArgument, %s", err, grpcfence.ReasonRequired)
	}
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Errorf("EmptyCall, not fenced = %v, want nil", err)
	}

	before := svc.calls.Load()
	if _, err := unary(with(ctx, fence.Fence{Lock: "orders", Token: 0, Lease: "b"}), c, "orders/42"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("UnaryCall with an invalid fence = %v, want ErrInvalid", err)
	}
	if n := svc.calls.Load() - before; n != 0 {
		t.Errorf("UnaryCall with an invalid fence reached the server %d times, want 0", n)
	}
}

// TestUnary_metadata sends fencing-token metadata by hand, as a client in
// another language would.
func TestUnary_metadata(t *testing.T) {
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload}, &service{}))
	tests := []struct {
		name   string
		values []string
		code   codes.Code
		reason string
	}{
		{"current form", []string{`"12";lock="orders";lease="b"`}, codes.OK, ""},
		{"deprecated form", []string{`12;lock="orders";lease="b"`}, codes.OK, ""},
		{"malformed", []string{`"13";lock=orders;lease="b"`}, codes.InvalidArgument, grpcfence.ReasonInvalid},
		{"invalid", []string{`"0";lock="orders";lease="b"`}, codes.InvalidArgument, grpcfence.ReasonInvalid},
		{"twice", []string{`"13";lock="orders";lease="b"`, `"13";lock="orders";lease="b"`}, codes.InvalidArgument, grpcfence.ReasonInvalid},
		{"stale", []string{`"11";lock="orders";lease="b"`}, codes.Aborted, grpcfence.ReasonStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := metadata.MD{}
			for _, v := range tt.values {
				md.Append(grpcfence.MetadataKey, v)
			}
			_, err := unary(metadata.NewOutgoingContext(t.Context(), md), c, "r")
			if code := status.Code(err); code != tt.code || (tt.reason != "" && errorInfo(err).GetReason() != tt.reason) {
				t.Errorf("UnaryCall with %q = %v, want %v %s", tt.values, err, tt.code, tt.reason)
			}
		})
	}
}

func TestUnary_optional(t *testing.T) {
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload, Optional: true}, &service{}))
	if got, err := unary(t.Context(), c, "r"); err != nil || got != "unfenced" {
		t.Errorf("UnaryCall without a fence, optional = %q, %v; want unfenced, nil", got, err)
	}
	f := fence.Fence{Lock: "orders", Token: 1, Lease: "a"}
	if got, err := unary(with(t.Context(), f), c, "r"); err != nil || got != f.String() {
		t.Errorf("UnaryCall with %v, optional = %q, %v; want %q, nil", f, got, err, f.String())
	}
}

// TestUnary_optionalChecksFence: Optional spares only calls without a
// fence; a call that sends one is checked like any other.
func TestUnary_optionalChecksFence(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	store := &fence.Memory{}
	if err := store.Put(t.Context(), "r", f10, nil); err != nil {
		t.Fatal(err)
	}
	svc := &service{}
	c := dial(t, serve(t, &grpcfence.Server{Store: store, Resource: byPayload, Optional: true}, svc))
	for _, stale := range []fence.Fence{{Lock: "orders", Token: 9, Lease: "b"}, {Lock: "invoices", Token: 99, Lease: "b"}} {
		if _, err := unary(with(t.Context(), stale), c, "r"); !errors.Is(err, fence.ErrStale) || status.Code(err) != codes.Aborted {
			t.Errorf("UnaryCall with %v, optional = %v; want Aborted, ErrStale", stale, err)
		}
	}
	if n := svc.calls.Load(); n != 0 {
		t.Errorf("stale calls reached the handler %d times, want 0", n)
	}
}

// TestClient_replacesFence: the client interceptors send their fence in
// place of one the caller put in the metadata (a value copied from an
// incoming call, say), so the server gets one value, the interceptor's.
func TestClient_replacesFence(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	old := fence.Fence{Lock: "orders", Token: 9, Lease: "z"}
	var streamed []fence.Fence
	svc := &service{streamed: func(f fence.Fence) { streamed = append(streamed, f) }}
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload}, svc))
	ctx := metadata.AppendToOutgoingContext(t.Context(), grpcfence.MetadataKey, old.String(), "other", "kept")
	if got, err := unary(with(ctx, f10), c, "r"); err != nil || got != f10.String() {
		t.Errorf("UnaryCall with %v over metadata holding %v = %q, %v; want %q, nil", f10, old, got, err, f10.String())
	}
	stream, err := c.StreamingInputCall(with(ctx, f10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil || len(streamed) != 1 || streamed[0] != f10 {
		t.Errorf("stream with %v over metadata holding %v = %v, handler saw %v; want nil, %v", f10, old, err, streamed, f10)
	}
	if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(grpcfence.MetadataKey)) != 1 || len(md.Get("other")) != 1 {
		t.Errorf("caller's metadata after the calls = %v, want it unchanged", md)
	}
}

// TestServer_hooks: every call the interceptors fence is reported once,
// with Op "grpc", as accepted, stale or failed; calls that pass
// unchecked are not.
func TestServer_hooks(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	f9 := fence.Fence{Lock: "orders", Token: 9, Lease: "b"}
	var rec fencetest.Recorder
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload, Hooks: rec.Hooks()}, &service{}))
	failing := dial(t, serve(t, &grpcfence.Server{Store: failingStore{&fence.Memory{}}, Resource: byPayload, Hooks: rec.Hooks()}, &service{}))
	ctx := t.Context()
	unary(with(ctx, f10), c, "r")
	unary(with(ctx, f9), c, "r")
	unary(metadata.AppendToOutgoingContext(ctx, grpcfence.MetadataKey, `"11";lock=orders;lease="b"`), c, "r")
	unary(ctx, c, "r")
	c.EmptyCall(ctx, &testgrpc.Empty{}) // not fenced
	unary(with(ctx, f10), failing, "r")
	stream, err := c.StreamingInputCall(with(ctx, f10))
	if err != nil {
		t.Fatal(err)
	}
	stream.CloseAndRecv()
	reports := rec.Reports()
	// The hooks get the call's context on the server, which carries no
	// mark of the client's: compare the rest.
	for i := range reports {
		reports[i].Ctx = fencetest.WithMark(reports[i].Ctx, "grpc")
	}
	want := []fencetest.Want{
		{Kind: "accepted", Op: "grpc", Fence: f10},
		{Kind: "stale", Op: "grpc", Fence: f9, Current: f10},
		{Kind: "failed", Op: "grpc", Err: fence.ErrInvalid},
		{Kind: "failed", Op: "grpc", Err: fence.ErrInvalid},
		{Kind: "failed", Op: "grpc", Fence: f10, Err: io.ErrUnexpectedEOF},
	}
	if len(reports) == 6 {
		fencetest.CheckReports(t, reports[5:], fencetest.WithMark(ctx, "grpc"), "stream", fencetest.Want{Kind: "accepted", Op: "grpc", Fence: f10})
		reports = reports[:5]
	}
	fencetest.CheckReports(t, reports, fencetest.WithMark(ctx, "grpc"), "r", want...)
}

func TestUnary_storeFails(t *testing.T) {
	c := dial(t, serve(t, &grpcfence.Server{Store: failingStore{&fence.Memory{}}, Resource: byPayload}, &service{}))
	_, err := unary(with(t.Context(), fence.Fence{Lock: "orders", Token: 1, Lease: "a"}), c, "r")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("UnaryCall with a failing store = %v, want Unavailable", err)
	}
}

// failingStore is a Store whose fenced reads fail, as a Store whose server
// is down does.
type failingStore struct{ *fence.Memory }

func (failingStore) Get(context.Context, string, fence.Fence) ([]byte, error) {
	return nil, io.ErrUnexpectedEOF
}

func TestStream(t *testing.T) {
	f10 := fence.Fence{Lock: "orders", Token: 10, Lease: "a"}
	f11 := fence.Fence{Lock: "orders", Token: 11, Lease: "b"}
	var seen []fence.Fence
	svc := &service{streamed: func(f fence.Fence) { seen = append(seen, f) }}
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload}, svc))

	send := func(f fence.Fence, messages int) (int32, error) {
		stream, err := c.StreamingInputCall(with(t.Context(), f))
		if err != nil {
			return 0, err
		}
		for range messages {
			if err := stream.Send(&testgrpc.StreamingInputCallRequest{}); err != nil && err != io.EOF {
				return 0, err
			}
		}
		resp, err := stream.CloseAndRecv()
		return resp.GetAggregatedPayloadSize(), err
	}
	if n, err := send(f11, 3); err != nil || n != 3 {
		t.Fatalf("stream with %v = %d, %v; want 3, nil", f11, n, err)
	}
	_, err := send(f10, 3)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Current != f11 || se.Rejected != f10 || status.Code(err) != codes.Aborted {
		t.Errorf("stream with %v = %v, want Aborted, a *fence.StaleError{%v, %v}", f10, err, f11, f10)
	}
	if len(seen) != 1 || seen[0] != f11 {
		t.Errorf("stream handler saw fences %v, want only %v", seen, f11)
	}
}

// TestConcurrent runs unary calls and streams with mixed tokens and
// leases, on one resource each, over loopback. The handlers' effect
// stands for a resource that cannot compare tokens: it only remembers the
// last fence it acted for, in a variable nothing but the interceptors
// guard. The handlers must see the fences in the order the rule allows.
func TestConcurrent(t *testing.T) {
	type order struct {
		last      fence.Fence
		backwards []string
	}
	var u, s order
	see := func(o *order) func(fence.Fence) {
		return func(f fence.Fence) {
			if f.Token < o.last.Token || (f.Token == o.last.Token && f.Lease != o.last.Lease) {
				o.backwards = append(o.backwards, f.String()+" after "+o.last.String())
			}
			o.last = f
		}
	}
	svc := &service{unary: see(&u), streamed: see(&s)}
	c := dial(t, serve(t, &grpcfence.Server{Store: &fence.Memory{}, Resource: byPayload}, svc))

	const callers, perCaller = 8, 30
	var clock atomic.Int64
	var ok, stale atomic.Int64
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for j := range perCaller {
				f := fence.Fence{Lock: "orders", Token: clock.Add(1)/4 + 1 + int64(j%3), Lease: []string{"x", "y"}[(i+j)%2]}
				var err error
				if i%2 == 0 {
					_, err = unary(with(t.Context(), f), c, "orders/42")
				} else {
					var stream grpc.ClientStreamingClient[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]
					if stream, err = c.StreamingInputCall(with(t.Context(), f)); err == nil {
						_, err = stream.CloseAndRecv()
					}
				}
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, fence.ErrStale):
					stale.Add(1)
				default:
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, b := range append(u.backwards, s.backwards...) {
		t.Errorf("handler ran for %s", b)
	}
	if ok.Load() == 0 || stale.Load() == 0 {
		t.Errorf("%d admitted, %d stale; want some of each, or the load tests nothing", ok.Load(), stale.Load())
	}
}

// TestServer_serialises shows, without relying on the race detector, that
// no call for a resource is checked or handled while a handler for it
// runs: from inside an older fence's handler, it makes a call with a newer
// fence whose context has already ended, so that it cannot wait for the
// resource. That call must be turned away (Unavailable) without being
// checked, else its handler would act inside the older one's. The Store
// ignores the ended context, so that only the serialisation can turn the
// call away. The interceptors are called in process, since a client does
// not send a call whose context has ended.
func TestServer_serialises(t *testing.T) {
	store := &fence.Memory{}
	srv := &grpcfence.Server{Store: ignoreCancel{store}, Resource: func(context.Context, string, any) (string, bool) { return "r", true }}
	unaryIC, streamIC := srv.UnaryInterceptor(), srv.StreamInterceptor()
	incoming := func(ctx context.Context, token int64) context.Context {
		f := fence.Fence{Lock: "l", Token: token, Lease: "x"}
		return metadata.NewIncomingContext(ctx, metadata.Pairs(grpcfence.MetadataKey, f.String()))
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	var events []string
	var nestedErrs []error
	uinfo := &grpc.UnaryServerInfo{FullMethod: "/t.T/Unary"}
	sinfo := &grpc.StreamServerInfo{FullMethod: "/t.T/Stream"}
	var unaryHandler grpc.UnaryHandler
	var streamHandler grpc.StreamHandler
	run := func(f fence.Fence) {
		events = append(events, "start "+f.String())
		if f.Token == 1 {
			_, err := unaryIC(incoming(ended, 2), nil, uinfo, unaryHandler)
			nestedErrs = append(nestedErrs, err)
			nestedErrs = append(nestedErrs, streamIC(nil, stream{incoming(ended, 3)}, sinfo, streamHandler))
		}
		events = append(events, "end "+f.String())
	}
	unaryHandler = func(ctx context.Context, _ any) (any, error) {
		f, _ := grpcfence.FromContext(ctx)
		run(f)
		return nil, nil
	}
	streamHandler = func(_ any, ss grpc.ServerStream) error {
		f, _ := grpcfence.FromContext(ss.Context())
		run(f)
		return nil
	}

	for name, call := range map[string]func() error{
		"unary": func() error {
			_, err := unaryIC(incoming(t.Context(), 1), nil, uinfo, unaryHandler)
			return err
		},
		"stream": func() error { return streamIC(nil, stream{incoming(t.Context(), 1)}, sinfo, streamHandler) },
	} {
		events, nestedErrs = nil, nil
		store = &fence.Memory{}
		srv.Store = ignoreCancel{store}
		if err := call(); err != nil {
			t.Fatalf("%s call with token 1 = %v, want nil", name, err)
		}
		for _, err := range nestedErrs {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: call with a newer token during token 1's handler, unable to wait = %v, want Unavailable", name, err)
			}
		}
		want := `start "1";lock="l";lease="x", end "1";lock="l";lease="x"`
		if got := strings.Join(events, ", "); got != want {
			t.Errorf("%s: handler events %q, want %q: a handler ran inside another's for the same resource", name, got, want)
		}
		if _, cur, _ := store.Load(t.Context(), "r"); cur.Token != 1 {
			t.Errorf("%s: fence after the turned-away calls: token %d, want 1: they were checked and recorded", name, cur.Token)
		}
	}
}

// stream is the ServerStream of an in-process call to the stream
// interceptor: only its context is used.
type stream struct{ ctx context.Context }

func (s stream) Context() context.Context   { return s.ctx }
func (stream) SetHeader(metadata.MD) error  { return nil }
func (stream) SendHeader(metadata.MD) error { return nil }
func (stream) SetTrailer(metadata.MD)       {}
func (stream) SendMsg(any) error            { return nil }
func (stream) RecvMsg(any) error            { return io.EOF }

// ignoreCancel is a Store that carries on when the caller's context has
// ended.
type ignoreCancel struct{ *fence.Memory }

func (s ignoreCancel) Get(ctx context.Context, resource string, f fence.Fence) ([]byte, error) {
	return s.Memory.Get(context.WithoutCancel(ctx), resource, f)
}
