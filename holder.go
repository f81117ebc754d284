package fencelock

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/script"
)

// Holder describes the lease that holds a lock, as Client.Holder reads it.
// It never carries the owner secret.
type Holder struct {
	// LeaseID is the holder's public lease ID (its Lease.ID).
	LeaseID string
	// Token is the lock's current token: the last one issued for the
	// lock, which is the holder's (its Lease.Token). It is 0 if the token
	// counter is gone (deleted or evicted while the lock is held).
	Token int64
	// TTL is how long the lock has left unless it is renewed, as the
	// server counts. It is negative if the lock key has no expiry: it was
	// not set by fencelock.
	TTL time.Duration
	// Delay, if positive, says that no lease holds the lock, but the
	// lock-delay of the lease LeaseID, which expired without a release
	// (Options.LockDelay), keeps it from every acquirer for Delay more.
	// TTL is 0 then.
	Delay time.Duration
}

// Holder returns who holds the lock named name now: the holder's public
// lease ID, its token and the lock's remaining TTL, read by one script
// from the lock's keys. The owner secret, which only the holder has, is
// read too (the lease ID is derived from it) but goes no further. If no
// lease holds the lock, the error wraps ErrNotHeld, unless a lock-delay
// keeps it unavailable: then Holder names the lease that left it, with
// the time it has left as Delay (on a quorum, when the delays keep it
// from a majority of the nodes).
//
// The answer may be out of date by the time the caller reads it: the
// holder can release, lose or renew its lease at any moment. Use it to
// report (a status display, a "held by" message); a write is made safe by
// its fence, never by asking first.
//
// On a quorum Client every node is read at once, and a lease holds the
// lock if a majority of the nodes say so. A lease on a minority only
// (left over from an acquisition that failed, or from a lease that was
// lost) does not hold the lock: it expires by its TTL. TTL is then how
// long the lock stays on a majority of the nodes unless renewed, and
// Token the greatest that a majority of the nodes' counters reach, which
// is the lease's token when every node answers: the token was written to
// a majority, and only a minority (nodes that had not granted the lease
// when it was issued) can have issued a greater one since. With nodes
// down it can be lower, never greater. If too few nodes answer to decide,
// the error wraps ErrNoQuorum.
//
// An invalid name is reported, wrapping ErrInvalid, and nothing is sent.
func (c *Client) Holder(ctx context.Context, name string) (Holder, error) {
	if err := c.check(name); err != nil {
		return Holder{}, err
	}
	args := c.cfg.HolderArgs(name)
	views := readAll(ctx, c.be.Members(), c.cfg.TTL/4, func(ctx context.Context, n *node.Node) node.View {
		reply, err := n.Eval(ctx, script.Holder, append([]any(nil), args...))
		if err != nil {
			return node.View{Err: err}
		}
		return node.ParseHolder(reply, c.cfg.TokenKey(name))
	}, func(err error) node.View { return node.View{Err: err} })
	h, d := quorum.Holder(views)
	switch {
	case d == quorum.Undecided:
		return Holder{}, undecided(ctx, "holder", name, viewErrs(views))
	case d == quorum.MajorityNo && h.Delay <= 0:
		return Holder{}, fmt.Errorf("holder %q: %w", name, ErrNotHeld)
	}
	return Holder(h), nil
}

// readAll runs read on every node (lua/holder.lua, lua/slots.lua), at
// once on a quorum, and waits for every answer, each for up to timeout
// (a single node's, until ctx ends): a lock's token needs the counters of
// as many nodes as answer (see Holder). It returns each node's answer, or
// failed(ctx's cause) for the nodes that had not answered when ctx ended.
func readAll[V any](ctx context.Context, members []*node.Node, timeout time.Duration, read func(ctx context.Context, n *node.Node) V, failed func(error) V) []V {
	if len(members) == 1 {
		timeout = 0
	}
	out := make([]V, len(members))
	answered := make([]bool, len(members))
	quorum.Ask(ctx, members, timeout, false, func(ctx context.Context, _ int, n *node.Node) V {
		return read(ctx, n)
	}, func(i int, v V) bool {
		out[i], answered[i] = v, true
		return false
	})
	for i := range out {
		if !answered[i] {
			out[i] = failed(context.Cause(ctx))
		}
	}
	return out
}

// undecided returns the error of a read (what: "holder", "leader") of
// name whose answers decided nothing, from each node's error (nil for a
// node that answered): the node's error, or on a quorum ErrNoQuorum with
// the nodes'; with ctx's cause joined if it ended the read.
func undecided(ctx context.Context, what, name string, errs []error) error {
	var err error
	if len(errs) == 1 {
		err = errs[0]
	} else {
		// The nodes that answered count as yes: "read on 1 of 3 nodes".
		_, t := quorum.Vote(len(errs), func(i int) (struct{}, bool, error) { return struct{}{}, true, errs[i] })
		err = t.NoQuorum(len(errs), "read")
	}
	return joinCause(ctx, fmt.Errorf("%s %q: %w", what, name, err))
}

// viewErrs returns the views' errors, node by node.
func viewErrs(views []node.View) []error {
	errs := make([]error, len(views))
	for i, v := range views {
		errs[i] = v.Err
	}
	return errs
}
