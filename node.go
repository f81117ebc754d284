package fencelock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"
)

// node keeps locks in one Redis deployment: a standalone server, a
// Sentinel-managed master or a Cluster (each lock in one slot).
type node struct {
	rdb     redis.UniversalClient
	cluster clusterClient // rdb, if it routes keys to a Cluster's masters
	cfg     *config
	caps    *capabilities // shared with the node's copies for WithTTL
	batches *batchers     // shared with them too: they share the connections
}

// clusterClient is what a Cluster client has beyond UniversalClient: it
// routes a key to the master serving its slot, and reloads its slot map
// on request. *redis.ClusterClient has both; a client that wraps one must
// keep them, or WAIT goes to any master, wake-ups are not sharded and a
// failover is followed only at go-redis's periodic reload.
type clusterClient interface {
	MasterForKey(ctx context.Context, key string) (*redis.Client, error)
	ReloadState(ctx context.Context)
}

func newNode(rdb redis.UniversalClient, cfg *config) *node {
	n := &node{rdb: rdb, cfg: cfg, caps: &capabilities{}, batches: &batchers{one: &batcher{rdb: rdb}}}
	n.cluster, _ = rdb.(clusterClient)
	return n
}

// master returns the address of the master that serves key, "" outside a
// Cluster, and a client for it. A Cluster mid rolling upgrade mixes server
// versions, so capabilities are a fact of each master, not of the
// deployment.
func (n *node) master(ctx context.Context, key string) (string, doer, error) {
	if n.cluster == nil {
		return "", n.rdb, nil
	}
	m, err := n.cluster.MasterForKey(ctx, key)
	if err != nil {
		return "", nil, err
	}
	return m.Options().Addr, m, nil
}

// natives returns the native commands of the master that serves key; the
// Lua scripts serve while they are unknown.
func (n *node) natives(ctx context.Context, key string) natives {
	addr, m, err := n.master(ctx, key)
	if err != nil {
		return natives{}
	}
	return n.caps.get(ctx, addr, m)
}

func (n *node) acquire(ctx context.Context, r *lockRef) (int64, time.Duration, error) {
	if r.permit != nil && r.slot < 0 {
		return n.acquirePermit(ctx, r) // a permit whose slot this node chooses
	}
	// The delay key is sent whatever this Client's LockDelay: another
	// Client's lease may have left one (lua/acquire.lua).
	args := n.acquireArgv(append(acquireRun.args("3", 8), r.lockArg, &r.token, &r.delay), r)
	return n.take(ctx, r.lock, acquireRun, args, nil, func(ctx context.Context) { n.release(ctx, r) })
}

// acquireArgv appends lua/acquire.lua's ARGV for r's attempt to args, its
// KEYS: for a lock, and for each slot of a semaphore, which
// lua/semaphore.lua passes on to acquire.lua.
func (n *node) acquireArgv(args []any, r *lockRef) []any {
	return append(args, &r.owner, n.cfg.ttlArg, n.cfg.retentionArg, &r.proposal, n.cfg.delayArg)
}

