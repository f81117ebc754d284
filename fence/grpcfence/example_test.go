package grpcfence_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/grpcfence"
)

func Example() {
	// The server: every UnaryCall is fenced on the resource its payload
	// names.
	fences := &grpcfence.Server{
		Store: &fence.Memory{},
		Resource: func(_ context.Context, method string, req any) (string, bool) {
			r, ok := req.(*testgrpc.SimpleRequest)
			return string(r.GetPayload().GetBody()), ok
		},
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(fences.UnaryInterceptor()), grpc.StreamInterceptor(fences.StreamInterceptor()))
	testgrpc.RegisterTestServiceServer(srv, &service{})
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()

	// The clients: each sends its own lease's fence.
	clientWith := func(f fence.Fence) testgrpc.TestServiceClient {
		cc, _ := grpc.NewClient(lis.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(grpcfence.UnaryClientInterceptor(func(context.Context) (fence.Fence, bool) { return f, true })))
		return testgrpc.NewTestServiceClient(cc)
	}
	old := clientWith(fence.Fence{Lock: "orders:42", Token: 1764431234567890, Lease: "k3J9x"})
	newer := clientWith(fence.Fence{Lock: "orders:42", Token: 1764431299000000, Lease: "p0Qr7"})

	for _, c := range []testgrpc.TestServiceClient{old, newer, old} {
		_, err := c.UnaryCall(context.Background(), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("orders/42")}})
		var stale *fence.StaleError
		if errors.As(err, &stale) {
			fmt.Printf("%v; current token: %d\n", status.Code(err), stale.Current.Token)
			continue
		}
		fmt.Println(status.Code(err))
	}
	// Output:
	// OK
	// OK
	// Aborted; current token: 1764431299000000
}
