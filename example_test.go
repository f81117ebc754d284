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
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)

	lease, err := locks.Acquire(ctx, "example:orders")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// Send lease.Fence() with every write; the resource rejects older tokens.
	f := lease.Fence()
	fmt.Println("lock:", f.Lock, "token issued:", f.Token > 0)

	if err := lease.Release(ctx); err != nil {
		fmt.Println("release:", err)
	}
	// Output: lock: example:orders token issued: true
}

func ExampleClient_TryAcquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
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
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
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
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)
	err := locks.Do(ctx, "example:balance", func(ctx context.Context, f fence.Fence) error {
		fmt.Println("holding", f.Lock)
		return nil
	})
	fmt.Println("released:", err == nil)
	// Output:
	// holding example:balance
	// released: true
}
