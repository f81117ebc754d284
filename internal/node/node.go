// Package node keeps locks in one Redis deployment: a standalone server, a
// Sentinel-managed master or a Cluster (each lock in one slot). It owns
// the steps of the protocol on one deployment (take, renew, renew many,
// release), for each Protocol (lock, permit, leadership), and what they
// rest on: the batcher, the detection of native commands, the classes of
// error replies and the key layout. It returns facts (tokens, replies,
// errors); the root package makes leases of them.
package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/script"
	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9"
)

// A Node is one Redis deployment.
type Node struct {
	conn    transport.Conn
	cfg     *Config
	caps    *capabilities // shared with the node's copies for other Configs
	batches *batchers     // shared with them too: they share the connections
	watches *watchers     // and the tracking connections
}

// New returns the deployment conn reaches, for a Client with cfg.
func New(conn transport.Conn, cfg *Config) *Node {
	return &Node{conn: conn, cfg: cfg, caps: &capabilities{}, batches: &batchers{one: &batcher{conn: conn}}, watches: &watchers{}}
}

// WithConfig returns n for a Client with cfg: the same connections,
// batchers and capabilities.
func (n *Node) WithConfig(cfg *Config) *Node {
	return &Node{conn: n.conn, cfg: cfg, caps: n.caps, batches: n.batches, watches: n.watches}
}

// Subscribe returns a subscription to channels on the deployment (see
// transport.Conn).
func (n *Node) Subscribe(ctx context.Context, sharded bool, channels ...string) transport.Subscription {
	return n.conn.Subscribe(ctx, sharded, channels...)
}

// Do sends cmd, a command of no protocol step (Semaphore.Resize's), and
// returns its error as Follow does.
func (n *Node) Do(ctx context.Context, cmd redis.Cmder) error {
	return n.Follow(ctx, n.conn.Process(ctx, cmd))
}

// Config returns the configuration n serves.
func (n *Node) Config() *Config { return n.cfg }

// Members returns n, the one member of a deployment that is not a quorum.
func (n *Node) Members() []*Node { return []*Node{n} }

// master returns the address of the master that serves key, "" outside a
// Cluster, and a client for it. A Cluster mid rolling upgrade mixes server
// versions, so capabilities are a fact of each master, not of the
// deployment.
func (n *Node) master(ctx context.Context, key string) (string, transport.Conn, error) {
	return n.conn.Master(ctx, key)
}

// natives returns the native commands of the master that serves key; the
// Lua scripts serve while they are unknown.
func (n *Node) natives(ctx context.Context, key string) natives {
	addr, m, err := n.master(ctx, key)
	if err != nil {
		return natives{}
	}
	return n.caps.get(ctx, addr, m)
}

// Acquire takes r's lock for its owner, by r's protocol, and returns the
// token (> 0), or 0 and how long the current holder's lock has left.
func (n *Node) Acquire(ctx context.Context, r *Ref) (int64, time.Duration, error) {
	return n.Take(ctx, r, r.Proto)
}

// Take acquires r's lock by protocol p, which is r's own or, on a quorum,
// what p's nodes take (Protocol.Quorum). A permit whose slot is not chosen
// yet gets the slot the script chooses.
//
// The attempt's cleanup, after an error or a reply not to be trusted, is
// the owner-checked release of what it may have taken (abandon): a
// permit's of whatever slot its owner holds, since the slot is unknown.
func (n *Node) Take(ctx context.Context, r *Ref, p *Protocol) (int64, time.Duration, error) {
	var publish any // what wakes an election's observers
	if p == Leadership {
		publish = n.Publish(ctx, r.Channel)
	}
	args := p.acquireArgs(n.cfg, r, publish)
	if p != Permit {
		token, held, err := n.take(ctx, r.Lock, p.acquire, args, nil, func(ctx context.Context) { n.Release(ctx, r) })
		return token, held, permitsRefused(r, err)
	}
	s := r.Sem
	var slot int
	undo := func(ctx context.Context) { n.releasePermits(ctx, r) }
	token, held, err := n.take(ctx, s.Locks[0], p.acquire, args, &slot, undo)
	err = permitsRefused(r, err)
	if err == nil && token > 0 {
		if slot < 0 || slot >= s.Permits {
			n.abandon(ctx, undo)
			return 0, 0, fmt.Errorf("fencelock: semaphore script replied slot %d of %d", slot, s.Permits)
		}
		r.UseSlot(slot)
	}
	return token, held, err
}

