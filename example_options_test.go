package fencelock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

func ExampleOptions_Validate() {
	// A configuration read at start-up, with the TTL in the wrong unit.
	opts := &fencelock.Options{TTL: 30 * time.Microsecond}
	err := opts.Validate()
	fmt.Println(errors.Is(err, fencelock.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// fencelock: invalid argument: TTL 30µs outside [10ms, 24h0m0s]
}

func ExampleClient_WithTTL() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil) // leases of 10s, the default

	// One lock needs longer: the same Client, with another TTL for it.
	l, err := locks.WithTTL(time.Hour).Acquire(ctx, "example:nightly-report")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	defer l.Release(ctx)
	h, err := locks.Holder(ctx, "example:nightly-report")
	if err != nil {
		fmt.Println("holder:", err)
		return
	}
	fmt.Println("held for up to", h.TTL.Round(time.Minute), "unless renewed")
	// Output:
	// held for up to 1h0m0s unless renewed
}

func ExampleOptions_lockDelay() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	// The mailer cannot check fencing tokens: after a holder crashes, give
	// its delayed requests a minute to drain before anyone sends again.
	locks := fencelock.New(rdb, &fencelock.Options{TTL: 50 * time.Millisecond, LockDelay: time.Minute, RenewInterval: -1})

	l, err := locks.TryAcquire(ctx, "example:mailer")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// A holder that never renews nor releases: its lease expires.
	<-l.Context().Done()
	for rdb.Exists(ctx, "fencelock:{example:mailer}").Val() != 0 {
		time.Sleep(5 * time.Millisecond) // until the server's expiry
	}
	_, err = locks.TryAcquire(ctx, "example:mailer")
	fmt.Println("within the delay:", errors.Is(err, fencelock.ErrNotAcquired))

	// A clean Release skips it.
	rdb.Del(ctx, "fencelock:{example:mailer}:delay") // end the example's delay
	l, err = locks.TryAcquire(ctx, "example:mailer")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	l.Release(ctx)
	l, err = locks.TryAcquire(ctx, "example:mailer")
	fmt.Println("after Release:", err)
	l.Release(ctx)
	// Output:
	// within the delay: true
	// after Release: <nil>
}
