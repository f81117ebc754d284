package fencelock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/errs"
	"github.com/fencelock/fencelock/internal/inspect"
	"github.com/fencelock/fencelock/internal/node"
	"github.com/fencelock/fencelock/internal/quorum"
	"github.com/fencelock/fencelock/internal/wake"
	"github.com/fencelock/fencelock/transport"
	"github.com/redis/go-redis/v9"
)

// A Client acquires leases on locks kept in Redis. It is safe for
// concurrent use. A Client holds no connection or goroutine of its own
// while nobody waits in Acquire or follows a lease's Context (see
// Lease.Context).
type Client struct {
	be  backend
	cfg config
	err error // from New: reported by every call
	// rebind returns be for another configuration, over the same
	// connections (WithTTL).
	rebind func(cfg *node.Config) backend

	hub  *wake.Hub // shared with the Clients from WithTTL
	keep *keeper   // shared with them too
}

// A backend keeps the locks: one Redis deployment (node.Node) or a quorum
// of independent masters (quorum.Quorum). Each step takes the attempt's
// or lease's Ref, whose protocol (lock, permit, leadership) says what the
// step runs.
type backend interface {
	// Acquire takes the lock r names for r's owner and returns its token
	// (> 0), or 0 and how long the current holder's lock has left.
	Acquire(ctx context.Context, r *node.Ref) (token int64, held time.Duration, err error)
	// Renew extends the lock if r's owner holds it and reports whether it
	// did.
	Renew(ctx context.Context, r *node.Ref) (bool, error)
	// Release deletes the lock if r's owner holds it, wakes the waiters,
	// and reports whether it deleted.
	Release(ctx context.Context, r *node.Ref) (bool, error)
	// Each sends f to every member and decides as Renew and Release do:
	// true when a majority answered true, false when a majority cannot,
	// else ErrNoQuorum (what names what f did).
	Each(ctx context.Context, what string, timeout time.Duration, f func(ctx context.Context, i int, n *node.Node) (bool, error)) (bool, error)
	// Members returns the nodes that keep the locks: one, or the quorum's.
	Members() []*node.Node
	// Watch calls lost, once, as soon as the lock r names is seen gone
	// or held by another owner, until stop.
	Watch(r *node.Ref, lost func()) (stop func())
}

func init() {
	inspect.Backend = func(c any) any { return c.(*Client).be }
}

// New returns a Client that keeps its locks in rdb: a *redis.Client, a
// Sentinel failover client or a *redis.ClusterClient. A client that wraps
// a *redis.ClusterClient must keep its MasterForKey and ReloadState
// methods (embedding it does): they route WAIT and sharded wake-ups to the
// lock's master and follow failovers. A nil opts selects every default.
// Invalid options or a nil rdb are reported, wrapping ErrInvalid, by
// every call on the Client.
//
// rdb must have ContextTimeoutEnabled set in its options, or the Client
// reports ErrInvalid: go-redis otherwise bounds a request by its
// ReadTimeout and WriteTimeout (3s by default) rather than by its
// context's deadline, so on an unresponsive server a renewal would
// outlive the lease's deadline and a call its context. A client of
// another type, which has no go-redis Options method, is taken as it is:
// it must end requests at their context's deadline itself.
func New(rdb redis.UniversalClient, opts *Options) *Client {
	err := checkRedis(rdb, "Redis client")
	return newClient(transport.GoRedis(rdb), err, opts)
}

// NewTransport is New for a client of another library, carried by conn:
// the modules fencevalkey and fencerueidis call it for valkey-go and
// rueidis clients (see package transport). conn must end every request at
// its context's deadline.
func NewTransport(conn transport.Conn, opts *Options) *Client {
	var err error
	if isNil(conn) {
		err = fmt.Errorf("%w: nil transport", ErrInvalid)
	}
	return newClient(conn, err, opts)
}

// newClient returns the Client of one deployment, reached by conn; err,
// if not nil, is what the caller found wrong with conn.
func newClient(conn transport.Conn, err error, opts *Options) *Client {
	cfg, cerr := opts.config()
	c := &Client{cfg: cfg, err: errs.Join(cerr, err), keep: &keeper{}}
	n := node.New(conn, &c.cfg.Config)
	c.be, c.hub = n, wake.New(n.Members())
	c.rebind = func(cfg *node.Config) backend { return n.WithConfig(cfg) }
	return c
}

