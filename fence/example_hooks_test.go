package fence_test

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock/fence"
)

func ExampleWithHooks() {
	ctx := context.Background()
	say := func(what string) func(context.Context, fence.AccessInfo) {
		return func(_ context.Context, i fence.AccessInfo) {
			fmt.Println(what, i.Op, i.Resource, "token", i.Fence.Token)
		}
	}
	// Metrics and traces, as fenceprom's and fenceotel's FenceHooks would
	// be, joined on one store.
	metrics := &fence.Hooks{Accepted: say("metrics: accepted"), Stale: say("metrics: stale")}
	traces := &fence.Hooks{Stale: say("traces: stale")}
	store := fence.WithHooks(&fence.Memory{}, fence.JoinHooks(metrics, traces))

	store.Put(ctx, "orders", fence.Fence{Lock: "orders", Token: 2, Lease: "b"}, []byte("v2"))
	store.Put(ctx, "orders", fence.Fence{Lock: "orders", Token: 1, Lease: "a"}, []byte("v1"))
	// Output:
	// metrics: accepted put orders token 2
	// metrics: stale put orders token 1
	// traces: stale put orders token 1
}
