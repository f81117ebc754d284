package fencelock

import (
	"fmt"
	"time"
)

// WithTTL returns a Client whose leases have the given TTL, for a lock
// that needs a longer or shorter one than the rest, without a second
// Client: it shares c's Redis clients, its subscription for wake-ups
// (its waiters queue with c's, and a release through either wakes
// both), its keeper (one timer renews the leases of both) and its Hooks
// and Logger. Making one is cheap, a few allocations and no request, so
//
//	l, err := locks.WithTTL(time.Minute).Acquire(ctx, "reports:nightly")
//
// serves as a TTL per acquisition. On a single deployment the keeper
// renews the leases of one Client, a WithTTL one included, in shared
// pipelines; a program that holds many leases with one TTL keeps its
// WithTTL Client rather than making one per acquisition.
//
// Everything else comes from the Options c was made with, as if New had
// been given them with TTL replaced: what they left at its default
// follows the new TTL (RenewInterval TTL/3, ReplicaTimeout 1s or TTL/4,
// the allowance for clock drift TTL/100 + 2ms), and what they set stays
// and must suit it (RenewInterval and ReplicaTimeout shorter than the
// TTL, TokenRetention at least the TTL). A ttl outside [MinTTL, MaxTTL]
// (0 included: it means no default here), such a conflict, or an error
// of c itself, is reported, wrapping ErrInvalid, by every call on the
// returned Client, which then sends nothing.
//
// Elections from the returned Client campaign with its TTL; Holder and
// Observe read what any Client wrote. A lease handed to another process
// (Lease.Secret, Client.Attach) is renewed there with the TTL of the
// Client that attaches it: attach through a WithTTL Client of the same
// TTL.
func (c *Client) WithTTL(ttl time.Duration) *Client {
	opts := c.cfg.opts
	opts.TTL = ttl
	v := &Client{hub: c.hub, keep: c.keep, err: c.err}
	cfg, err := opts.config()
	if ttl == 0 {
		err = fmt.Errorf("%w: TTL %v outside [%v, %v]", ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	v.cfg = cfg
	v.cfg.hooks = c.cfg.hooks
	if v.err == nil {
		v.err = err
	}
	if rb, ok := c.be.(rebinder); ok {
		v.be, v.el = rb.withConfig(&v.cfg)
	}
	return v
}

// A rebinder is a backend that can serve another Client's configuration
// over the same connections: the lock backends are, an election's
// leadership is not (its Client is internal to a Campaign).
type rebinder interface {
	// withConfig returns the rebound backend, and it as elections use
	// it: a Client needs both.
	withConfig(cfg *config) (backend, electorate)
}

// withConfig returns a node on n's Redis client and capabilities cache
// that sends cfg's TTL and retention.
func (n *node) withConfig(cfg *config) (backend, electorate) {
	v := n.rebound(cfg)
	return v, v
}

func (n *node) rebound(cfg *config) *node {
	return &node{rdb: n.rdb, cluster: n.cluster, cfg: cfg, caps: n.caps, batches: n.batches}
}

// withConfig returns a quorum of q's nodes, rebound to cfg. Its record of
// attempts in flight is its own: a lease renews and releases through the
// backend that acquired it.
func (q *quorum) withConfig(cfg *config) (backend, electorate) {
	v := &quorum{cfg: cfg, nodes: make([]*node, 0, len(q.nodes))}
	for _, n := range q.nodes {
		v.nodes = append(v.nodes, n.rebound(cfg))
	}
	return v, v
}
