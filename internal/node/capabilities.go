package node

import (
	"context"
	"errors"
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

// unanswered is how long a detection that no server answered (a master
// down mid failover, a caller's context ended) stands: the natives known
// before it serve, and the next call asks again soon after.
const unanswered = 250 * time.Millisecond

// detectTimeout bounds a detection in the background.
const detectTimeout = 10 * time.Second

// capabilities caches the natives of each master, by address ("" for the
// one master of a standalone or Sentinel client).
type capabilities struct {
	mu sync.Mutex
	m  map[string]*capability
}

type capability struct {
	nat       natives
	until     time.Time // detect again after this; zero until the first detection ends
	detecting bool      // a COMMAND INFO is in flight
}

// get returns the natives of the master at addr, reached through m. The
// first caller detects them; while they are unknown, and while one caller
// detects them, the others get none and use the Lua scripts, which every
// server runs and every ACL rule of ACLRule allows: the detection's round
// trip holds up nobody but its caller. Later detections run in the
// background, on a context of their own, while callers use what is known:
// a master that does not answer (paused, or down mid failover) must not
// spend a renewal's or a release's deadline on COMMAND INFO.
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
	nat := c.nat
	if c.detecting || time.Now().Before(c.until) {
		cs.mu.Unlock()
		return nat
	}
	c.detecting = true
	first := c.until.IsZero()
	cs.mu.Unlock()

	if first {
		return cs.detect(ctx, c, m)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), detectTimeout)
		defer cancel()
		cs.detect(ctx, c, m)
	}()
	return nat
}

// detect asks the master, through m, which natives it has, records them
// in c, and returns them.
func (cs *capabilities) detect(ctx context.Context, c *capability, m transport.Conn) natives {
	cmd := redis.NewSliceCmd(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ", "SPUBLISH")
	m.Process(ctx, cmd)
	reply, err := cmd.Result()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	c.detecting = false
	var rerr redis.Error
	switch {
	case err == nil && len(reply) == 3:
		// An unknown command's entry is nil (RESP2 and RESP3 alike).
		c.nat = natives{delex: reply[0] != nil, delifeq: reply[1] != nil, spublish: reply[2] != nil}
		c.until = time.Now().Add(redetect)
	case err != nil && !errors.As(err, &rerr):
		// No server answered: what was known serves, briefly.
		c.until = time.Now().Add(unanswered)
	default:
		// Refused (a user without COMMAND) or not understood: the Lua
		// scripts serve until the next detection, rather than a round
		// trip at every call.
		c.until = time.Now().Add(redetect)
	}
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
