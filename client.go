package fencelock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

// A Client acquires leases on locks kept in Redis. It is safe for
// concurrent use. A Client holds no connection or goroutine of its own
// while nobody waits in Acquire.
type Client struct {
	rdb redis.UniversalClient
	cfg config
	err error // from New: reported by every call

	hub    wakeHub
	native nativeCache
}

// New returns a Client that keeps its locks in rdb: a *redis.Client, a
// Sentinel failover client or a *redis.ClusterClient. A nil opts selects
// every default. Invalid options or a nil rdb are reported, wrapping
// ErrInvalid, by every call on the Client.
func New(rdb redis.UniversalClient, opts *Options) *Client {
	cfg, err := opts.config()
	if rdb == nil {
		err = errors.Join(err, fmt.Errorf("%w: nil Redis client", ErrInvalid))
	}
	return &Client{rdb: rdb, cfg: cfg, err: err, hub: wakeHub{rdb: rdb}}
}

// Keys: the lock and its token counter share a hash tag, so one script can
// touch both on Cluster.
func (c *Client) lockKey(name string) string  { return c.cfg.prefix + "{" + name + "}" }
func (c *Client) tokenKey(name string) string { return c.cfg.prefix + "{" + name + "}:token" }
func (c *Client) channel(name string) string  { return c.cfg.prefix + "{" + name + "}:released" }

// TryAcquire makes one attempt to acquire the lock named name. If another
// lease holds it, the error wraps ErrNotAcquired. The returned lease is
// renewed in the background (see Options.RenewInterval) until Release is
// called or it is lost.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	l, _, err := c.try(ctx, name)
	return l, err
}

// Acquire waits until it holds the lock named name or ctx is done; then
// the error wraps both ErrNotAcquired and context.Cause(ctx). A release
// wakes waiters at once through a subscription the Client shares among
// them; a lock that expires instead wakes them when its TTL runs out, and
// a jittered retry (Options.RetryInterval) covers lost messages. Redis
// errors that a failover or restart may cure (connection loss, READONLY,
// LOADING) are retried in the same way; others are returned at once.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	l, wait, err := c.try(ctx, name)
	if !retryable(ctx, err) {
		return l, err
	}
	channel := c.channel(name)
	wc := c.hub.join(ctx, channel, c.cfg.retry)
	defer c.hub.leave(channel)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		// Taken before the attempt, so a release right after it still wakes us.
		wake := c.hub.next(wc)
		if l, wait, err = c.try(ctx, name); !retryable(ctx, err) {
			return l, err
		}
		timer.Reset(c.jitter(wait))
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("acquire %q: %w", name, errors.Join(ErrNotAcquired, context.Cause(ctx)))
		}
	}
}

// Do acquires the lock named name, calls f with the lease's context and
// fence, and releases the lease when f returns, even if ctx is done by
// then. f must stop when its context is cancelled: the lease was lost.
// The error joins f's error and Release's (which wraps ErrLeaseLost if
// the lease was lost).
func (c *Client) Do(ctx context.Context, name string, f func(ctx context.Context, f fence.Fence) error) error {
	l, err := c.Acquire(ctx, name)
	if err != nil {
		return err
	}
	ferr := f(l.Context(), l.Fence())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ttl)
	defer cancel()
	return errors.Join(ferr, l.Release(rctx))
}

func (c *Client) check(name string) error {
	if c.err != nil {
		return c.err
	}
	return checkName(name)
}

