package fencelock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)
	var store fence.Memory // the protected resource; see package fence for Redis, SQL, HTTP

	old, err := locks.Acquire(ctx, "example:orders")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	old.Release(ctx) // as if old's lease had expired while its holder was paused

	next, err := locks.Acquire(ctx, "example:orders")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	defer next.Release(ctx)

	// Every write carries the lease's fence; the store keeps the greatest.
	fmt.Println("next writes:", store.Put(ctx, "orders", next.Fence(), []byte("v2")))
	err = store.Put(ctx, "orders", old.Fence(), []byte("v1"))
	fmt.Println("old holder's late write is stale:", errors.Is(err, fence.ErrStale))
	// Output:
	// next writes: <nil>
	// old holder's late write is stale: true
}

func ExampleClient_TryAcquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)

	first, err := locks.TryAcquire(ctx, "example:report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer first.Release(ctx)

	_, err = locks.TryAcquire(ctx, "example:report")
	fmt.Println("second attempt not acquired:", errors.Is(err, fencelock.ErrNotAcquired))

	first.Release(ctx)
	next, err := locks.TryAcquire(ctx, "example:report")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Release(ctx)
	fmt.Println("next token is greater:", next.Token() > first.Token())
	// Output:
	// second attempt not acquired: true
	// next token is greater: true
}

func ExampleLease_Context() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, &fencelock.Options{TTL: time.Second})

	lease, err := locks.Acquire(ctx, "example:job")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)

	// Someone deletes the lock (an operator, an eviction, a failover).
	rdb.Del(ctx, "fencelock:{example:job}")

	// The work watches the lease's context and stops when it ends.
	<-lease.Context().Done()
	fmt.Println("lost:", errors.Is(context.Cause(lease.Context()), fencelock.ErrLeaseLost))
	// Output: lost: true
}

func ExampleClient_Do() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)
	var store fence.Memory

	err := locks.Do(ctx, "example:balance", func(ctx context.Context, f fence.Fence) error {
		fmt.Println("holding", f.Lock)
		return store.Put(ctx, "balance", f, []byte("100"))
	})
	fmt.Println("released:", err == nil)
	// Output:
	// holding example:balance
	// released: true
}