// take runs an acquisition script on the master that serves key: acquire
// for a lock, campaign for an election, semaphore for a permit. args come
// from s.args; the script's reply is lua/acquire.lua's (a token, or minus
// the holder's TTL), or with slot not nil, lua/semaphore.lua's {slot,
// acquire.lua's reply}, whose slot it stores there.
// undo is the owner-checked cleanup of what the attempt may have taken:
// it can only delete what carries the attempt's own owner value.
//
// With MinReplicas, WAIT follows the script in one pipeline: it must
// follow the write on the same connection to count its replication. An
// acquisition too few replicas acknowledged is undone: its token could be
// issued anew after a failover.
func (n *node) take(ctx context.Context, key string, s runner, args []any, slot *int, undo func(ctx context.Context)) (int64, time.Duration, error) {
	var reply, acks int64
	var err, waitErr error
	if n.cfg.minReplicas == 0 {
		reply, err = s.runTake(ctx, n.batcher(ctx, key), args, slot)
	} else {
		reply, acks, err, waitErr = n.runWait(ctx, key, s, args, slot)
	}
	if left, ok := err.(*leftBatch); ok {
		// The caller left before the reply: it returns now. If the
		// command was sent, the undo follows once the reply came, and
		// removes what it took.
		if left.sent {
			go func() {
				<-left.done
				n.abandon(ctx, undo)
			}()
		}
		return 0, 0, err
	}
	if err != nil {
		n.abandon(ctx, undo)
		return 0, 0, n.follow(ctx, err)
	}
	token, held := parseAcquire(reply)
	switch {
	case token == 0:
		return 0, held, nil
	case n.cfg.minReplicas == 0:
		return token, 0, nil
	case waitErr != nil:
		// Taken, but whether it replicated is unknown: the token must not
		// be used.
		n.abandon(ctx, undo)
		return 0, 0, n.follow(ctx, fmt.Errorf("WAIT after acquiring: %w", waitErr))
	case acks < int64(n.cfg.minReplicas):
		n.abandon(ctx, undo)
		return 0, 0, fmt.Errorf("%w: %w: %d of %d replicas acknowledged within %v",
			ErrNotAcquired, ErrNotReplicated, acks, n.cfg.minReplicas, n.cfg.replicaTimeout)
	}
	return token, 0, nil
}

// runWait runs s and WAIT in one pipeline on the connection to the master
// that serves key (a batch's, pinned: on a Cluster, WAIT names no key and
// must not go to any master), and falls back to EVAL on NOSCRIPT as s.run
// does.
func (n *node) runWait(ctx context.Context, key string, s runner, args []any, slot *int) (reply, acks int64, err, waitErr error) {
	if n.cluster != nil {
		if _, _, err := n.master(ctx, key); err != nil {
			return 0, 0, err, nil
		}
	}
	b := n.batcher(ctx, key)
	run := func() (reply, acks int64, scriptErr, waitErr error) {
		script := takeCmd(ctx, args, slot)
		wait := redis.NewIntCmd(ctx, "WAIT", n.cfg.minReplicas, n.cfg.replicaTimeout.Milliseconds())
		if err := b.do(ctx, true, script, wait); isLeft(err) {
			return 0, 0, err, nil
		}
		reply, scriptErr = takeReply(script, slot)
		acks, waitErr = wait.Result()
		return reply, acks, scriptErr, waitErr
	}
	reply, acks, err, waitErr = run()
	if noScript(err) {
		args[0], args[1] = "eval", s.src
		reply, acks, err, waitErr = run()
	}
	return reply, acks, err, waitErr
}

// abandon runs undo, best effort, when the client cannot use what an
// acquisition attempt may have taken: the attempt failed, or its reply is
// not to be trusted. It does so after any error, whatever it says: a
// reply that the script did not run (READONLY, LOADING, a refused dial)
// speaks for the last try only, and go-redis retries a request whose
// reply was lost (a timeout, a reset connection) on its own, so an earlier
// try may have taken the lock. undo is owner-checked with a value that is
// the attempt's alone, so it is harmless where nothing was taken; the
// lock's TTL bounds what an undo that fails leaves behind.
func (n *node) abandon(ctx context.Context, undo func(ctx context.Context)) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(n.cfg.ttl, abandonTimeout))
	defer cancel()
	undo(rctx)
}

// abandonTimeout bounds the release of an abandoned acquisition, which
// the caller of TryAcquire or Acquire waits for.
const abandonTimeout = time.Second

// parseAcquire reads the acquire script's reply: the token (> 0), or
// minus the holder's remaining TTL in milliseconds (<= 0). Replies that
// are not integers are errors before they get here.
func parseAcquire(reply int64) (token int64, held time.Duration) {
	const most = int64(math.MaxInt64 / time.Millisecond)
	switch {
	case reply > 0:
		return reply, 0
	case reply < -most:
		return 0, time.Duration(most) * time.Millisecond
	}
	return 0, time.Duration(-reply) * time.Millisecond
}