// take runs an acquisition script on the master that serves key. args
// come from s.Args; the script's reply is lua/acquire.lua's (a token, or
// minus the holder's TTL), or with slot not nil, lua/semaphore.lua's
// {slot, acquire.lua's reply}, whose slot it stores there. undo is the
// owner-checked cleanup of what the attempt may have taken: it can only
// delete what carries the attempt's own owner value.
//
// With MinReplicas, WAIT follows the script in one pipeline: it must
// follow the write on the same connection to count its replication. An
// acquisition too few replicas acknowledged is undone: its token could be
// issued anew after a failover.
func (n *Node) take(ctx context.Context, key string, s *script.Script, args []any, slot *int, undo func(ctx context.Context)) (int64, time.Duration, error) {
	b := n.batcher(ctx, key)
	var sender script.Processor = b
	var w *waitAfter
	if n.cfg.MinReplicas > 0 {
		if n.conn.Cluster() {
			if _, _, err := n.master(ctx, key); err != nil {
				return 0, 0, n.Follow(ctx, err)
			}
		}
		w = &waitAfter{b: b, replicas: n.cfg.MinReplicas, timeout: n.cfg.ReplicaTimeout.Milliseconds()}
		sender = w
	}
	var reply int64
	var err error
	if slot == nil {
		var cmd *redis.IntCmd
		if cmd, err = script.Run(ctx, sender, s, args, redis.NewIntCmd); err == nil {
			reply = cmd.Val()
		}
	} else {
		var cmd *redis.Cmd
		if cmd, err = script.Run(ctx, sender, s, args, redis.NewCmd); err == nil {
			reply, err = slotReply(cmd, slot)
		}
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
		return 0, 0, n.Follow(ctx, err)
	}
	token, held := ParseAcquire(reply)
	switch {
	case token == 0:
		return 0, held, nil
	case w == nil:
		return token, 0, nil
	case w.err != nil:
		// Taken, but whether it replicated is unknown: the token must not
		// be used.
		n.abandon(ctx, undo)
		return 0, 0, n.Follow(ctx, fmt.Errorf("WAIT after acquiring: %w", w.err))
	case w.acks < int64(n.cfg.MinReplicas):
		n.abandon(ctx, undo)
		return 0, 0, fmt.Errorf("%w: %w: %d of %d replicas acknowledged within %v",
			errs.ErrNotAcquired, errs.ErrNotReplicated, w.acks, n.cfg.MinReplicas, n.cfg.ReplicaTimeout)
	}
	return token, 0, nil
}

// waitAfter sends a command and WAIT in one pipeline on the connection to
// the master that serves the command's key (a batch's, pinned: on a
// Cluster, WAIT names no key and must not go to any master), and keeps
// the last WAIT's reply.
type waitAfter struct {
	b        *batcher
	replicas int
	timeout  int64 // ms
	acks     int64
	err      error // WAIT's
}

func (w *waitAfter) Process(ctx context.Context, cmd redis.Cmder) error {
	wait := redis.NewIntCmd(ctx, "WAIT", w.replicas, w.timeout)
	if err := w.b.do(ctx, true, cmd, wait); isLeft(err) {
		return err
	}
	w.acks, w.err = wait.Result()
	return cmd.Err()
}

// errSlotReply is a malformed lua/semaphore.lua reply.
var errSlotReply = errors.New("fencelock: malformed semaphore reply")

