package fencelock

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/script"
	"github.com/redis/go-redis/v9"
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
// N is kept on the server with the semaphore: its first acquisition
// records it, and an acquisition that asks for another N is refused with
// an error wrapping ErrInvalid that names both, so that two programs
// cannot hand out permits by two counts. Client.Permits reads it. N
// changes on purpose by Resize: a Semaphore with the new N records it,
// and acquires after. A permit in a slot at or above a smaller N stays
// valid until it is released or lost, and is never issued again: right
// after a shrink from M to N, up to M permits may be valid at once, and
// none beyond N is issued after. Growing is immediate. The record lapses,
// as the slots' token counters do, after Options.TokenRetention without
// an acquisition.
//
// Keys share the semaphore's hash tag (one Cluster slot): slot i's lock
// prefix{name}:permit:i, its token counter prefix{name}:permit:i:token,
// the number of permits prefix{name}:permits, and one release channel; a lock, an election and a semaphore of the same
// name do not share keys. Holders reads the semaphore; a Client's Holder
// reads locks only.
//
// On a quorum Client, a permit is a slot acquired as a lock is on the
// quorum (see NewQuorum), so that every node agrees on the slot: the
// client reads, in a round bounded by Options.NodeTimeout, which slots no
// lease holds and no lock-delay keeps on a majority of the nodes, then
// acquires them one after the other, starting at a random one of them,
// through the quorum's own acquisition round, until one is granted; the
// attempt fails as not acquired only when every slot was held or refused.
//
// A Semaphore is safe for concurrent use.
type Semaphore struct {
	c    *Client
	name string
	err  error // reported by every call
	want *want // a permit of the semaphore's keys, built once; nil if err
}

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
	s.want = &want{proto: node.Permit, sem: c.cfg.Semaphore(name, permits)}
	return s
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits returns how many permits this Semaphore hands out at most: the
// slots it acquires, 0 to Permits-1.
func (s *Semaphore) Permits() int {
	if s.want == nil {
		return 0
	}
	return s.want.sem.Permits
}

// SlotName returns the fence name of the semaphore name's slot: the Lock
// of the Fence of a permit in that slot, "name{permit slot}".
func SlotName(name string, slot int) string { return node.SlotName(name, slot) }

// TryAcquire makes one attempt to acquire a permit. If every permit is
// held, the error wraps ErrNotAcquired. The returned lease is renewed in
// the background until released or lost, as a lock's (see
// Client.TryAcquire); its Slot is the permit's slot.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.c.tryOnce(ctx, s.name, s.want)
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
	return s.c.acquire(ctx, s.name, s.want)
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

// Resize makes this Semaphore's Permits the semaphore's number of permits
// on the server (see Semaphore), whatever it was: acquisitions with the
// new number go ahead, and with the old one are refused. On a quorum it
// needs a majority of the nodes, else the error wraps ErrNoQuorum.
func (s *Semaphore) Resize(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	sem, ttl := s.want.sem, s.c.cfg.CounterTTL
	_, err := s.c.be.Each(ctx, "resized", s.c.cfg.TTL, func(ctx context.Context, _ int, n *node.Node) (bool, error) {
		args := []any{"set", sem.Count, sem.Permits}
		if ttl > 0 { // else kept for ever, as the counters are
			args = append(args, "px", ttl.Milliseconds())
		}
		err := n.Do(ctx, redis.NewStatusCmd(ctx, args...))
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("resize %q: %w", s.name, err)
	}
	return nil
}

// Permits returns the number of permits of the semaphore named name, as
// recorded on the server by its first acquisition or by Resize (on a
// quorum, by a majority of the nodes): 0 if none is, because no Semaphore
// of that name acquired a permit within Options.TokenRetention. If too
// few nodes answer to decide, the error wraps ErrNoQuorum.
func (c *Client) Permits(ctx context.Context, name string) (int, error) {
	if err := c.check(name); err != nil {
		return 0, err
	}
	key := c.cfg.Semaphore(name, 1).Count
	type read struct {
		n   int
		err error
	}
	reads := readAll(ctx, c.be.Members(), c.cfg.TTL/4, func(ctx context.Context, n *node.Node) read {
		cmd := redis.NewStringCmd(ctx, "get", key)
		if err := n.Do(ctx, cmd); errors.Is(err, redis.Nil) {
			return read{}
		} else if err != nil {
			return read{err: err}
		}
		v, err := cmd.Int()
		return read{v, err}
	}, func(err error) read { return read{err: err} })
	permits, t := quorum.Vote(len(reads), func(i int) (int, bool, error) { return reads[i].n, true, reads[i].err })
	if t.Decide(len(reads), quorum.Keeping) != quorum.MajorityYes {
		errs := make([]error, len(reads))
		for i, r := range reads {
			errs[i] = r.err
		}
		return 0, undecided(ctx, "permits", name, errs)
	}
	return permits, nil
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
	sem := s.want.sem
	views := readAll(ctx, s.c.be.Members(), s.c.cfg.TTL/4, func(ctx context.Context, n *node.Node) []node.View {
		reply, err := n.Eval(ctx, script.Slots, sem.SlotsArgs())
		if err != nil {
			return node.Failed(sem.Permits, err)
		}
		vs, _ := sem.ParseSlots(reply)
		return vs
	}, func(err error) []node.View { return node.Failed(sem.Permits, err) })
	var hs []PermitHolder
	for i := range sem.Permits {
		slot := make([]node.View, len(views))
		for j := range views {
			slot[j] = views[j][i]
		}
		h, d := quorum.Holder(slot)
		switch {
		case d == quorum.Undecided:
			return nil, undecided(ctx, "holders", SlotName(s.name, i), viewErrs(slot))
		case d == quorum.MajorityYes || h.Delay > 0:
			hs = append(hs, PermitHolder{Slot: i, Holder: Holder(h)})
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
	if slot < 0 || slot >= s.want.sem.Permits {
		return nil, fmt.Errorf("%w: semaphore %q: slot %d not in [0, %d)", ErrInvalid, s.name, slot, s.want.sem.Permits)
	}
	l, err := s.c.attach(s.name, secret, token, s.want.proto)
	if err != nil {
		return nil, err
	}
	l.ref.UsePermit(s.want.sem)
	l.ref.UseSlot(slot)
	return l, nil
}

// Slot returns the slot of a permit's lease, in [0, permits) of its
// Semaphore; -1 for a lock's lease.
func (l *Lease) Slot() int {
	if l.ref.Sem == nil {
		return -1
	}
	return l.ref.Slot
}