// renew extends the lock's TTL, and its token counter's retention, if
// r's owner holds it. A lock that is gone, held by another owner or not a
// string reports false.
func (n *node) renew(ctx context.Context, r *lockRef) (bool, error) {
	if n.nativeRenew(ctx, r.lock) {
		held, err := n.renewNative(ctx, r)
		if !nativeRefused(err) {
			return held, n.follow(ctx, err)
		}
		n.refuseNatives(ctx, r.lock)
	}
	args := append(renewRun.args("3", 7), r.lockArg, &r.token, &r.delay, &r.owner, n.cfg.ttlArg, n.cfg.retentionArg, n.cfg.delayArg)
	v, err := renewRun.run(ctx, n.rdb, args)
	return v == 1, n.follow(ctx, err)
}

// renewMany renews many locks in one pipeline, each as renew would: the
// Lua script, or SET IFEQ and PEXPIRE where the lock's master has them. A
// lock whose command the server did not run as such (NOSCRIPT, a native
// command refused) is renewed again alone, by renew.
func (n *node) renewMany(ctx context.Context, refs []*lockRef) ([]bool, []error) {
	held, errs := make([]bool, len(refs)), make([]error, len(refs))
	type sent struct{ script, set, keep redis.Cmder }
	cmds := make([]sent, len(refs))
	_, err := n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range refs {
			if n.nativeRenew(ctx, r.lock) {
				cmds[i].set = p.Do(ctx, "SET", r.lockArg, &r.owner, "IFEQ", &r.owner, "PX", n.cfg.ttlArg)
				if n.cfg.counterTTL > 0 {
					cmds[i].keep = p.PExpire(ctx, r.token, n.cfg.counterTTL)
				}
				continue
			}
			args := append(renewRun.args("3", 7), r.lockArg, &r.token, &r.delay, &r.owner, n.cfg.ttlArg, n.cfg.retentionArg, n.cfg.delayArg)
			cmd := redis.NewIntCmd(ctx, args...)
			p.Process(ctx, cmd)
			cmds[i].script = cmd
		}
		return nil
	})
	if err != nil {
		n.follow(ctx, err)
	}
	for i, r := range refs {
		c := cmds[i]
		switch {
		case c.script != nil && noScript(c.script.Err()),
			c.set != nil && nativeRefused(c.set.Err()):
			held[i], errs[i] = n.renew(ctx, r)
		case c.script != nil:
			v, err := c.script.(*redis.IntCmd).Result()
			held[i], errs[i] = v == 1, err
		default:
			switch err := c.set.Err(); {
			case errors.Is(err, redis.Nil), wrongType(err):
			case err != nil:
				errs[i] = err
			case c.keep != nil && c.keep.Err() != nil:
				errs[i] = c.keep.Err()
			default:
				held[i] = true
			}
		}
	}
	return held, errs
}

// nativeRenew reports whether renewals of the lock at key use SET IFEQ:
// where its master has it, and for leases without LockDelay. The delay
// key must follow the lock only while the lease holds it (lua/renew.lua);
// a pipelined SET IFEQ on it would also run for a lock that expired, and
// push its delay back.
func (n *node) nativeRenew(ctx context.Context, key string) bool {
	return n.cfg.lockDelay == 0 && n.natives(ctx, key).setIFEQ()
}