// slotReply reads lua/semaphore.lua's {slot, reply} and stores the slot.
func slotReply(cmd *redis.Cmd, slot *int) (int64, error) {
	r, ok := cmd.Val().([]any)
	if !ok || len(r) != 2 {
		return 0, fmt.Errorf("%w: %T", errSlotReply, cmd.Val())
	}
	i, ok1 := r[0].(int64)
	reply, ok2 := r[1].(int64)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("%w: (%T, %T)", errSlotReply, r[0], r[1])
	}
	*slot = int(i)
	return reply, nil
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
//
// The caller waits for the undo until its own context ends, no longer: a
// call returns by its context's deadline, and the undo goes on in the
// background, for up to abandonTimeout.
func (n *Node) abandon(ctx context.Context, undo func(ctx context.Context)) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(n.cfg.TTL, abandonTimeout))
	done := make(chan struct{})
	go func() {
		defer cancel()
		defer close(done)
		undo(rctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// abandonTimeout bounds the release of an abandoned acquisition.
const abandonTimeout = time.Second

// ParseAcquire reads the acquire script's reply: the token (> 0), or
// minus the holder's remaining TTL in milliseconds (<= 0). Replies that
// are not integers are errors before they get here.
func ParseAcquire(reply int64) (token int64, held time.Duration) {
	const most = int64(math.MaxInt64 / time.Millisecond)
	switch {
	case reply > 0:
		return reply, 0
	case reply < -most:
		return 0, time.Duration(most) * time.Millisecond
	}
	return 0, time.Duration(-reply) * time.Millisecond
}

// Renew extends r's lock, and its token counter's retention (and a
// leadership's record), if r's owner holds it. A lock that is gone, held
// by another owner or not a string reports false.
func (n *Node) Renew(ctx context.Context, r *Ref) (bool, error) {
	if n.nativeRenew(ctx, r) {
		held, err := n.renewNative(ctx, r)
		if !nativeRefused(err) {
			return held, n.Follow(ctx, err)
		}
		n.refuseNatives(ctx, r.Lock)
	}
	v, err := r.Proto.renew.Int(ctx, n.conn, r.Proto.renewArgs(n.cfg, r))
	return v == 1, n.Follow(ctx, err)
}

// RenewMany renews many locks in one pipeline, each as Renew would: the
// script, or SET IFEQ and PEXPIRE where the lock's master has them. A lock
// whose command the server did not run as such (NOSCRIPT, a native
// command refused) is renewed again alone, by Renew.
func (n *Node) RenewMany(ctx context.Context, refs []*Ref) ([]bool, []error) {
	held, fails := make([]bool, len(refs)), make([]error, len(refs))
	type sent struct {
		script    *redis.IntCmd
		set, keep redis.Cmder
	}
	cmds := make([]sent, len(refs))
	all := make([]redis.Cmder, 0, 2*len(refs))
	for i, r := range refs {
		if n.nativeRenew(ctx, r) {
			cmds[i].set, cmds[i].keep = n.nativeRenewCmds(ctx, r)
			all = append(all, cmds[i].set)
			if cmds[i].keep != nil {
				all = append(all, cmds[i].keep)
			}
			continue
		}
		cmds[i].script = redis.NewIntCmd(ctx, r.Proto.renewArgs(n.cfg, r)...)
		all = append(all, cmds[i].script)
	}
	if err := n.conn.Pipeline(ctx, all...); err != nil {
		n.Follow(ctx, err)
	}
	for i, r := range refs {
		c := cmds[i]
		switch {
		case c.script != nil && script.NoScript(c.script.Err()),
			c.set != nil && nativeRefused(c.set.Err()):
			held[i], fails[i] = n.Renew(ctx, r)
		case c.script != nil:
			v, err := c.script.Result()
			held[i], fails[i] = v == 1, err
		default:
			held[i], fails[i] = nativeRenewed(c.set, c.keep)
		}
	}
	return held, fails
}

// nativeRenew reports whether the renewals of r use SET IFEQ: where its
// master has it, for a protocol that renews no more than the lock, and for
// leases without LockDelay. The delay key must follow the lock only while
// the lease holds it (lua/renew.lua); a pipelined SET IFEQ on it would
// also run for a lock that expired, and push its delay back.
func (n *Node) nativeRenew(ctx context.Context, r *Ref) bool {
	return r.Proto.native && n.cfg.LockDelay == 0 && n.natives(ctx, r.Lock).setIFEQ()
}

// renewNative renews with SET IFEQ, always with PX (a SET without it
// would drop the TTL and make the lock permanent), pipelined with the
// PEXPIRE that refreshes the counter's retention: one round trip. The
// PEXPIRE runs whether or not the lock is still ours; it only ever keeps
// a counter longer, which is safe.
func (n *Node) renewNative(ctx context.Context, r *Ref) (bool, error) {
	set, keep := n.nativeRenewCmds(ctx, r)
	if keep == nil {
		n.conn.Process(ctx, set)
	} else {
		n.conn.Pipeline(ctx, set, keep)
	}
	return nativeRenewed(set, keep)
}

// nativeRenewCmds returns renewNative's commands: SET IFEQ, and PEXPIRE of
// the counter unless it is kept for ever.
func (n *Node) nativeRenewCmds(ctx context.Context, r *Ref) (set, keep redis.Cmder) {
	set = redis.NewCmd(ctx, "SET", r.LockArg, &r.Owner, "IFEQ", &r.Owner, "PX", n.cfg.TTLArg)
	if n.cfg.CounterTTL > 0 {
		keep = redis.NewBoolCmd(ctx, "pexpire", r.Token, n.cfg.RetentionArg)
	}
	return set, keep
}

// nativeRenewed reads the replies of renewNative's commands.
func nativeRenewed(set, keep redis.Cmder) (bool, error) {
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

// Follow returns err, a request's, after asking a Cluster client to
// reload its slot map when err may come from a failover: go-redis reloads
// it on MOVED, but not when the master it knows is gone and it does not
// retry on another node (MaxRetries < 1), and would keep dialling the
// dead master. A request that its context ended while the client had no
// connection at all says so: "context deadline exceeded" alone does not
// tell a server that refuses connections (go-redis was still dialling,
// and retrying) from one that does not answer.
//
// An unauthenticated request that Redis refuses as a protocol error (one
// of more than a few arguments, from a client without the password) is
// reported as what it is: a missing authentication.
func (n *Node) Follow(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !n.conn.Connected() {
		return fmt.Errorf("no connection to Redis could be made: %w", err)
	}
	if unauthenticated(err) {
		return fmt.Errorf("NOAUTH authentication required: the server refused an unauthenticated request: %w", err)
	}
	if n.conn.Cluster() && err != nil && ctx.Err() == nil {
		var rerr redis.Error
		if _, reload := classOf(err); reload || !errors.As(err, &rerr) {
			n.conn.Reload(ctx)
		}
	}
	return err
}

// Sharded reports whether releases publish, and waiters subscribe, on the
// shard of channel (SPUBLISH, SSUBSCRIBE) rather than cluster-wide: on a
// Cluster whose servers have sharded pub/sub. Channels share their lock's
// hash tag, so they live in the lock's slot.
func (n *Node) Sharded(ctx context.Context, channel string) bool {
	return n.conn.Cluster() && n.natives(ctx, channel).spublish
}

var publishArg, spublishArg any = "PUBLISH", "SPUBLISH"

// Publish returns the command that publishes on channel from a script:
// sharded where Sharded says so.
func (n *Node) Publish(ctx context.Context, channel string) any {
	if n.Sharded(ctx, channel) {
		return spublishArg
	}
	return publishArg
}

// Release deletes r's lock if r's owner holds it, by r's protocol, and
// wakes its waiters; it reports whether it deleted.
func (n *Node) Release(ctx context.Context, r *Ref) (bool, error) {
	nat := n.natives(ctx, r.Lock)
	// With LockDelay, the Lua release: a pipelined native delete of the
	// delay key would also run for a lease that expired, and cut short
	// the delay that its expiry started.
	if r.Proto.native && (nat.delex || nat.delifeq) && n.cfg.LockDelay == 0 {
		deleted, err := n.releaseNative(ctx, r, nat)
		switch {
		case nativeRefused(err):
			n.refuseNatives(ctx, r.Lock)
		case !unexplained(err):
			return deleted, n.Follow(ctx, err)
		}
		// An error reply no class explains (Redis 8's DELEX IFEQ on a key
		// that holds no string answers an ERR whose text no test should
		// depend on): the Lua release decides, as it does everywhere,
		// with commands every user of the library may run.
	}
	publish := publishArg
	if n.conn.Cluster() && nat.spublish {
		publish = spublishArg
	}
	v, err := r.Proto.release.Int(ctx, n.batcher(ctx, r.Lock), r.Proto.releaseArgs(n.cfg, r, publish))
	return v == 1, n.Follow(ctx, err)
}

// releaseNative deletes with DELEX IFEQ or DELIFEQ, pipelined with the
// publish: one round trip. The publish wakes waiters even if nothing was
// deleted, which costs them one attempt and is harmless.
func (n *Node) releaseNative(ctx context.Context, r *Ref, nat natives) (bool, error) {
	var del *redis.Cmd
	if nat.delex {
		del = redis.NewCmd(ctx, "DELEX", r.LockArg, "IFEQ", &r.Owner)
	} else {
		del = redis.NewCmd(ctx, "DELIFEQ", r.LockArg, &r.Owner)
	}
	pub := redis.NewIntCmd(ctx, publishArg, r.ChannelArg, "")
	if n.conn.Cluster() && nat.spublish {
		pub = redis.NewIntCmd(ctx, spublishArg, r.ChannelArg, "")
	}
	if err := n.batcher(ctx, r.Lock).do(ctx, false, del, pub); isLeft(err) {
		return false, err
	}
	v, err := del.Int64()
	if wrongType(err) {
		return false, nil // not our lock: someone replaced it
	}
	return v == 1, err
}

// releasePermits releases, owner-checked, whatever slot of its semaphore
// r's owner holds (lua/semaphore_release.lua), waking the waiters: the
// cleanup of a permit attempt whose slot is unknown.
func (n *Node) releasePermits(ctx context.Context, r *Ref) (bool, error) {
	s := r.Sem
	args := append(script.SemaphoreRelease.Args(strconv.Itoa(2*s.Permits), 2*s.Permits+3), s.releaseKeys...)
	args = append(args, &r.Owner, s.ChannelArg, n.Publish(ctx, s.Channel))
	v, err := script.SemaphoreRelease.Int(ctx, n.batcher(ctx, s.Locks[0]), args)
	return v > 0, n.Follow(ctx, err)
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
func (n *Node) refuseNatives(ctx context.Context, key string) {
	if addr, _, err := n.master(ctx, key); err == nil {
		n.caps.refused(addr)
	}
}

// Int runs s on the master that serves its first key (an election's
// announcement), for an integer reply.
func (n *Node) Int(ctx context.Context, s *script.Script, args []any) (int64, error) {
	v, err := s.Int(ctx, n.conn, args)
	return v, n.Follow(ctx, err)
}

// Eval runs s as Int does, for a reply that is not an integer (a read).
func (n *Node) Eval(ctx context.Context, s *script.Script, args []any) (any, error) {
	v, err := s.Eval(ctx, n.conn, args)
	return v, n.Follow(ctx, err)
}

// Each sends f to the deployment, n's one member.
func (n *Node) Each(ctx context.Context, _ string, _ time.Duration, f func(ctx context.Context, i int, n *Node) (bool, error)) (bool, error) {
	return f(ctx, 0, n)
}
