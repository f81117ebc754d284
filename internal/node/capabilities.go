package node

import (
	"context"
	"sync"
	"time"

	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9"
)

// Native owner-checked commands, where the server has them, replace the
// Lua scripts for release and renew:
//
//	Redis >= 8.4:  DELEX key IFEQ owner,  SET key owner IFEQ owner PX ttl
//	Valkey >= 9.0: DELIFEQ key owner,     SET key owner IFEQ owner PX ttl
//
// They are chosen by COMMAND INFO, not by version strings, which forks
// and unstable builds get wrong, and per master: a Cluster mid rolling
// upgrade, or a Sentinel failover to an older replica, mixes versions. A
// native command refused as unknown, as a syntax error or by the ACL
// (NOPERM; COMMAND INFO shows commands the user may not run) falls back to
// Lua at once, and marks its master as without natives until the next
// detection.
type natives struct {
	delex, delifeq bool
	spublish       bool // sharded pub/sub (Redis >= 7.0), used on Cluster
}

func (n natives) setIFEQ() bool { return n.delex || n.delifeq }

// redetect is how long a detection, or a refusal, stands before the next
// COMMAND INFO: servers are upgraded, and ACLs change, while clients run.
const redetect = time.Minute

// capabilities caches the natives of each master, by address ("" for the
// one master of a standalone or Sentinel client).
type capabilities struct {
	mu sync.Mutex
	m  map[string]*capability
}

type capability struct {
	nat       natives
	until     time.Time // detect again after this
	detecting bool      // a COMMAND INFO is in flight
}

// get returns the natives of the master at addr, reached through m. While
// they are unknown, and while one caller detects them, the others get none
// and use the Lua scripts, which every server runs: the detection's round
// trip holds up nobody but its caller.
func (cs *capabilities) get(ctx context.Context, addr string, m transport.Conn) natives {
	cs.mu.Lock()
	c := cs.m[addr]
	if c == nil {
		if cs.m == nil {
			cs.m = map[string]*capability{}
		}
		c = &capability{}
		cs.m[addr] = c
	}
	if c.detecting || time.Now().Before(c.until) {
		nat := c.nat
		cs.mu.Unlock()
		return nat
	}
	c.detecting = true
	cs.mu.Unlock()

	cmd := redis.NewSliceCmd(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ", "SPUBLISH")
	m.Process(ctx, cmd)
	reply, err := cmd.Result()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	c.detecting = false
	c.until = time.Now().Add(redetect)
	if err != nil || len(reply) != 3 {
		// The Lua scripts serve until the next detection: a user without
		// COMMAND would otherwise pay a round trip at every call.
		return c.nat
	}
	// An unknown command's entry is nil (RESP2 and RESP3 alike).
	c.nat = natives{delex: reply[0] != nil, delifeq: reply[1] != nil, spublish: reply[2] != nil}
	return c.nat
}

// refused records that the master at addr refused a native command.
func (cs *capabilities) refused(addr string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.m[addr]; c != nil {
		c.nat.delex, c.nat.delifeq = false, false
		c.until = time.Now().Add(redetect)
	}
}
