package tests

import (
	"context"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A WithTTL Client's leases keep their lock-delay key for the LockDelay
// past their own TTL, not past the original Client's: the delay key
// outlives the lock by LockDelay, at acquisition and at renewal.
func TestClient_WithTTLLockDelay(t *testing.T) {
	t.Parallel()
	rdb := redistest.New(t).Client(t)
	ctx := t.Context()
	const delay = time.Minute
	c := newClient(t, rdb, &fencelock.Options{TTL: time.Minute, LockDelay: delay, RenewInterval: -1}).WithTTL(time.Hour)
	l, err := c.TryAcquire(ctx, "wt-delay")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// The script sets the delay key's expiry after the lock's, and on a
	// loaded machine a millisecond or more later (seen: the lock's + 1m0.001s
	// on Redis 7.0): the bounds allow a second either way.
	check := func(when string) {
		t.Helper()
		lock := rdb.PTTL(ctx, "fencelock:{wt-delay}").Val()
		dk := rdb.PTTL(ctx, "fencelock:{wt-delay}:delay").Val()
		if lock <= 30*time.Minute || dk-lock < delay-time.Second || dk-lock > delay+time.Second {
			t.Errorf("%s: lock PTTL %v, delay key PTTL %v; want about an hour, and the lock's + %v", when, lock, dk, delay)
		}
	}
	check("after TryAcquire")
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	check("after Renew")
}

// slowNode is a go-redis hook that holds each request naming marker for
// delay before sending it, or until its context ends, then failing it:
// a node that answers slowly, against the quorum's NodeTimeout.
type slowNode struct {
	marker string
	delay  time.Duration
}

func (h *slowNode) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowNode) hold(ctx context.Context, cmds []redis.Cmder) error {
	for _, cmd := range cmds {
		if cmdNames(cmd, h.marker) {
			select {
			case <-time.After(h.delay): // the simulated slow node, not a synchronisation
				return nil
			case <-ctx.Done():
				err := context.Cause(ctx)
				for _, cmd := range cmds {
					cmd.SetErr(err)
				}
				return err
			}
		}
	}
	return nil
}

func (h *slowNode) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.hold(ctx, []redis.Cmder{cmd}); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}

func (h *slowNode) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := h.hold(ctx, cmds); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// A WithTTL Client of a quorum bounds each node's request by the
// NodeTimeout of its own TTL (TTL/10, at most 500ms), not the original
// Client's: every node answering in 20ms is in time for a minute's lease,
// although the original Client's TTL, 10ms, allows its nodes 1ms.
func TestClient_WithTTLNodeTimeout(t *testing.T) {
	skipOnTransport(t, skipHooked)
	t.Parallel()
	_, nodes := quorumNodes(t, 3)
	for _, rdb := range nodes {
		rdb.AddHook(&slowNode{marker: "{wt-node}", delay: 20 * time.Millisecond})
	}
	ctx := t.Context()
	c := newQuorum(t, nodes, &fencelock.Options{TTL: fencelock.MinTTL}).WithTTL(time.Minute)
	l, err := c.TryAcquire(ctx, "wt-node")
	if err != nil {
		t.Fatalf("WithTTL(1m).TryAcquire with nodes answering in 20ms = %v, want a lease", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release = %v", err)
	}
}
