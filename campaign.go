package fencelock

import (
	"context"
	_ "embed"
	"time"
)

var (
	//go:embed lua/campaign.lua
	campaignTail string
	//go:embed lua/announce.lua
	announceLua string
	//go:embed lua/resign.lua
	resignLua string
	//go:embed lua/renew_leader.lua
	renewLeaderLua string

	// lua/campaign.lua runs lua/acquire.lua and lua/announce.lua as functions of
	// their own KEYS and ARGV (parameters that shadow the globals), so
	// the token and the record are issued by one copy of their code.
	campaignLua = "local function acquire(KEYS, ARGV)\n" + acquireLua + "\nend\n" +
		"local function announce(KEYS, ARGV)\n" + announceLua + "\nend\n" + campaignTail

	campaignRun, announceRun  = newRunner(campaignLua), newRunner(announceLua)
	resignRun, renewLeaderRun = newRunner(resignLua), newRunner(renewLeaderLua)
)

// historyLen is how many changes an election's history keeps: an
// observer that misses more (disconnected through that many elections)
// skips the oldest of them.
const historyLen = 64

// An election's keys share the lock's hash tag, so one script can touch
// them all on Cluster.
func (c *config) leaderKey(name string) string      { return c.lockKey(name) + ":leader" }
func (c *config) historyKey(name string) string     { return c.lockKey(name) + ":history" }
func (c *config) changedChannel(name string) string { return c.lockKey(name) + ":changed" }

// leadership is the backend of one Campaign: it takes and keeps the
// election's lock on the Client's nodes as the Client's own backend does,
// and the leader's record and history with it. Leases from the campaign
// renew and release through it, so that the record follows the lock.
type leadership struct {
	cfg   *config
	el    electorate
	value string    // announced at the election
	since time.Time // when the last acquisition attempt began
}

// An electorate is what a campaign needs of the Client's backend, a node
// or a quorum: the election's protocol differs only in how the leader is
// elected, and it sends everything else to each member as locks do.
type electorate interface {
	// members returns the nodes that keep the locks.
	members() []*node
	// elect takes the election's lock for r's owner and writes b's
	// leader record, as acquire does for a lock.
	elect(ctx context.Context, b *leadership, r *lockRef) (int64, time.Duration, error)
	// each sends f to every member and decides as renew and release do:
	// true when a majority answered true, false when a majority cannot,
	// else ErrNoQuorum.
	each(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context, i int, n *node) (bool, error)) (bool, error)
	// acquired returns a channel closed once r's acquire request to
	// member i has ended.
	acquired(i int, r *lockRef) <-chan struct{}
	// gather runs read on every member, for Leader, Observe and
	// Holder, and applies the answers (read's results) on the caller's
	// goroutine until decided reports true (see observe.go).
	gather(ctx context.Context, timeout time.Duration, read func(ctx context.Context, i int, n *node) func(), decided func() bool)
}

func newLeadership(c *Client, value string) *leadership {
	return &leadership{cfg: &c.cfg, el: c.el, value: value}
}

// majority returns how many of the Client's nodes make a majority.
func (c *Client) majority() int {
	return majority(len(c.el.members()))
}

func (b *leadership) acquire(ctx context.Context, r *lockRef) (int64, time.Duration, error) {
	// Attempts are made one after the other by Acquire; the last one's
	// start is the leadership's.
	b.since = time.Now()
	return b.el.elect(ctx, b, r)
}

func (n *node) members() []*node { return []*node{n} }

func (q *quorum) members() []*node { return q.nodes }

// elect, on one node, is one script (campaign).
func (n *node) elect(ctx context.Context, b *leadership, r *lockRef) (int64, time.Duration, error) {
	return b.campaign(ctx, n, r.name, r.owner)
}

// elect, on a quorum, takes the lock as for any lock, then writes the
// record in a round of its own: a quorum's term is chosen after its first
// round, and the record can only follow, within the validity.
func (q *quorum) elect(ctx context.Context, b *leadership, r *lockRef) (int64, time.Duration, error) {
	name, owner := r.name, r.owner
	token, held, err := q.acquire(ctx, r)
	if token == 0 || err != nil {
		return token, held, err
	}
	// The round's requests may outlive this call: they get copies.
	value, since := b.value, b.since
	t := q.round(ctx, b.cfg.ttl-b.cfg.drift-time.Since(since), func(ctx context.Context, i int, n *node) nodeReply {
		if err := afterAcquire(ctx, q, i, r); err != nil {
			return nodeReply{err: err}
		}
		ok, err := b.announce(ctx, n, name, owner, "elected", token, 0, value, since)
		return nodeReply{ok: ok, err: err}
	}, nil)
	switch t.decide(len(q.nodes), taking) {
	case majorityYes:
		return token, 0, nil
	case undecided:
		b.resignAll(ctx, r)
		return 0, 0, q.noQuorum("announced", t)
	}
	b.resignAll(ctx, r) // lost to another campaign meanwhile
	return 0, b.cfg.retry, nil
}

