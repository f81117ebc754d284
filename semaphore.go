package fencelock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/semaphore.lua
	semaphoreTail string
	//go:embed lua/semaphore_release.lua
	semaphoreReleaseTail string

	// lua/semaphore.lua takes a slot with lua/acquire.lua, and
	// lua/semaphore_release.lua releases one with lua/release.lua, each
	// run as a function of its own KEYS and ARGV (parameters that shadow
	// the globals): a permit is taken and given back by the very code
	// that takes and gives back a lock.
	semaphoreLua        = "local function acquire(KEYS, ARGV)\n" + acquireLua + "\nend\n" + semaphoreTail
	semaphoreReleaseLua = "local function release(KEYS, ARGV)\n" + releaseLua + "\nend\n" + semaphoreReleaseTail

	semaphoreRun, semaphoreReleaseRun = newRunner(semaphoreLua), newRunner(semaphoreReleaseLua)
)

// MaxPermits is the most permits a Semaphore may have. An acquisition on
// one node is one script that reads every slot's lock (so that a retried
// request finds the slot it took, and the shortest TTL is known when all
// are held), and Holders reads every slot: both cost O(permits) on a
// server that runs one command at a time. 1024 slots keep that well under
// a millisecond; a limit of many more concurrent holders is a rate
// limiter's job, not a fenced lease's.
const MaxPermits = 1024

// A Semaphore hands out up to Permits leases at once on one name: a
// counting semaphore whose permits are leases exactly as a lock's are
// (renewed in the background, lost with their Context's cause wrapping
// ErrLeaseLost, released by Lease.Release, reported to Options.Hooks), each
// with a fencing token.
//
// A semaphore of N permits is N lock slots of one name, 0 to N-1,
// acquired as one FIFO queue. A permit holds one slot. Its Fence names the
// slot ("jobs{permit 3}" for slot 3 of the semaphore "jobs"; lock names
// have no braces, so no lock's fence has such a name), and its Token is
// greater than every token issued before for that slot: each slot has its
// own counter, issued by the lock's rule. A fenced resource (package
// fence) therefore rejects the writes of a permit holder whose slot was
// re-issued, with no rule of its own: give each slot its own fenced
// resource record, or key the resource by Fence().Lock.
//
// Changing N: each Semaphore value acquires with its own N, taking only
// slots below it. A permit in a slot at or above a smaller N stays valid
// until it is released or lost, and is never issued again by a Semaphore
// with that N: right after a shrink from M to N, up to M permits may be
// valid at once, and none beyond N is issued after. Growing is immediate.
//
// Keys share the semaphore's hash tag (one Cluster slot): slot i's lock
// prefix{name}:permit:i, its token counter prefix{name}:permit:i:token, and
// one release channel; a lock, an election and a semaphore of the same
// name do not share keys. Holders reads the semaphore; a Client's Holder
// reads locks only.
//
// On a quorum Client, a permit is a slot acquired as a lock is on the
// quorum (see NewQuorum): the client reads which slots a majority of the
// nodes hold, then acquires the first free one through the quorum's own
// acquisition round, so every node agrees on the slot.
//
// A Semaphore is safe for concurrent use.
type Semaphore struct {
	c    *Client
	name string
	err  error       // reported by every call
	keys *permitKeys // built once, nil if err
}

// permitKeys are a semaphore's keys, built once per Semaphore so that an
// attempt sends boxed strings it shares with every other.
type permitKeys struct {
	name       string
	permits    int
	channel    string
	channelArg any
	locks      []string // slot i's lock key
	tokens     []string // slot i's token counter
	delays     []string // slot i's lock-delay key
	// args are lua/semaphore.lua's KEYS: each slot's lua/acquire.lua
	// KEYS, perSlot of them, boxed once.
	args []any
	// releaseArgs are each slot's lock and lock-delay keys, boxed once:
	// lua/semaphore_release.lua's KEYS.
	releaseArgs []any
}