// NewQuorum returns a Client that keeps each lock on a majority of nodes,
// independent Redis masters (not replicas of each other, nor one
// failover group), in the manner of Redlock, and issues fencing tokens
// that stay increasing while any minority of nodes fails. It has the same
// API as a Client from New; opts are the same (MinReplicas, if set,
// applies to each node).
//
// Acquiring sends the acquire script to every node at once and needs the
// lock on a majority; each of those nodes issues a token as a single node
// would, raised to a token the client proposes: its clock plus 50 ms, to
// no more than 250 ms ahead of the node's clock. The lease's token is the
// greatest issued. The nodes that issued it have accepted it; it is
// written back to the others with a script that raises a node's counter
// only if it is lower and the attempt holds the lock there. The
// acquisition succeeds only if a majority accepted: each node's counter
// only grows, so a node accepts a given token at most once, and a node
// that restarted empty lost the locks it held, so two acquisitions never
// both get the same token; a later acquisition, whose majority meets the
// earlier one's, always gets a greater one. Nodes whose clocks agree with
// the client's issue the proposal as it is, and the acquisition then takes
// one round trip, not two. An acquisition that fails, or that took longer
// than the TTL less the drift allowance, releases every node. Renewal
// needs a majority, and Release reports the lease lost unless a majority
// deleted the lock.
//
// Tokens stay increasing only while every node keeps what it acknowledged:
// a node that restarts without its data is safe thanks to the clock floor
// (see package doc) if it stays down longer than the 250 ms by which a
// proposal may raise a token above its clock, plus the clocks'
// disagreement; one that reloads an old copy of its data, or a node that
// is a replica promoted in a failover, may let a minority of nodes carry
// the newest token. Waiters in Acquire subscribe to the release channel on
// every node, so one node down does not delay their wake-up.
//
// Invalid options, no nodes, or a node that is nil or lacks
// ContextTimeoutEnabled (see New) are reported, wrapping ErrInvalid, by
// every call on the Client.
func NewQuorum(nodes []redis.UniversalClient, opts *Options) *Client {
	conns := make([]transport.Conn, len(nodes))
	var err error
	for i, rdb := range nodes {
		err = errs.Join(err, checkRedis(rdb, fmt.Sprintf("Redis client for quorum node %d", i)))
		conns[i] = transport.GoRedis(rdb)
	}
	return newQuorum(conns, err, opts)
}

// NewQuorumTransport is NewQuorum for clients of another library, one
// conn per node (see NewTransport).
func NewQuorumTransport(nodes []transport.Conn, opts *Options) *Client {
	var err error
	for i, conn := range nodes {
		if isNil(conn) {
			err = errs.Join(err, fmt.Errorf("%w: nil transport for quorum node %d", ErrInvalid, i))
		}
	}
	return newQuorum(nodes, err, opts)
}

// newQuorum returns the Client of a quorum of nodes; err, if not nil, is
// what the caller found wrong with them.
func newQuorum(nodes []transport.Conn, err error, opts *Options) *Client {
	cfg, cerr := opts.config()
	err = errs.Join(cerr, err)
	if len(nodes) == 0 {
		err = errs.Join(err, fmt.Errorf("%w: no quorum nodes", ErrInvalid))
	}
	c := &Client{cfg: cfg, err: err, keep: &keeper{}}
	members := make([]*node.Node, 0, len(nodes))
	for _, conn := range nodes {
		members = append(members, node.New(conn, &c.cfg.Config))
	}
	q := quorum.New(members, &c.cfg.Config)
	c.be, c.hub = q, wake.New(members)
	c.rebind = func(cfg *node.Config) backend { return q.WithConfig(cfg) }
	return c
}

// checkRedis reports, wrapping ErrInvalid, a nil rdb, or one whose
// go-redis options do not bound requests by their context's deadline.
// what names it in the error.
func checkRedis(rdb redis.UniversalClient, what string) error {
	if isNil(rdb) {
		return fmt.Errorf("%w: nil %s", ErrInvalid, what)
	}
	var enabled bool
	switch o := rdb.(type) {
	case interface{ Options() *redis.Options }: // a Client, a Sentinel failover client
		enabled = o.Options().ContextTimeoutEnabled
	case interface{ Options() *redis.ClusterOptions }:
		enabled = o.Options().ContextTimeoutEnabled
	case interface{ Options() *redis.RingOptions }:
		enabled = o.Options().ContextTimeoutEnabled
	default:
		return nil
	}
	if !enabled {
		return fmt.Errorf("%w: %s without ContextTimeoutEnabled: go-redis would bound its requests by ReadTimeout, not by their context's deadline", ErrInvalid, what)
	}
	return nil
}

// isNil reports whether v is nil, or a nil pointer in an interface: a
// typed nil (a *redis.Client that is nil) is not == nil, and its methods
// would panic.
func isNil(v any) bool {
	return v == nil || reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()
}

// TryAcquire makes one attempt to acquire the lock named name. If another
// lease holds it, the error wraps ErrNotAcquired. The returned lease is
// renewed in the background (see Options.RenewInterval) until Release is
// called or it is lost.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	return c.tryOnce(ctx, name, aLock)
}

