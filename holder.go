package fencelock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

var (
	//go:embed lua/holder.lua
	holderLua string
	holderRun = newRunner(holderLua)
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
}

// Holder returns who holds the lock named name now: the holder's public
// lease ID, its token and the lock's remaining TTL, read by one script
// from the lock's keys. The owner secret, which only the holder has, is
// read too (the lease ID is derived from it) but goes no further. If no
// lease holds the lock, the error wraps ErrNotHeld.
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
	views := c.readHolder(ctx, name)
	h, held, decided := decideHolder(views)
	switch {
	case !decided:
		return Holder{}, c.holderUndecided(ctx, "holder", name, views)
	case !held:
		return Holder{}, fmt.Errorf("holder %q: %w", name, ErrNotHeld)
	}
	return h, nil
}

// holderUndecided returns the error of a read of name (what: "holder") whose
// views decide nothing: the node's error, or ErrNoQuorum with the
// nodes', and the cause of ctx if it ended the read.
func (c *Client) holderUndecided(ctx context.Context, what, name string, views []holderView) error {
	var err error
	if len(views) == 1 {
		err = fmt.Errorf("%s %q: %w", what, name, views[0].err)
	} else {
		var errs []error
		for i, v := range views {
			if v.err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", i, v.err))
			}
		}
		err = fmt.Errorf("%s %q: %w: %d of %d nodes answered, %d needed: %w",
			what, name, ErrNoQuorum, len(views)-len(errs), len(views), c.majority(), nodeErrors(errs))
	}
	// The end of ctx stops the reads, and go-redis reports a deadline
	// as an I/O timeout, which may come before ctx's own timer: the
	// cause is joined, once.
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done() // due now
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = errors.Join(err, cause)
	}
	return err
}

// holderView is what one node says of a lock (lua/holder.lua).
type holderView struct {
	err     error
	held    bool
	h       Holder // the lease that holds the lock on the node, if held
	counter int64  // the node's token counter, 0 if it has none
}

// readHolder runs lua/holder.lua on every node, at once on a quorum, and
// waits for every answer, up to a quarter of the TTL: the token needs the
// counters of as many nodes as answer (see Holder).
func (c *Client) readHolder(ctx context.Context, name string) []holderView {
	views := make([]holderView, len(c.el.members()))
	for i := range views {
		views[i].err = errPending
	}
	c.el.gather(ctx, c.cfg.ttl/4, func(ctx context.Context, i int, n *node) func() {
		v := c.readHolderNode(ctx, n, name)
		return func() { views[i] = v }
	}, func() bool { return false })
	// Only the end of ctx leaves a node unanswered: it says so.
	for i := range views {
		if views[i].err == errPending {
			views[i].err = context.Cause(ctx)
		}
	}
	return views
}

// readHolderNode runs lua/holder.lua on n.
func (c *Client) readHolderNode(ctx context.Context, n *node, name string) holderView {
	reply, err := holderRun.eval(ctx, n.rdb, append(holderRun.args("2", 2), c.cfg.lockKey(name), c.cfg.tokenKey(name)))
	if err != nil {
		return holderView{err: n.follow(ctx, err)}
	}
	return parseHolder(reply, c.cfg.tokenKey(name))
}

// parseHolder reads lua/holder.lua's reply for the lock whose token key
// is tokenKey.
func parseHolder(reply any, tokenKey string) holderView {
	r, ok := reply.([]any)
	if !ok || len(r) != 3 {
		return holderView{err: fmt.Errorf("fencelock: malformed holder reply of %d fields", len(r))}
	}
	owner, ok1 := r[0].(string)
	pttl, ok2 := r[1].(int64)
	token, ok3 := r[2].(string)
	if !ok1 || !ok2 || !ok3 {
		// Not %v of the reply: it holds the owner secret.
		return holderView{err: fmt.Errorf("fencelock: malformed holder reply (%T, %T, %T)", r[0], r[1], r[2])}
	}
	var v holderView
	if token != "" {
		t, err := strconv.ParseInt(token, 10, 64)
		if err != nil || t <= 0 {
			return holderView{err: fmt.Errorf("fencelock: token key %s holds %q, not a token", tokenKey, token)}
		}
		v.counter = t
	}
	if owner != "" {
		v.held = true
		v.h = Holder{LeaseID: leaseID(owner), Token: v.counter, TTL: time.Duration(pttl) * time.Millisecond}
	}
	return v
}

// decideHolder returns the holder a majority of views agree on (by lease
// ID), whether there is one, and whether the views decide it: nobody
// holds the lock when no lease can have a majority, and errors may leave
// it open.
func decideHolder(views []holderView) (h Holder, held, decided bool) {
	votes := map[string]int{}
	var t tally
	winner := ""
	var counters []int64
	for _, v := range views {
		if v.err != nil {
			t.errs = append(t.errs, v.err)
			continue
		}
		counters = append(counters, v.counter)
		if v.held {
			votes[v.h.LeaseID]++
			if votes[v.h.LeaseID] > t.yes {
				t.yes, winner = votes[v.h.LeaseID], v.h.LeaseID
			}
		}
	}
	t.no = len(counters) - t.yes
	switch t.decide(len(views), keeping) {
	case majorityNo:
		return Holder{}, false, true
	case undecided:
		return Holder{}, false, false
	}
	majority := majority(len(views))
	// The greatest token a majority of counters reach, and how long the
	// lock stays on a majority: the majority-th greatest of each, no
	// expiry counting as the longest.
	slices.Sort(counters)
	h.LeaseID, h.Token = winner, counters[len(counters)-majority]
	var ttls []time.Duration
	for _, v := range views {
		if v.err == nil && v.held && v.h.LeaseID == winner {
			ttl := v.h.TTL
			if ttl < 0 {
				ttl = math.MaxInt64
			}
			ttls = append(ttls, ttl)
		}
	}
	slices.Sort(ttls)
	if h.TTL = ttls[len(ttls)-majority]; h.TTL == math.MaxInt64 {
		h.TTL = -time.Millisecond
	}
	return h, true, true
}
