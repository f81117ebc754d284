package fencelock_test

import (
	"context"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

func ExampleJoinHooks() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	// Two sets of hooks on one Client, as fenceprom's and fenceotel's
	// would be: each sees every event, in the order joined.
	metrics := &fencelock.Hooks{AcquireDone: func(_ context.Context, i fencelock.AcquireDoneInfo) {
		fmt.Println("metrics: acquired", i.Name)
	}}
	traces := &fencelock.Hooks{
		AcquireDone: func(_ context.Context, i fencelock.AcquireDoneInfo) { fmt.Println("traces: acquired", i.Name) },
		ReleaseDone: func(_ context.Context, i fencelock.ReleaseDoneInfo) { fmt.Println("traces: released", i.Name) },
	}
	locks := fencelock.New(rdb, &fencelock.Options{Hooks: fencelock.JoinHooks(metrics, traces)})
	l, err := locks.TryAcquire(ctx, "example:joined")
	if err != nil {
		fmt.Println(err)
		return
	}
	l.Release(ctx)
	// Output:
	// metrics: acquired example:joined
	// traces: acquired example:joined
	// traces: released example:joined
}
