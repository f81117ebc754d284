package fenceotel_test

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fenceotel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A fenced store observed by OpenTelemetry: each access is a span, and a
// stale write's span says which fence refused it.
func ExampleInstrumentation_FenceHooks() {
	spans := tracetest.NewSpanRecorder() // in production: a batching exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	otl := fenceotel.New(&fenceotel.Options{TracerProvider: tp})

	store := fence.WithHooks(&fence.Memory{}, otl.FenceHooks())
	ctx := context.Background()
	store.Put(ctx, "orders:42", fence.Fence{Lock: "orders", Token: 34, Lease: "b"}, []byte("new"))
	store.Put(ctx, "orders:42", fence.Fence{Lock: "orders", Token: 33, Lease: "a"}, []byte("stale"))

	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.Status().Code, attr(s, "fence.result").AsString(), attr(s, "fence.current.token").AsInt64())
	}
	// Output:
	// fence.put Unset accepted 0
	// fence.put Error stale 34
}
