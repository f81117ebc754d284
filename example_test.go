package fencelock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
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

// A worker that leads until it is told to stop: SIGTERM (a deploy, a
// rolling restart) or Ctrl-C ends the context of signal.NotifyContext,
// the work stops, and the leadership is handed over at once by Resign. A
// deferred Resign alone would not run: a signal's default action ends
// the process without running deferred calls, and the next leader would
// wait for the TTL. Here the signal is sent by the example itself.
func ExampleElection_Campaign_signals() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	e := fencelock.New(rdb, nil).Election("example:signals")

	l, err := e.Campaign(ctx, "worker-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	// Resign on the way out, with a context of its own: ctx is done by then.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		fmt.Println("resigned:", e.Resign(rctx) == nil)
	}()
	fmt.Println("leading")
	syscall.Kill(os.Getpid(), syscall.SIGTERM) // as a deploy would

	// The work: until the signal, or the leadership lost.
	select {
	case <-ctx.Done():
		fmt.Println("stopping:", ctx.Err())
	case <-l.Context().Done():
		fmt.Println("lost:", context.Cause(l.Context()))
	}
	// Output:
	// leading
	// stopping: context canceled
	// resigned: true
}

// Client.Do with a context that SIGTERM ends: the function's context ends
// too, it returns, and Do releases the lock before the process exits.
func ExampleClient_Do_signals() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{ContextTimeoutEnabled: true, Addr: redisAddr})
	defer rdb.Close()
	locks := fencelock.New(rdb, nil)

	err := locks.Do(ctx, "example:job", func(ctx context.Context, f fence.Fence) error {
		syscall.Kill(os.Getpid(), syscall.SIGTERM) // as a deploy would
		<-ctx.Done()                               // the job's work, until told to stop
		return context.Cause(ctx)
	})
	fmt.Println("stopped:", errors.Is(err, context.Canceled))
	_, err = locks.Holder(context.Background(), "example:job")
	fmt.Println("released:", errors.Is(err, fencelock.ErrNotHeld))
	// Output:
	// stopped: true
	// released: true
}

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
	// ACL SETUSER jobs reset on >PASSWORD ~jobs:* &jobs:* +evalsha +eval +get +set +pttl +time +pexpire +client|tracking +del +delex +spublish +publish +ssubscribe +ping +command +cluster|slots
}

func ExampleACLRule_rueidisSentinel() {
	// The rules for Clients over rueidis or valkey-go (rueidisconn,
	// valkeyconn) through Sentinel, on Valkey 9 servers: the data
	// servers' user, and the sentinels' user of the client's
	// SentinelOption.
	fmt.Println("ACL SETUSER locks reset on >PASSWORD", fencelock.ACLRule(&fencelock.ACLOptions{Valkey9: true, Sentinel: true, Rueidis: true}))
	fmt.Println("ACL SETUSER sentinel-user reset on >PASSWORD", fencelock.RueidisSentinelACLRule)
	// Output:
	// ACL SETUSER locks reset on >PASSWORD ~fencelock:* &fencelock:* +evalsha +eval +get +set +pttl +time +pexpire +client|tracking +del +delifeq +publish +subscribe +unsubscribe +ping +command|info +role +discard +punsubscribe +sunsubscribe
	// ACL SETUSER sentinel-user reset on >PASSWORD &+sentinel &+slave &-sdown &+sdown &+switch-master &+reboot +sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe +unsubscribe +ping
}

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