// perSlot is how many keys lua/acquire.lua takes for one slot; semaphore
// builds them in its order.
const perSlot = 3

// Semaphore returns the semaphore named name with permits permits. Names
// follow the rules of lock names (CheckName). An invalid name, or permits
// outside [1, MaxPermits], is reported, wrapping ErrInvalid, by every call
// on the Semaphore, which then sends nothing.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	s := &Semaphore{c: c, name: name}
	if s.err = c.check(name); s.err != nil {
		return s
	}
	if permits < 1 || permits > MaxPermits {
		s.err = fmt.Errorf("%w: semaphore %q: permits %d not in [1, %d]", ErrInvalid, name, permits, MaxPermits)
		return s
	}
	s.keys = c.cfg.permitKeys(name, permits)
	return s
}

// permitKeys builds the keys of the semaphore named name with permits
// slots.
func (c *config) permitKeys(name string, permits int) *permitKeys {
	base := c.prefix + "{" + name + "}:permit"
	p := &permitKeys{name: name, permits: permits, channel: base + "s:released",
		locks: make([]string, permits), tokens: make([]string, permits), delays: make([]string, permits),
		args: make([]any, 0, perSlot*permits), releaseArgs: make([]any, 0, 2*permits)}
	p.channelArg = p.channel
	for i := range permits {
		p.locks[i] = base + ":" + strconv.Itoa(i)
		p.tokens[i] = p.locks[i] + ":token"
		p.delays[i] = p.locks[i] + ":delay"
		p.releaseArgs = append(p.releaseArgs, p.locks[i], p.delays[i])
		// lua/acquire.lua's KEYS for slot i, in its order.
		p.args = append(p.args, p.locks[i], p.tokens[i], p.delays[i])
	}
	return p
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns how many permits this Semaphore hands out at most: the
// slots it acquires, 0 to Permits-1.
func (s *Semaphore) Permits() int {
	if s.keys == nil {
		return 0
	}
	return s.keys.permits
}

// SlotName returns the fence name of the semaphore name's slot: the Lock
// of the Fence of a permit in that slot, "name{permit slot}".
func SlotName(name string, slot int) string {
	return name + "{permit " + strconv.Itoa(slot) + "}"
}

// TryAcquire makes one attempt to acquire a permit. If every permit is
// held, the error wraps ErrNotAcquired. The returned lease is renewed in
// the background until released or lost, as a lock's (see
// Client.TryAcquire); its Slot is the permit's slot.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	var t acquireTrace
	l, _, err := s.c.try(ctx, s.name, s.keys, &t)
	t.done(ctx, &s.c.cfg, s.name, l, err)
	return l, err
}

// Acquire waits until it holds a permit or ctx is done; then the error
// wraps both ErrNotAcquired and context.Cause(ctx). Waiters queue FIFO in
// the Client as Client.Acquire's do, with the same wake-ups and error
// rules: a release wakes the first waiter at once, and a waiter that
// leaves holding a permit lets the next try at once, since other permits
// may be free.
func (s *Semaphore) Acquire(ctx context.Context) (l *Lease, err error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.c.acquire(ctx, s.name, s.keys)
}

// Do acquires a permit, calls fn with a context and the permit's fence,
// and releases it when fn returns or panics, as Client.Do does for a lock.
func (s *Semaphore) Do(ctx context.Context, fn func(ctx context.Context, f fence.Fence) error) error {
	l, err := s.Acquire(ctx)
	if err != nil {
		return err
	}
	return s.c.hold(ctx, l, fn)
}

// PermitHolder describes one held permit: its slot and the lease that
// holds it, as Client.Holder describes a lock's holder.
type PermitHolder struct {
	Slot int
	Holder
}

