package fencelock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

func ExampleClient_Semaphore() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	workers := fencelock.New(rdb, nil).Semaphore("example:encoders", 2)
	var store fence.Memory // the protected resource

	a, err := workers.Acquire(ctx)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	b, err := workers.Acquire(ctx)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	_, err = workers.TryAcquire(ctx)
	fmt.Println("a third permit is not acquired:", errors.Is(err, fencelock.ErrNotAcquired))
	fmt.Println("permits in slots", a.Slot(), b.Slot(), "fenced as", a.Fence().Lock)

	a.Release(ctx) // as if a's lease had expired while its holder was paused
	next, err := workers.Acquire(ctx)
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// Each slot has its own tokens: the next holder of slot 0 fences a out.
	store.Put(ctx, "out/0", next.Fence(), []byte("next"))
	err = store.Put(ctx, "out/0", a.Fence(), []byte("late"))
	fmt.Println("same slot:", next.Slot() == a.Slot(), "late write is stale:", errors.Is(err, fence.ErrStale))
	next.Release(ctx)
	b.Release(ctx)
	// Output:
	// a third permit is not acquired: true
	// permits in slots 0 1 fenced as example:encoders{permit 0}
	// same slot: true late write is stale: true
}