// renewNative renews with SET IFEQ, always with PX (a SET without it
// would drop the TTL and make the lock permanent), pipelined with the
// PEXPIRE that refreshes the counter's retention: one round trip. The
// PEXPIRE runs whether or not the lock is still ours; it only ever keeps
// a counter longer, which is safe.
func (n *node) renewNative(ctx context.Context, r *lockRef) (bool, error) {
	var set *redis.Cmd
	var keep *redis.BoolCmd
	n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.Do(ctx, "SET", r.lockArg, &r.owner, "IFEQ", &r.owner, "PX", n.cfg.ttlArg)
		if n.cfg.counterTTL > 0 {
			keep = p.PExpire(ctx, r.token, n.cfg.counterTTL)
		}
		return nil
	})
	switch err := set.Err(); {
	case errors.Is(err, redis.Nil), wrongType(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if keep != nil && keep.Err() != nil {
		return false, keep.Err()
	}
	return true, nil
}

// follow returns err, after asking a Cluster client to reload its slot
// map when err may come from a failover: go-redis reloads it on MOVED,
// but not when the master it knows is gone and it does not retry on
// another node (MaxRetries < 1), and would keep dialling the dead master.
func (n *node) follow(ctx context.Context, err error) error {
	if n.cluster != nil && err != nil && ctx.Err() == nil {
		var rerr redis.Error
		if _, reload := classOf(err); reload || !errors.As(err, &rerr) {
			n.cluster.ReloadState(ctx)
		}
	}
	return err
}

// shardedPubSub reports whether releases publish, and waiters subscribe,
// on the lock's shard (SPUBLISH, SSUBSCRIBE) rather than cluster-wide: on
// a Cluster whose servers have sharded pub/sub. The channel shares the
// lock's hash tag, so it lives in the lock's slot.
func (n *node) shardedPubSub(ctx context.Context, channel string) bool {
	return n.cluster != nil && n.natives(ctx, channel).spublish
}

// release deletes the lock if r's owner holds it and wakes its waiters;
// it reports whether it deleted.
func (n *node) release(ctx context.Context, r *lockRef) (bool, error) {
	nat := n.natives(ctx, r.lock)
	// With LockDelay, the Lua release: a pipelined native delete of the
	// delay key would also run for a lease that expired, and cut short
	// the delay that its expiry started.
	if (nat.delex || nat.delifeq) && n.cfg.lockDelay == 0 {
		deleted, err := n.releaseNative(ctx, r, nat)
		switch {
		case nativeRefused(err):
			n.refuseNatives(ctx, r.lock)
		case !unexplained(err):
			return deleted, n.follow(ctx, err)
		}
		// An error reply no class explains (Redis 8's DELEX IFEQ on a key
		// that holds no string answers an ERR whose text no test should
		// depend on): the Lua release decides, as it does everywhere,
		// with commands every user of the library may run.
	}
	publish := publishArg
	if n.cluster != nil && nat.spublish {
		publish = spublishArg
	}
	// Without LockDelay, this Client's leases write no delay key, so the
	// release reads none: one GET less per release, and the same rule as
	// the native release's.
	var args []any
	if n.cfg.lockDelay == 0 {
		args = append(releaseRun.args("1", 4), r.lockArg, &r.owner, r.channelArg, publish)
	} else {
		args = append(releaseRun.args("2", 5), r.lockArg, &r.delay, &r.owner, r.channelArg, publish)
	}
	v, err := releaseRun.run(ctx, n.batcher(ctx, r.lock), args)
	return v == 1, n.follow(ctx, err)
}

var publishArg, spublishArg any = "PUBLISH", "SPUBLISH"

// releaseNative deletes with DELEX IFEQ or DELIFEQ, pipelined with the
// publish: one round trip. The publish wakes waiters even if nothing was
// deleted, which costs them one attempt and is harmless.
func (n *node) releaseNative(ctx context.Context, r *lockRef, nat natives) (bool, error) {
	var del *redis.Cmd
	if nat.delex {
		del = redis.NewCmd(ctx, "DELEX", r.lockArg, "IFEQ", &r.owner)
	} else {
		del = redis.NewCmd(ctx, "DELIFEQ", r.lockArg, &r.owner)
	}
	pub := redis.NewIntCmd(ctx, publishArg, r.channelArg, "")
	if n.cluster != nil && nat.spublish {
		pub = redis.NewIntCmd(ctx, spublishArg, r.channelArg, "")
	}
	if err := n.batcher(ctx, r.lock).do(ctx, false, del, pub); isLeft(err) {
		return false, err
	}
	v, err := del.Int64()
	if wrongType(err) {
		return false, nil // not our lock: someone replaced it
	}
	return v == 1, err
}

// unexplained reports whether err is an error reply of class errOther:
// not a nil reply, not WRONGTYPE.
func unexplained(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	c, _ := classOf(err)
	return errors.As(err, &rerr) && !errors.Is(err, redis.Nil) && c == errOther && !wrongType(err)
}

// refuseNatives marks the master that serves key as lacking the native
// commands, after one of them was refused (nativeRefused): the Lua
// scripts serve it until the next detection.
func (n *node) refuseNatives(ctx context.Context, key string) {
	if addr, _, err := n.master(ctx, key); err == nil {
		n.caps.refused(addr)
	}
}