// Acquire waits until it holds the lock named name or ctx is done; then
// the error wraps both ErrNotAcquired and context.Cause(ctx). A release
// wakes waiters at once through a subscription the Client shares among
// them; a lock that expires instead wakes them when its TTL runs out, and
// a jittered retry (Options.RetryInterval) covers lost messages. Redis
// errors that a failover or restart may cure (connection loss, READONLY,
// LOADING) are retried in the same way; others are returned at once.
func (c *Client) Acquire(ctx context.Context, name string) (l *Lease, err error) {
	if err := c.check(name); err != nil {
		return nil, err
	}
	return c.acquire(ctx, name, aLock)
}

// A want is what an acquisition attempt takes: a lock, a permit of a
// semaphore, or an election's leadership announcing a value. Each is the
// lock's protocol with parameters (package node's Protocol).
type want struct {
	proto *node.Protocol
	sem   *node.Semaphore // for a permit
	value string          // for a leadership
}

var aLock = &want{proto: node.Lock}

// channel returns the channel that releases publish on for the lock named
// name, which waiters for w subscribe to.
func (c *Client) channel(name string, w *want) string {
	if w.sem != nil {
		return w.sem.Channel
	}
	return c.cfg.Channel(name)
}

// tryOnce is TryAcquire for w: one attempt, reported to the hooks.
func (c *Client) tryOnce(ctx context.Context, name string, w *want) (*Lease, error) {
	var t acquireTrace
	l, _, err := c.try(ctx, name, w, &t)
	err = gaveUp(ctx, name, err)
	t.done(ctx, &c.cfg, name, l, err)
	return l, err
}

// acquire is Acquire for w on the name: the one waiting loop of locks,
// permits (Semaphore.Acquire) and leaderships (Election.Campaign).
func (c *Client) acquire(ctx context.Context, name string, want *want) (l *Lease, err error) {
	t := acquireTrace{waiting: true}
	defer func() { t.done(ctx, &c.cfg, name, l, err) }()
	channel := c.channel(name, want)
	// failing is since when every attempt has failed with an error rather
	// than met a holder: after DownTimeout of them, Acquire gives up.
	var failing time.Time
	var wait time.Duration
	// attempt makes one attempt, and reports whether Acquire is over.
	attempt := func() bool {
		start := time.Now()
		l, wait, err = c.try(ctx, name, want, &t)
		switch {
		case !retryable(ctx, err):
			return true
		case err == nil || errors.Is(err, ErrNotAcquired):
			failing = time.Time{}
		case failing.IsZero():
			failing = start
		}
		if !failing.IsZero() && c.cfg.down > 0 && time.Since(failing) >= c.cfg.down {
			err = fmt.Errorf("%w: every attempt for %v failed (Options.DownTimeout), the last with: %w",
				ErrNotAcquired, time.Since(failing).Round(time.Millisecond), err)
			return true
		}
		return false
	}
	// Queue behind this Client's waiters rather than barge in ahead of them.
	if c.hub.Idle() || !c.hub.Waiting(channel) {
		if attempt() {
			return l, gaveUp(ctx, name, err)
		}
	}
	w := c.hub.Join(ctx, channel, c.cfg.Retry)
	defer c.hub.Leave(channel, w)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for tryNow := true; ; {
		if tryNow && c.hub.Head(channel, w) {
			// Drop a wake from before this attempt; one after it is kept.
			select {
			case <-w.Wake:
			default:
			}
			if attempt() {
				return l, gaveUp(ctx, name, err)
			}
			timer.Reset(c.jitter(wait))
		}
		select {
		case <-w.Wake:
			// After an error, wait out the retry interval: the release
			// that cleans up a failed attempt wakes this waiter too, and
			// would turn a server that keeps failing into a busy loop.
			tryNow = err == nil || errors.Is(err, ErrNotAcquired)
		case <-timer.C:
			tryNow = true
		case <-w.Promoted:
			// The previous head left, most likely holding the lock: its
			// release will wake us; the timer covers its expiry. A
			// semaphore's next waiter tries at once instead: the head
			// took one permit, others may be free.
			tryNow = want.sem != nil
			if !tryNow {
				timer.Reset(c.jitter(c.cfg.Retry))
			}
		case <-ctx.Done():
			if err == nil {
				err = ErrNotAcquired
			}
			return nil, gaveUp(ctx, name, err)
		}
	}
}

// gaveUp returns the error of an attempt (try's), or of an Acquire that
// stops trying: when its context ended, the last attempt's error joined
// with ErrNotAcquired and the context's cause, so that each can be tested
// with errors.Is, on one line.
func gaveUp(ctx context.Context, name string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil:
		return fmt.Errorf("acquire %q: %w", name, err)
	case errors.Is(err, ErrNotAcquired):
		return fmt.Errorf("acquire %q: %w", name, errs.Join(err, context.Cause(ctx)))
	}
	return fmt.Errorf("acquire %q: %w", name, errs.Join(ErrNotAcquired, context.Cause(ctx), err))
}

