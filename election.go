package fencelock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fencelock/fencelock/internal/election"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/script"
)

// MaxValueLen is the longest value a candidate can announce, in bytes.
const MaxValueLen = 4096

// An Election is one candidate for the leadership of the election named
// name, in the manner of etcd's concurrency.Election: Campaign waits
// until it leads, Proclaim changes what it announces while it leads,
// Resign hands the leadership over, and Leader and Observe tell anyone
// who leads.
//
// The leadership is a lease on the lock named name, and its token is the
// **term**: greater than every earlier term of the election. A leader
// sends its lease's Fence with every write, so that a fenced resource
// (package fence) rejects the writes of a deposed leader that has not
// noticed yet (paused, partitioned, or on the wrong side of a failover).
// Being the leader is, as holding any lease, a belief that may be out of
// date: the term is what makes it safe to act on.
//
// Besides the lock, an election keeps two keys with the lock's hash tag
// (so one Cluster slot): the leader's public record (its value, term,
// lease ID and since when it leads), which expires with the lock and is
// deleted when the leader resigns, and a short history of changes for
// Observe. Neither holds the lease's secret. A lease taken with Acquire
// on the same name holds the same lock, and so keeps every candidate out,
// but it is not a leader: Leader reports ErrNoLeader while it holds.
//
// An Election is safe for concurrent use; it leads at most once at a
// time. Candidates in one process that should take turns need an
// Election each.
type Election struct {
	c    *Client
	name string

	campaigning sync.Mutex // one Campaign at a time
	proclaiming sync.Mutex // Proclaims in order of their sequence numbers

	mu    sync.Mutex
	lease *Lease // the current leadership, nil if none
	value string // what it announces now
	seq   int64  // the last Proclaim's sequence number in this term
}

// Election returns a candidate for the election named name. Names follow
// the rules of lock names; an invalid name is reported, wrapping
// ErrInvalid, by every call on the Election, which then sends nothing.
func (c *Client) Election(name string) *Election {
	return &Election{c: c, name: name}
}

// Leader describes who leads an election. Observe sends the zero Leader
// (Term 0) when nobody does.
type Leader struct {
	// Value is what the leader announced: at Campaign, or by its latest
	// Proclaim.
	Value string
	// Term is the leadership's fencing token, > 0.
	Term int64
	// LeaseID is the leadership's public lease ID (Lease.ID).
	LeaseID string
	// Since is when the leader's winning campaign attempt was sent, by
	// its own clock.
	Since time.Time
}

// Name returns the election's name: the name of its lock.
func (e *Election) Name() string { return e.name }

// Campaign waits until this candidate leads the election or ctx is done,
// and announces value as the leader's (see Leader). It returns the
// leadership: a lease on the election's lock whose Token is the term,
// renewed in the background as any lease, and whose Context ends if the
// leadership is lost. Release the lease, or call Resign, to hand over.
//
// Candidates wait as Acquire does: a leader that resigns wakes them at
// once, one that expires when its TTL runs out; Options.Hooks reports
// each attempt as an acquisition. When ctx ends first, the error wraps
// both ErrNotAcquired and context.Cause(ctx).
//
// On a quorum Client, the leader's record is written to the nodes after
// the lock is taken, as a third round that needs a majority; elsewhere
// the lock, the term and the record are written by one script.
//
// Called while this Election leads, Campaign proclaims value if it
// differs and returns the same lease, as etcd's does. An empty value,
// one longer than MaxValueLen or not valid UTF-8 is rejected with an
// error wrapping ErrInvalid, and nothing is sent.
func (e *Election) Campaign(ctx context.Context, value string) (*Lease, error) {
	return e.campaign(ctx, value, false)
}

// TryCampaign makes one attempt to lead the election, as Client.TryAcquire
// makes one to acquire a lock: if another candidate leads (or a lease
// holds the election's lock), the error wraps ErrNotAcquired at once.
// Otherwise it is Campaign.
func (e *Election) TryCampaign(ctx context.Context, value string) (*Lease, error) {
	return e.campaign(ctx, value, true)
}

// campaign is Campaign, or with once TryCampaign.
func (e *Election) campaign(ctx context.Context, value string, once bool) (*Lease, error) {
	if err := e.check(value); err != nil {
		return nil, err
	}
	e.campaigning.Lock()
	defer e.campaigning.Unlock()
	if l, current := e.leading(); l != nil {
		if value == current {
			return l, nil
		}
		err := e.Proclaim(ctx, value)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrNotLeader) {
			return nil, err
		}
		// Lost meanwhile: campaign anew.
	}
	// The campaign is an acquisition of the leadership protocol: it
	// shares the Client's wake-ups, so candidates queue with the
	// Client's other waiters for the same lock.
	w := &want{proto: node.Leadership, value: value}
	var l *Lease
	var err error
	if once {
		l, err = e.c.tryOnce(ctx, e.name, w)
	} else {
		l, err = e.c.acquire(ctx, e.name, w)
	}
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	e.mu.Lock()
	e.lease, e.value, e.seq = l, value, 0
	e.mu.Unlock()
	return l, nil
}