// campaign takes the lock on one node and announces the leader, in one
// script: the lock, the term and the record are written together or not
// at all. It is the lock's acquisition (node.take) with the campaign
// script, and resigning as its cleanup.
func (b *leadership) campaign(ctx context.Context, n *node, name, owner string) (int64, time.Duration, error) {
	cfg := b.cfg
	args := append(campaignRun.args("5", 15), cfg.lockKey(name), cfg.tokenKey(name), cfg.leaderKey(name), cfg.historyKey(name),
		cfg.delayKey(name), owner, cfg.ttl.Milliseconds(), cfg.retentionArg, leaseID(owner), b.value,
		b.since.UnixMicro(), cfg.changedChannel(name), b.publish(ctx, n, name), historyLen, cfg.delayArg)
	return n.take(ctx, cfg.lockKey(name), campaignRun, args, nil, func(ctx context.Context) { b.resign(ctx, n, name, owner) })
}

// publish returns the command that wakes the election's observers and
// candidates from a script on n: sharded on a Cluster whose servers have
// it, as the wake-ups' subscriptions are.
func (b *leadership) publish(ctx context.Context, n *node, name string) string {
	if n.shardedPubSub(ctx, b.cfg.channel(name)) {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// announce writes the leader's record on n, if owner holds the lock there.
func (b *leadership) announce(ctx context.Context, n *node, name, owner, kind string, term, seq int64, value string, since time.Time) (bool, error) {
	cfg := b.cfg
	v, err := announceRun.run(ctx, n.rdb, append(announceRun.args("3", 14),
		cfg.lockKey(name), cfg.leaderKey(name), cfg.historyKey(name),
		owner, kind, term, leaseID(owner), value, seq, since.UnixMicro(),
		cfg.changedChannel(name), b.publish(ctx, n, name), cfg.retentionArg, historyLen))
	return v == 1, n.follow(ctx, err)
}

// proclaim announces a new value of the leadership owner holds with term.
func (b *leadership) proclaim(ctx context.Context, name, owner string, term, seq int64, value string) (bool, error) {
	since := b.since
	return b.el.each(ctx, "proclaimed", b.cfg.ttl, func(ctx context.Context, _ int, n *node) (bool, error) {
		return b.announce(ctx, n, name, owner, "proclaimed", term, seq, value, since)
	})
}

func (b *leadership) renew(ctx context.Context, r *lockRef) (bool, error) {
	owner, cfg := r.owner, b.cfg
	name := r.name
	return b.el.each(ctx, "renewed", cfg.ttl-cfg.drift, func(ctx context.Context, _ int, n *node) (bool, error) {
		v, err := renewLeaderRun.run(ctx, n.rdb, append(renewLeaderRun.args("5", 9),
			cfg.lockKey(name), cfg.tokenKey(name), cfg.leaderKey(name), cfg.historyKey(name), cfg.delayKey(name),
			owner, cfg.ttl.Milliseconds(), cfg.retentionArg, cfg.delayArg))
		return v == 1, n.follow(ctx, err)
	})
}

func (b *leadership) release(ctx context.Context, r *lockRef) (bool, error) {
	return b.el.each(ctx, "released", b.cfg.ttl, b.resignNode(r))
}

// resignAll resigns on every node, best effort, after a failed quorum
// campaign; nodes that hang finish in the background.
func (b *leadership) resignAll(ctx context.Context, r *lockRef) {
	b.el.each(context.WithoutCancel(ctx), "resigned", b.cfg.ttl, b.resignNode(r))
}

// resignNode returns the request that resigns on node i, after the
// campaign's acquire request to that node has ended (see
// quorum.releaseNode).
func (b *leadership) resignNode(r *lockRef) func(ctx context.Context, i int, n *node) (bool, error) {
	name, owner := r.name, r.owner
	return func(ctx context.Context, i int, n *node) (bool, error) {
		if err := afterAcquire(ctx, b.el, i, r); err != nil {
			return false, err
		}
		return b.resign(ctx, n, name, owner)
	}
}

// resign deletes the lock and the record on n if owner holds the lock,
// and wakes the candidates and the observers.
func (b *leadership) resign(ctx context.Context, n *node, name, owner string) (bool, error) {
	cfg := b.cfg
	v, err := resignRun.run(ctx, n.batcher(ctx, cfg.lockKey(name)), append(resignRun.args("4", 10),
		cfg.lockKey(name), cfg.leaderKey(name), cfg.historyKey(name), cfg.delayKey(name),
		owner, cfg.channel(name), cfg.changedChannel(name), b.publish(ctx, n, name),
		cfg.retentionArg, historyLen))
	return v == 1, n.follow(ctx, err)
}

// each, on one node, is f.
func (n *node) each(ctx context.Context, _ string, _ time.Duration, f func(ctx context.Context, i int, n *node) (bool, error)) (bool, error) {
	return f(ctx, 0, n)
}

// acquired: a node's acquire request has ended when its call returned.
func (n *node) acquired(int, *lockRef) <-chan struct{} { return closed }

// each, on a quorum, is a round decided as its renew and release are.
func (q *quorum) each(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context, i int, n *node) (bool, error)) (bool, error) {
	t := q.round(ctx, timeout, func(ctx context.Context, i int, n *node) nodeReply {
		ok, err := f(ctx, i, n)
		return nodeReply{ok: ok, err: err}
	}, nil)
	switch t.decide(len(q.nodes), keeping) {
	case majorityYes:
		return true, nil
	case majorityNo:
		return false, nil
	}
	return false, q.noQuorum(what, t)
}