// Do acquires the lock named name, calls fn with a context and the
// lease's fence, and releases the lease when fn returns or panics (the
// panic then goes on). fn's context ends when the lease is lost (its
// cause wraps ErrLeaseLost) or when ctx ends; fn must stop then. The
// release is sent even if ctx is done by then, bounded by the TTL. The
// error joins fn's error and Release's (which wraps ErrLeaseLost if the
// lease was lost).
func (c *Client) Do(ctx context.Context, name string, fn func(ctx context.Context, f fence.Fence) error) (err error) {
	l, err := c.Acquire(ctx, name)
	if err != nil {
		return err
	}
	return c.hold(ctx, l, fn)
}

// hold calls fn with l's context and fence and releases l after it, for
// Do.
func (c *Client) hold(ctx context.Context, l *Lease, fn func(ctx context.Context, f fence.Fence) error) (err error) {
	fctx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.TTL)
		defer rcancel()
		err = errs.Join(err, l.Release(rctx))
	}()
	return fn(fctx, l.Fence())
}

func (c *Client) check(name string) error {
	if c.err != nil {
		return c.err
	}
	return checkName(name)
}

// try makes one acquisition attempt for w. When the lock is held it
// returns an error wrapping ErrNotAcquired and how long to wait: the
// holder's remaining TTL, capped by the retry interval. Its errors do not
// name the lock: gaveUp does.
func (c *Client) try(ctx context.Context, name string, w *want, t *acquireTrace) (*Lease, time.Duration, error) {
	// The lease is made first, so that its keys and owner value, which
	// the commands send, are part of its allocation.
	l := &Lease{c: c}
	c.cfg.SetRef(&l.ref, w.proto, name, "")
	if w.sem != nil {
		l.ref.UsePermit(w.sem)
	}
	if w.proto == node.Leadership {
		l.ref.UseLead(&c.cfg.Config, w.value)
	}
	start := time.Now() // the validity is measured from before the request
	token, held, err := c.be.Acquire(ctx, &l.ref)
	t.attempt(ctx, &c.cfg, name, start, token, held, err)
	if err != nil {
		return nil, c.cfg.Retry, err
	}
	if token == 0 {
		wait := c.cfg.Retry
		if held > 0 && held < wait {
			wait = held
		}
		if w.sem != nil {
			return nil, wait, fmt.Errorf("%w: all %d permits held", ErrNotAcquired, w.sem.Permits)
		}
		return nil, wait, fmt.Errorf("%w: held by another lease", ErrNotAcquired)
	}
	l.start(ctx, token, start, true)
	return l, 0, nil
}

// jitter spreads waiters' retries: a wait for the holder's TTL ends a
// little after it, a fallback retry anywhere in its second half.
func (c *Client) jitter(wait time.Duration) time.Duration {
	if wait < c.cfg.Retry {
		return wait + rand.N(wait/8+time.Millisecond)
	}
	return wait/2 + rand.N(wait/2+1)
}

// retryable reports whether Acquire should wait and try again after err.
func retryable(ctx context.Context, err error) bool {
	switch {
	case err == nil, ctx.Err() != nil, errors.Is(err, ErrNotReplicated), errors.Is(err, ErrInvalid):
		return false
	case errors.Is(err, ErrNotAcquired):
		return true
	}
	// Server replies that a failover or restart cures, and transport
	// errors (the connection may come back); others (wrong type, script
	// errors) would only repeat.
	return node.Transient(err)
}

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
// TTL, TokenRetention at least the TTL). A ttl of 0 selects the default
// TTL, as in Options. A ttl outside [MinTTL, MaxTTL], such a conflict, or
// an error of c itself, is reported, wrapping ErrInvalid, by every call on
// the returned Client, which then sends nothing.
//
// Elections from the returned Client campaign with its TTL; Holder and
// Observe read what any Client wrote. A lease handed to another process
// (Lease.Secret, Client.Attach) is renewed there with the TTL of the
// Client that attaches it: attach through a WithTTL Client of the same
// TTL.
func (c *Client) WithTTL(ttl time.Duration) *Client {
	opts := c.cfg.opts
	opts.TTL = ttl
	v := &Client{hub: c.hub, keep: c.keep, err: c.err, rebind: c.rebind}
	cfg, err := opts.config()
	v.cfg = cfg
	v.cfg.hooks = c.cfg.hooks
	if v.err == nil {
		v.err = err
	}
	v.be = c.rebind(&v.cfg.Config)
	return v
}