// leading returns the current leadership and its value, if this
// Election leads as far as it knows; else nil.
func (e *Election) leading() (*Lease, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil || e.lease.releaseCalled() || e.lease.ended() != nil {
		return nil, ""
	}
	return e.lease, e.value
}

// Proclaim changes the value this candidate announces while it leads,
// without another election; observers see the new value with the same
// term. Only the current leader can: the write is owner-checked. If this
// Election does not lead, the error wraps ErrNotLeader; if its leadership
// was lost (the lock is gone or has another owner), it wraps ErrLeaseLost
// too, and the lease's Context ends. On other errors (the network, Redis)
// the value may or may not have been written; on a quorum, one written to
// a minority of nodes only is not what Leader and Observe report, and
// Campaign, or Proclaim, announces again. Invalid values are rejected as
// by Campaign.
func (e *Election) Proclaim(ctx context.Context, value string) error {
	if err := e.check(value); err != nil {
		return err
	}
	e.proclaiming.Lock()
	defer e.proclaiming.Unlock()
	e.mu.Lock()
	l := e.lease
	if l == nil || l.releaseCalled() {
		e.mu.Unlock()
		return fmt.Errorf("proclaim %q: %w", e.name, ErrNotLeader)
	}
	e.seq++
	seq := e.seq
	e.mu.Unlock()
	if end := l.ended(); end != nil {
		return fmt.Errorf("proclaim %q: %w: %w", e.name, ErrNotLeader, end)
	}
	held, err := l.c.be.Each(ctx, "proclaimed", l.c.cfg.TTL, func(ctx context.Context, _ int, n *node.Node) (bool, error) {
		v, err := n.Int(ctx, script.Announce, node.AnnounceArgs(&l.c.cfg.Config, &l.ref, "proclaimed", l.token, seq, value, n.Publish(ctx, l.ref.Channel)))
		return v == 1, err
	})
	if err != nil {
		// Some nodes may have the value, and a majority may not: what
		// the leader announces is unknown until it proclaims again, so
		// that Campaign with any value does.
		e.mu.Lock()
		if e.lease == l {
			e.value = ""
		}
		e.mu.Unlock()
		return fmt.Errorf("proclaim %q: %w", e.name, err)
	}
	if !held {
		l.lose(ctx, errGone)
		return fmt.Errorf("proclaim %q: %w: %w", e.name, ErrNotLeader, l.ended())
	}
	e.mu.Lock()
	if e.lease == l {
		e.value = value
	}
	e.mu.Unlock()
	return nil
}

// Resign ends this candidate's leadership, if it leads: it releases the
// lease (see Lease.Release), which deletes the lock and the leader's
// record at once and wakes the waiting candidates, so one of them leads
// within a few round trips rather than at the TTL. It returns nil if
// this Election does not lead, and an error wrapping ErrLeaseLost if its
// leadership had been lost. A Resign that reached no decision (a network
// or Redis error) may be called again.
func (e *Election) Resign(ctx context.Context) error {
	if err := e.c.check(e.name); err != nil {
		return err
	}
	e.mu.Lock()
	l := e.lease
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	decided, err := l.settle(ctx)
	if decided {
		e.mu.Lock()
		if e.lease == l {
			e.lease, e.value = nil, ""
		}
		e.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("resign: %w", err)
	}
	return nil
}

// Leader returns who leads the election now. Any Election of the name
// can ask, whether it campaigns or not. If nobody leads (the lock is
// free, or held by a lease that did not campaign), the error wraps
// ErrNoLeader.
//
// On a quorum Client, a leader is one whose record a majority of nodes
// hold with its lock, and its value the latest that a majority of those
// nodes accepted, as their records and histories say (a Proclaim that
// reached a minority only does not count);
// the nodes are read at once, and Leader returns as soon as the answers
// decide both. The highest term among the nodes that answer
// is not enough: a node left over with a leader that resigned or lost its
// majority would report a leader that is not one. If too few nodes
// answer to decide, the error wraps ErrNoQuorum.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.c.check(e.name); err != nil {
		return Leader{}, err
	}
	views := e.read(ctx, nil, false)
	v := election.Leading(views)
	switch {
	case !v.Decided:
		return Leader{}, undecided(ctx, "leader", e.name, electionErrs(views))
	case v.Leader.Term == 0:
		return Leader{}, fmt.Errorf("leader %q: %w", e.name, ErrNoLeader)
	}
	return Leader(v.Leader), nil
}

// check validates the Election and a value to announce.
func (e *Election) check(value string) error {
	if err := e.c.check(e.name); err != nil {
		return err
	}
	return checkValue(value)
}

// checkValue reports whether value can be announced: 1 to MaxValueLen
// bytes of UTF-8, so that it prints and encodes as JSON as it is.
func checkValue(value string) error {
	if value == "" || len(value) > MaxValueLen {
		return fmt.Errorf("%w: election value length %d not in [1, %d]", ErrInvalid, len(value), MaxValueLen)
	}
	if !utf8.ValidString(value) {
		return fmt.Errorf("%w: election value is not valid UTF-8", ErrInvalid)
	}
	return nil
}
