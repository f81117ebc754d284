package fencelock

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/fencelock/fencelock/internal/election"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/script"
)

// Observe returns a channel of the election's leadership changes, which
// any Election of the name can watch, leading or not. It first sends who
// leads now (the zero Leader if nobody does), then every change in order:
// each new term, each value a leader proclaims (same Term, new Value),
// and the zero Leader when a leadership ends without a successor known
// yet. Terms never decrease. The channel is closed when ctx ends; until
// then the caller must receive from it, or Observe falls behind (the
// changes wait in Redis; see below).
//
// Observe is driven by wake-ups, not polling: the scripts that elect,
// proclaim and resign publish on the election's channel, which the
// Client's shared subscription carries, and a leader that expires
// instead is noticed when its TTL runs out. Each wake-up reads the
// election's history, which Redis keeps (its last 64 changes, for
// TokenRetention), so a change is not missed because a message was: when
// the subscription is re-established after a reconnect, the observer
// reads what happened meanwhile. Without a leader, it also reads at
// least once per TTL (or RetryInterval, if longer), in case a message was
// lost without a reconnect.
//
// On a quorum Client, a change is sent once a majority of nodes has it in
// its history, and the current leader is decided as by Leader.
//
// An invalid name is reported, wrapping ErrInvalid, and no channel is
// returned. Errors while reading (the network, Redis) are retried after
// Options.RetryInterval; Options.Logger, if set, logs them.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := e.c.check(e.name); err != nil {
		return nil, err
	}
	out := make(chan Leader)
	go e.observe(ctx, out)
	return out, nil
}

func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	c := e.c
	channel := c.cfg.ChangedChannel(e.name)
	// Subscribed before the first read, so that no change falls between.
	w := c.hub.Watch(ctx, channel, c.cfg.Retry)
	defer c.hub.Leave(channel, w)
	o := election.NewObserver(len(c.be.Members()))
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Wake:
		case <-timer.C:
		}
		// Drop a wake from before this read; one after it is kept.
		select {
		case <-w.Wake:
		default:
		}
		views := e.read(ctx, o.After(), true)
		changes, v, more := o.Update(views)
		for _, l := range changes {
			select {
			case out <- Leader(l):
			case <-ctx.Done():
				return
			}
		}
		var next time.Duration
		switch {
		case more:
			next = 0
		case !v.Decided:
			if ctx.Err() == nil && c.cfg.logger != nil {
				c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "fencelock: observe read failed, retrying",
					slog.String("election", e.name), slog.Any("error", undecided(ctx, "observe", e.name, electionErrs(views))))
			}
			next = c.jitter(c.cfg.Retry)
		case v.Leader.Term != 0:
			// Read again when the leader's lock would expire: renewed, it
			// will have a new TTL; expired, nobody leads.
			next = v.PTTL + time.Millisecond + rand.N(v.PTTL/32+time.Millisecond)
		default:
			next = c.jitter(max(c.cfg.TTL, c.cfg.Retry))
		}
		timer.Reset(next)
	}
}

// read returns every node's view of the election, with its history
// after after[i] (nil: none). On a quorum it reads the nodes at once.
// Leader (all false) needs only who leads: read returns as soon as a
// majority decides it, within the TTL, and the views of nodes that had
// not answered carry errPending. Observe (all true) needs every history
// read in the same round as the views that decide, lest it send a newer
// term before an older one that a slow node's history would have
// confirmed: read waits for every node, each for up to a quarter of the
// TTL.
func (e *Election) read(ctx context.Context, after []string, all bool) []election.View {
	c := e.c
	members := c.be.Members()
	views := make([]election.View, len(members))
	for i := range views {
		views[i].Err = errPending
	}
	timeout := c.cfg.TTL
	if all {
		timeout /= 4
	}
	if len(members) == 1 {
		timeout = 0
	}
	quorum.Ask(ctx, members, timeout, false, func(ctx context.Context, i int, n *node.Node) election.View {
		from := ""
		if after != nil {
			from = after[i]
		}
		reply, err := n.Eval(ctx, script.Leader, election.ReadArgs(&c.cfg.Config, e.name, from, len(members) > 1))
		if err != nil {
			return election.View{Err: err}
		}
		v, err := election.Parse(reply)
		if err != nil {
			return election.View{Err: err}
		}
		return v
	}, func(i int, v election.View) bool {
		views[i] = v
		return !all && election.Leading(views).Decided
	})
	return views
}

// errPending marks the views of nodes that had not answered when a
// majority had decided.
var errPending = fmt.Errorf("%w: no answer yet", ErrNoQuorum)

// electionErrs returns the views' errors, node by node.
func electionErrs(views []election.View) []error {
	errs := make([]error, len(views))
	for i, v := range views {
		errs[i] = v.Err
	}
	return errs
}