// Holders returns the permits held now, one PermitHolder per held slot,
// slot 0 first, read from every slot's keys (on a quorum, a slot is held
// by a lease that holds it on a majority of the nodes, as Client.Holder
// decides). Slots at or above Permits are not read. As with
// Client.Holder, the answer may be out of date by the time it is read.
// If too few nodes answer to decide a slot, the error wraps ErrNoQuorum.
func (s *Semaphore) Holders(ctx context.Context) ([]PermitHolder, error) {
	if s.err != nil {
		return nil, s.err
	}
	var hs []PermitHolder
	for i, v := range readSlots(ctx, s.c.el, &s.c.cfg, s.keys) {
		h, held, decided := decideHolder(v)
		if !decided {
			return nil, s.c.holderUndecided(ctx, "holders", SlotName(s.name, i), v)
		}
		if held {
			hs = append(hs, PermitHolder{Slot: i, Holder: h})
		}
	}
	return hs, nil
}

// Attach rebuilds a handle for a permit acquired elsewhere, as
// Client.Attach does for a lock's lease: from its slot, the lease's Secret
// and its Token. Invalid input (a slot outside [0, Permits), an empty or
// oversized secret, a token ≤ 0) returns an error wrapping ErrInvalid.
func (s *Semaphore) Attach(slot int, secret string, token int64) (*Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	if slot < 0 || slot >= s.keys.permits {
		return nil, fmt.Errorf("%w: semaphore %q: slot %d not in [0, %d)", ErrInvalid, s.name, slot, s.keys.permits)
	}
	l, err := s.c.Attach(s.name, secret, token)
	if err != nil {
		return nil, err
	}
	l.ref.usePermit(s.keys)
	l.ref.useSlot(slot)
	return l, nil
}

// usePermit makes r, set by config.setRef, an attempt to take a permit of
// p: its slot unknown until an acquisition reply names it (useSlot), its
// channel the semaphore's.
func (r *lockRef) usePermit(p *permitKeys) {
	r.permit, r.slot = p, -1
	r.channel, r.channelArg = p.channel, p.channelArg
}

// useSlot points r's lock and token keys at slot i of its semaphore.
func (r *lockRef) useSlot(i int) {
	p := r.permit
	r.slot = i
	r.lock, r.token, r.delay, r.lockArg = p.locks[i], p.tokens[i], p.delays[i], p.args[perSlot*i]
	r.slotName = SlotName(p.name, i)
}

// Slot returns the slot of a permit's lease, in [0, permits) of its
// Semaphore; -1 for a lock's lease.
func (l *Lease) Slot() int {
	if l.ref.permit == nil {
		return -1
	}
	return l.ref.slot
}

// acquirePermit takes a permit of r's semaphore on one node: the slot
// r's owner holds already or the first free one (lua/semaphore.lua),
// through take, as a lock is taken; the cleanup after a failed attempt
// releases whatever slot the owner holds.
func (n *node) acquirePermit(ctx context.Context, r *lockRef) (int64, time.Duration, error) {
	p := r.permit
	args := append(semaphoreRun.args(strconv.Itoa(perSlot*p.permits), len(p.args)+6), p.args...)
	args = n.acquireArgv(append(args, p.permits, perSlot), r)
	var slot int
	token, held, err := n.take(ctx, p.locks[0], semaphoreRun, args, &slot, func(ctx context.Context) { n.releasePermits(ctx, r) })
	if err == nil && token > 0 {
		if slot < 0 || slot >= p.permits {
			n.abandon(ctx, func(ctx context.Context) { n.releasePermits(ctx, r) })
			return 0, 0, fmt.Errorf("fencelock: semaphore script replied slot %d of %d", slot, p.permits)
		}
		r.useSlot(slot)
	}
	return token, held, err
}

// releasePermits releases, owner-checked, whatever slot of its semaphore
// r's owner holds on n (lua/semaphore_release.lua), waking the waiters.
func (n *node) releasePermits(ctx context.Context, r *lockRef) (bool, error) {
	p := r.permit
	publish := publishArg
	if n.shardedPubSub(ctx, p.channel) {
		publish = spublishArg
	}
	args := append(semaphoreReleaseRun.args(strconv.Itoa(2*p.permits), 2*p.permits+3), p.releaseArgs...)
	v, err := semaphoreReleaseRun.run(ctx, n.rdb, append(args, &r.owner, p.channelArg, publish))
	return v > 0, n.follow(ctx, err)
}

