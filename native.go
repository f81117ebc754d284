package fencelock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

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
}

func (n natives) setIFEQ() bool { return n.delex || n.delifeq }

// nativeCache detects natives once per Client; a failed detection is
// retried at the next use, and the Lua scripts serve meanwhile.
type nativeCache struct {
	mu       sync.Mutex
	detected bool
	n        natives
}

func (c *Client) natives(ctx context.Context) natives {
	c.native.mu.Lock()
	defer c.native.mu.Unlock()
	if c.native.detected {
		return c.native.n
	}
	reply, err := c.rdb.Do(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil || len(reply) != 2 {
		return natives{}
	}
	// An unknown command's entry is nil (RESP2 and RESP3 alike).
	c.native.n = natives{delex: reply[0] != nil, delifeq: reply[1] != nil}
	c.native.detected = true
	return c.native.n
}

// renewLock extends key's TTL if owner holds it. A lock that is gone, held
// by another owner or not a string reports false.
func (c *Client) renewLock(ctx context.Context, key, owner string) (bool, error) {
	ttl := c.cfg.ttl.Milliseconds()
	if c.natives(ctx).setIFEQ() {
		err := c.rdb.Do(ctx, "SET", key, owner, "IFEQ", owner, "PX", ttl).Err()
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, redis.Nil), redis.HasErrorPrefix(err, "WRONGTYPE"):
			return false, nil
		}
		return false, err
	}
	n, err := renewScript.Run(ctx, c.rdb, []string{key}, owner, ttl).Int64()
	return n == 1, err
}

// releaseLock deletes key if owner holds it and wakes the waiters on
// channel; it reports whether it deleted.
func (c *Client) releaseLock(ctx context.Context, key, owner, channel string) (bool, error) {
	nat := c.natives(ctx)
	if !nat.delex && !nat.delifeq {
		n, err := releaseScript.Run(ctx, c.rdb, []string{key}, owner, channel).Int64()
		return n == 1, err
	}
	// One round trip: the publish wakes waiters even if nothing was
	// deleted, which costs them one attempt and is harmless.
	var del *redis.Cmd
	c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if nat.delex {
			del = p.Do(ctx, "DELEX", key, "IFEQ", owner)
		} else {
			del = p.Do(ctx, "DELIFEQ", key, owner)
		}
		p.Publish(ctx, channel, "")
		return nil
	})
	n, err := del.Int64()
	if err != nil && (redis.HasErrorPrefix(err, "WRONGTYPE") || strings.Contains(err.Error(), "should be of string type")) {
		return false, nil // not our lock: someone replaced it
	}
	return n == 1, err
}