// try makes one acquisition attempt. When the lock is held it returns an
// error wrapping ErrNotAcquired and how long to wait: the holder's
// remaining TTL, capped by the retry interval.
func (c *Client) try(ctx context.Context, name string) (*Lease, time.Duration, error) {
	owner := newOwner()
	start := time.Now() // the validity is measured from before the request
	keys := []string{c.lockKey(name), c.tokenKey(name)}
	args := []any{owner, c.cfg.ttl.Milliseconds(), c.cfg.retention.Milliseconds()}
	var (
		reply any
		acks  int64
		err   error
	)
	if c.cfg.minReplicas > 0 {
		reply, acks, err = c.acquireWait(ctx, keys, args)
	} else {
		reply, err = acquireScript.Run(ctx, c.rdb, keys, args...).Result()
	}
	if err != nil {
		return nil, c.cfg.retry, fmt.Errorf("acquire %q: %w", name, err)
	}
	acquired, n, err := parseAcquire(reply)
	if err != nil {
		return nil, c.cfg.retry, fmt.Errorf("acquire %q: %w", name, err)
	}
	if !acquired {
		wait := c.cfg.retry
		if held := time.Duration(n) * time.Millisecond; held > 0 && held < wait {
			wait = held
		}
		return nil, wait, fmt.Errorf("acquire %q: %w: held by another lease", name, ErrNotAcquired)
	}
	l := newLease(ctx, c, name, owner, n, start)
	if c.cfg.minReplicas > 0 && acks < int64(c.cfg.minReplicas) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.replicaTimeout)
		defer cancel()
		l.Release(rctx) // best effort: the token must not be used
		return nil, c.cfg.retry, fmt.Errorf("acquire %q: %w: %w: %d of %d replicas acknowledged within %v",
			name, ErrNotAcquired, ErrNotReplicated, acks, c.cfg.minReplicas, c.cfg.replicaTimeout)
	}
	return l, 0, nil
}

// acquireWait runs the acquire script and WAIT in one pipeline: WAIT must
// follow the write on the same connection to count its replication.
func (c *Client) acquireWait(ctx context.Context, keys []string, args []any) (any, int64, error) {
	run := func(eval func(p redis.Pipeliner) *redis.Cmd) (any, int64, error) {
		var script *redis.Cmd
		var wait *redis.IntCmd
		c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			script = eval(p)
			wait = redis.NewIntCmd(ctx, "WAIT", c.cfg.minReplicas, c.cfg.replicaTimeout.Milliseconds())
			p.Process(ctx, wait)
			return nil
		})
		reply, err := script.Result()
		if err != nil {
			return nil, 0, err
		}
		acks, err := wait.Result()
		return reply, acks, err
	}
	reply, acks, err := run(func(p redis.Pipeliner) *redis.Cmd {
		return p.EvalSha(ctx, acquireScript.Hash(), keys, args...)
	})
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		reply, acks, err = run(func(p redis.Pipeliner) *redis.Cmd {
			return p.Eval(ctx, acquireLua, keys, args...)
		})
	}
	return reply, acks, err
}

// parseAcquire checks the acquire script's reply: {1, token} or {0, pttl}.
func parseAcquire(reply any) (acquired bool, n int64, err error) {
	r, ok := reply.([]any)
	if ok && len(r) == 2 {
		code, ok1 := r[0].(int64)
		n, ok2 := r[1].(int64)
		if ok1 && ok2 && (code == 0 || code == 1 && n > 0) {
			return code == 1, n, nil
		}
	}
	return false, 0, fmt.Errorf("fencelock: malformed acquire reply %v", reply)
}

// jitter spreads waiters' retries: a wait for the holder's TTL ends a
// little after it, a fallback retry anywhere in its second half.
func (c *Client) jitter(wait time.Duration) time.Duration {
	if wait < c.cfg.retry {
		return wait + rand.N(wait/8+time.Millisecond)
	}
	return wait/2 + rand.N(wait/2+1)
}

// retryable reports whether Acquire should wait and try again after err.
func retryable(ctx context.Context, err error) bool {
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, ErrNotReplicated):
		return false
	case errors.Is(err, ErrNotAcquired):
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Server replies that a failover or restart cures; others (wrong
		// type, script errors) would only repeat.
		for _, p := range []string{"READONLY", "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK"} {
			if redis.HasErrorPrefix(err, p) {
				return true
			}
		}
		return false
	}
	return true // transport errors: the connection may come back
}