// errSlotReply is a malformed lua/semaphore.lua reply.
var errSlotReply = errors.New("fencelock: malformed semaphore reply")

// readSlots reads every slot of p on every node, lua/holder.lua per slot
// in one pipeline per node, waiting for every answer up to a quarter of
// the TTL as Holder does: views[slot][node].
func readSlots(ctx context.Context, el electorate, cfg *config, p *permitKeys) [][]holderView {
	members := el.members()
	views := make([][]holderView, p.permits)
	for i := range views {
		views[i] = make([]holderView, len(members))
		for j := range views[i] {
			views[i][j].err = errPending
		}
	}
	el.gather(ctx, cfg.ttl/4, func(ctx context.Context, j int, n *node) func() {
		vs := readSlotsNode(ctx, n, p)
		return func() {
			for i, v := range vs {
				views[i][j] = v
			}
		}
	}, func() bool { return false })
	for i := range views {
		for j := range views[i] {
			if views[i][j].err == errPending {
				views[i][j].err = context.Cause(ctx)
			}
		}
	}
	return views
}

// readSlotsNode runs lua/holder.lua for every slot of p on n, in one
// pipeline.
func readSlotsNode(ctx context.Context, n *node, p *permitKeys) []holderView {
	cmds := make([]*redis.Cmd, p.permits)
	run := func() error {
		_, err := n.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for i := range cmds {
				cmds[i] = redis.NewCmd(ctx, append(holderRun.args("2", 2), p.args[perSlot*i], p.tokens[i])...)
				pl.Process(ctx, cmds[i])
			}
			return nil
		})
		return err
	}
	if err := run(); noScript(err) {
		// EVAL of one slot caches the script for the others.
		if _, err := holderRun.eval(ctx, n.rdb, append(holderRun.args("2", 2), p.args[0], p.tokens[0])); err == nil {
			run()
		}
	}
	vs := make([]holderView, p.permits)
	for i, cmd := range cmds {
		reply, err := cmd.Result()
		if err != nil {
			vs[i] = holderView{err: n.follow(ctx, err)}
			continue
		}
		vs[i] = parseHolder(reply, p.tokens[i])
	}
	return vs
}

// acquirePermit takes a permit of r's semaphore on a quorum. The slot is
// chosen by the client, not by each node: nodes that each chose their own
// first free slot could disagree, and a permit is only safe when a
// majority holds the same slot. So one read round (as Holders reads)
// finds the slots that no lease holds on a majority, and the first of them
// is acquired as a lock is, through the quorum's acquisition round
// (proposal, write-back, validity), which alone decides: a slot taken
// meanwhile by another client fails the round like a lock held. Reading
// first costs a round trip, but keeps the proven round unchanged and
// makes a refusal mean contention, not a guess.
func (q *quorum) acquirePermit(ctx context.Context, r *lockRef) (int64, time.Duration, error) {
	var held time.Duration
	var errs []error
	for i, views := range readSlots(ctx, q, q.cfg, r.permit) {
		h, taken, decided := decideHolder(views)
		switch {
		case !decided:
			for _, v := range views {
				if v.err != nil {
					errs = append(errs, fmt.Errorf("slot %d: %w", i, v.err))
				}
			}
			continue
		case taken:
			if h.TTL >= 0 && (held == 0 || h.TTL < held) {
				held = h.TTL
			}
			continue
		}
		r.useSlot(i)
		return q.acquire(ctx, r)
	}
	if len(errs) > 0 {
		return 0, 0, fmt.Errorf("%w: no slot read free on a majority: %w", ErrNoQuorum, nodeErrors(errs))
	}
	return 0, held, nil
}
