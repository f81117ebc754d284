package fencelock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// node keeps locks in one Redis deployment: a standalone server, a
// Sentinel-managed master or a Cluster (each lock in one slot).
type node struct {
	rdb redis.UniversalClient
	cfg *config

	mu       sync.Mutex // guards detected and nat
	detected bool
	nat      natives
}

// Native owner-checked commands, where the server has them, replace the
// Lua scripts for release and renew:
//
//	Redis >= 8.4:  DELEX key IFEQ owner,  SET key owner IFEQ owner PX ttl
//	Valkey >= 9.0: DELIFEQ key owner,     SET key owner IFEQ owner PX ttl
//
// They are chosen by COMMAND INFO at first use, not by version strings,
// which forks and unstable builds get wrong. Renew always sends PX: a SET
// without it would drop the TTL and make the lock permanent.
type natives struct {
	delex, delifeq bool
	spublish       bool // sharded pub/sub (Redis >= 7.0), used on Cluster
}

func (n natives) setIFEQ() bool { return n.delex || n.delifeq }

// natives detects the native commands once; a failed detection is retried
// at the next use, and the Lua scripts serve meanwhile.
func (n *node) natives(ctx context.Context) natives {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.detected {
		return n.nat
	}
	reply, err := n.rdb.Do(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ", "SPUBLISH").Slice()
	if err != nil || len(reply) != 3 {
		return natives{}
	}
	// An unknown command's entry is nil (RESP2 and RESP3 alike).
	n.nat = natives{delex: reply[0] != nil, delifeq: reply[1] != nil, spublish: reply[2] != nil}
	n.detected = true
	return n.nat
}

func (n *node) acquire(ctx context.Context, name, owner string) (int64, time.Duration, error) {
	keys := []string{n.cfg.lockKey(name), n.cfg.tokenKey(name)}
	args := []any{owner, n.cfg.ttl.Milliseconds(), n.cfg.retention.Milliseconds()}
	if n.cfg.minReplicas > 0 {
		return n.acquireWait(ctx, name, owner, keys, args)
	}
	reply, err := acquireScript.Run(ctx, n.rdb, keys, args...).Result()
	if err != nil {
		return 0, 0, n.follow(ctx, err)
	}
	return parseAcquire(reply)
}

// acquireWait runs the acquire script and WAIT in one pipeline: WAIT must
// follow the write on the same connection to count its replication. An
// acquisition too few replicas acknowledged is released again: its token
// could be issued anew after a failover.
func (n *node) acquireWait(ctx context.Context, name, owner string, keys []string, args []any) (int64, time.Duration, error) {
	pipelined := n.rdb.Pipelined
	if cc, ok := n.rdb.(*redis.ClusterClient); ok {
		// WAIT names no key: a cluster pipeline would send it to any
		// master. Pipeline on the connection to the lock's master instead.
		m, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return 0, 0, err
		}
		pipelined = m.Pipelined
	}
	run := func(eval func(p redis.Pipeliner) *redis.Cmd) (any, int64, error) {
		var script *redis.Cmd
		wait := redis.NewIntCmd(ctx, "WAIT", n.cfg.minReplicas, n.cfg.replicaTimeout.Milliseconds())
		pipelined(ctx, func(p redis.Pipeliner) error {
			script = eval(p)
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
	if err != nil {
		return 0, 0, n.follow(ctx, err)
	}
	token, held, err := parseAcquire(reply)
	if err != nil || token == 0 || acks >= int64(n.cfg.minReplicas) {
		return token, held, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.replicaTimeout)
	defer cancel()
	n.release(rctx, name, owner) // best effort: the token must not be used
	return 0, 0, fmt.Errorf("%w: %w: %d of %d replicas acknowledged within %v",
		ErrNotAcquired, ErrNotReplicated, acks, n.cfg.minReplicas, n.cfg.replicaTimeout)
}

// parseAcquire checks the acquire script's reply: {1, token} or {0, pttl}.
func parseAcquire(reply any) (token int64, held time.Duration, err error) {
	if r, ok := reply.([]any); ok && len(r) == 2 {
		code, ok1 := r[0].(int64)
		v, ok2 := r[1].(int64)
		switch {
		case ok1 && ok2 && code == 1 && v > 0:
			return v, 0, nil
		case ok1 && ok2 && code == 0:
			return 0, time.Duration(v) * time.Millisecond, nil
		}
	}
	return 0, 0, fmt.Errorf("fencelock: malformed acquire reply %v", reply)
}

// renew extends the lock's TTL if owner holds it. A lock that is gone,
// held by another owner or not a string reports false.
func (n *node) renew(ctx context.Context, name, owner string) (bool, error) {
	key, ttl := n.cfg.lockKey(name), n.cfg.ttl.Milliseconds()
	if n.natives(ctx).setIFEQ() {
		err := n.rdb.Do(ctx, "SET", key, owner, "IFEQ", owner, "PX", ttl).Err()
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
			return false, nil
		}
		return false, err
	}
	v, err := renewScript.Run(ctx, n.rdb, []string{key}, owner, ttl).Int64()
	return v == 1, n.follow(ctx, err)
}

// follow returns err, after asking a Cluster client to reload its slot
// map when err may come from a failover: go-redis reloads it on MOVED,
// but not when the master it knows is gone and it does not retry on
// another node (MaxRetries < 1), and would keep dialling the dead master.
func (n *node) follow(ctx context.Context, err error) error {
	if cc, ok := n.rdb.(*redis.ClusterClient); ok && err != nil && ctx.Err() == nil {
		var rerr redis.Error
		if !errors.As(err, &rerr) || redis.HasErrorPrefix(err, "CLUSTERDOWN") || redis.HasErrorPrefix(err, "MOVED") {
			cc.ReloadState(ctx)
		}
	}
	return err
}

// shardedPubSub reports whether releases publish, and waiters subscribe,
// on the lock's shard (SPUBLISH, SSUBSCRIBE) rather than cluster-wide: on
// a Cluster whose servers have sharded pub/sub. The channel shares the
// lock's hash tag, so it lives in the lock's slot.
func (n *node) shardedPubSub(ctx context.Context) bool {
	_, cluster := n.rdb.(*redis.ClusterClient)
	return cluster && n.natives(ctx).spublish
}

// release deletes the lock if owner holds it and wakes its waiters; it
// reports whether it deleted.
func (n *node) release(ctx context.Context, name, owner string) (bool, error) {
	key, channel := n.cfg.lockKey(name), n.cfg.channel(name)
	nat := n.natives(ctx)
	sharded := n.shardedPubSub(ctx)
	if !nat.delex && !nat.delifeq {
		publish := "PUBLISH"
		if sharded {
			publish = "SPUBLISH"
		}
		v, err := releaseScript.Run(ctx, n.rdb, []string{key}, owner, channel, publish).Int64()
		return v == 1, n.follow(ctx, err)
	}
	// One round trip: the publish wakes waiters even if nothing was
	// deleted, which costs them one attempt and is harmless.
	var del *redis.Cmd
	n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if nat.delex {
			del = p.Do(ctx, "DELEX", key, "IFEQ", owner)
		} else {
			del = p.Do(ctx, "DELIFEQ", key, owner)
		}
		if sharded {
			p.SPublish(ctx, channel, "")
		} else {
			p.Publish(ctx, channel, "")
		}
		return nil
	})
	v, err := del.Int64()
	if err != nil && (redis.HasErrorPrefix(err, "WRONGTYPE") || strings.Contains(err.Error(), "should be of string type")) {
		return false, nil // not our lock: someone replaced it
	}
	return v == 1, err
}
