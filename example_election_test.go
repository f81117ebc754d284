package fencelock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

// A singleton worker: of all the replicas of a service, the one that
// leads runs the nightly job, and every write it makes carries its term,
// so that a replica that lost the leadership without noticing (paused,
// partitioned) cannot overwrite its successor's work.
func ExampleElection() {
	ctx := context.Background()
	var reports fence.Memory // the protected resource; see package fence for Redis, SQL, HTTP

	// Two replicas, each with its own connection, as in two processes.
	rdbA := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdbA.Close()
	rdbB := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdbB.Close()
	a := fencelock.New(rdbA, nil).Election("example:nightly")
	b := fencelock.New(rdbB, nil).Election("example:nightly")

	// Each replica campaigns with its address, and works while it leads.
	first, err := a.Campaign(ctx, "10.0.0.1:8080")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("a leads")
	promoted := make(chan *fencelock.Lease)
	go func() {
		l, err := b.Campaign(ctx, "10.0.0.2:8080") // waits while a leads
		if err != nil {
			fmt.Println(err)
		}
		promoted <- l
	}()
	// The work stops when the leadership is lost: first.Context() ends.
	reports.Put(first.Context(), "nightly", first.Fence(), []byte("by a"))
	a.Resign(ctx) // hands over at once: b is woken by the resignation

	next := <-promoted
	defer b.Resign(ctx)
	fmt.Println("b leads with a greater term:", next.Token() > first.Token())
	reports.Put(next.Context(), "nightly", next.Fence(), []byte("by b"))
	who, _ := a.Leader(ctx)
	fmt.Println("a sees the leader at", who.Value)

	// a wakes up from a pause, believing it still leads: the resource
	// rejects its term.
	err = reports.Put(ctx, "nightly", first.Fence(), []byte("late, by a"))
	fmt.Println("a's late write is stale:", errors.Is(err, fence.ErrStale))
	// Output:
	// a leads
	// b leads with a greater term: true
	// a sees the leader at 10.0.0.2:8080
	// a's late write is stale: true
}

func ExampleElection_Observe() {
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the observation
	elections := fencelock.New(rdb, nil)

	changes, err := elections.Election("example:scheduler").Observe(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	show := func() {
		l := <-changes
		if l.Term == 0 {
			fmt.Println("no leader")
			return
		}
		fmt.Println("leader:", l.Value)
	}
	show() // first, who leads now

	e := elections.Election("example:scheduler")
	if _, err := e.Campaign(ctx, "10.0.0.1:8080"); err != nil {
		fmt.Println(err)
		return
	}
	show()
	e.Proclaim(ctx, "10.0.0.1:9090") // same term, new address
	show()
	e.Resign(ctx)
	show()
	// Output:
	// no leader
	// leader: 10.0.0.1:8080
	// leader: 10.0.0.1:9090
	// no leader
}
