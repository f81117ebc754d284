package fencelock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

func ExampleClient_Holder() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)

	lease, err := locks.Acquire(ctx, "example:status")
	if err != nil {
		fmt.Println("acquire:", err)
		return
	}
	// Anyone with access to the lock can see who holds it, never the
	// holder's secret.
	h, err := locks.Holder(ctx, "example:status")
	if err != nil {
		fmt.Println("holder:", err)
		return
	}
	fmt.Println("held by the lease:", h.LeaseID == lease.ID(), "with its token:", h.Token == lease.Token())

	lease.Release(ctx)
	_, err = locks.Holder(ctx, "example:status")
	fmt.Println("after release, not held:", errors.Is(err, fencelock.ErrNotHeld))
	// Output:
	// held by the lease: true with its token: true
	// after release, not held: true
}

func ExampleACLRule() {
	// The rule for a Cluster of Redis >= 8.4 nodes, whose Clients use
	// Options.Prefix "jobs:".
	fmt.Println("ACL SETUSER jobs reset on >PASSWORD", fencelock.ACLRule(&fencelock.ACLOptions{Prefix: "jobs:", Redis84: true, Cluster: true}))
	// Output:
	// ACL SETUSER jobs reset on >PASSWORD ~jobs:* &jobs:* +evalsha +eval +get +set +pttl +time +pexpire +delex +spublish +ssubscribe +ping +command +cluster|slots
}
