package fencelock

import (
	"fmt"
	"log/slog"
	"time"
)

// Limits on Options and lock names. They exist to turn mistakes (a TTL in
// the wrong unit, a name built from unbounded input) into clear errors.
const (
	// MinTTL and MaxTTL bound Options.TTL.
	MinTTL = 10 * time.Millisecond
	MaxTTL = 24 * time.Hour

	// MaxNameLen is the longest lock name, in bytes.
	MaxNameLen = 512

	// MaxLockDelay bounds Options.LockDelay. A name kept from everyone for
	// longer than an hour after a crash is better left to an operator.
	MaxLockDelay = time.Hour
)

// Options configure a Client. A nil *Options is valid and selects every
// default.
type Options struct {
	// TTL is how long a lease stays valid in Redis without renewal.
	// It must lie between MinTTL and MaxTTL.
	// Default: 10s.
	TTL time.Duration

	// RenewInterval is how often a held lease is renewed in the
	// background. A negative value disables the background renewal: the
	// holder then calls Lease.Renew itself, and the lease is lost when its
	// Deadline passes. It must be shorter than the TTL.
	// Default: TTL/3.
	RenewInterval time.Duration

	// RetryInterval bounds how long Acquire waits between attempts when no
	// release wakes it: a lock that expires, rather than being released,
	// publishes nothing. Waiters also retry when the holder's TTL runs
	// out, whichever is sooner. Jitter is added.
	// Default: 500ms.
	RetryInterval time.Duration

	// Prefix is prepended to every Redis key and channel.
	// Default: "fencelock:".
	Prefix string

	// MinReplicas, if positive, makes each acquisition wait (WAIT) until
	// that many replicas acknowledged it. If fewer do within
	// ReplicaTimeout, the lock is released and the acquisition fails with
	// ErrNotReplicated. This narrows, but does not close, the window in
	// which a failover loses the lock: replication stays asynchronous.
	// Default: 0 (no WAIT).
	MinReplicas int

	// ReplicaTimeout is how long an acquisition waits for MinReplicas.
	// It must be shorter than the TTL.
	// Default: 1s, or TTL/4 if that is shorter.
	ReplicaTimeout time.Duration

	// NodeTimeout bounds each node's request in a round of a Client from
	// NewQuorum (acquire, write-back, renew, release), as Redlock's rule
	// has it: small against the TTL, so that a node that stops answering
	// (a paused process, a lost network) costs a round at most this long
	// rather than the Redis client's read timeout, and an acquisition
	// decided without it keeps most of its validity. A node that does not
	// answer in time counts as failed. With MinReplicas, ReplicaTimeout is
	// added to the default. It must be shorter than the TTL less the drift
	// allowance. A Client from New ignores it: its requests end with their
	// context.
	// Default: TTL/10, at most 500ms.
	NodeTimeout time.Duration

	// TokenRetention is how long the per-lock token counter is kept after
	// its lock was last used: each acquisition and renewal sets the
	// counter to expire TokenRetention after the lock itself would, so a
	// counter lapses only once its lock has been unused that long, never
	// while a lease is held nor when a lease expires. Tokens stay increasing when it lapses, thanks to the clock
	// floor (the token is never below the server's time in microseconds),
	// unless the server's clock is then behind the last token: retention
	// bounds memory at that price. A negative value keeps counters
	// forever. It must be at least the TTL.
	// Default: 24h.
	TokenRetention time.Duration

	// LockDelay, if positive, keeps a lock from being acquired again for
	// that long after a lease of this Client ends by expiry rather than by
	// Release (Chubby's lock-delay): a holder that crashed, hung or was
	// cut off leaves its delayed requests time to drain before the next
	// holder starts, for a resource that cannot check fencing tokens.
	// Release, and Resign, skip the delay. The server's script enforces
	// it, on the server's clock: every acquirer waits it out, whatever its
	// own LockDelay, except a retried request of the lease itself. It is
	// no guarantee (see FAILURE_MODEL.md: a failover, a restart without
	// persistence or a step of the server's clock can cut it short);
	// fencing tokens are. A lease handed to another process must be
	// renewed and released there by a Client with the same LockDelay
	// (Client.Attach). It must lie between 1ms and MaxLockDelay, or be 0.
	// Default: 0 (no delay).
	LockDelay time.Duration

	// Hooks, if set, receives an event for each acquisition attempt and
	// result, renewal, loss and release; see Hooks. It is copied by New.
	// Default: nil (no events, at no cost).
	Hooks *Hooks

	// Logger, if set, logs lost leases (Warn), failed renewals (Warn) and
	// the fallbacks that covered for a failure: a renewal that succeeded
	// after failures (Info), an Acquire attempt retried after a Redis or
	// network error (Warn). Records name the lock, lease ID and token,
	// never the lease's secret.
	// Default: nil (no logging).
	Logger *slog.Logger
}

// config is Options with defaults applied and derived values computed.
type config struct {
	ttl, renewEvery, retry, replicaTimeout, retention, drift time.Duration
	lockDelay                                                time.Duration
	nodeTimeout                                              time.Duration
	prefix                                                   string
	minReplicas                                              int
	hooks                                                    *Hooks
	logger                                                   *slog.Logger
	opts                                                     Options // as given, Hooks copied: Client.WithTTL starts from it

	// The scripts' numeric arguments, in milliseconds, boxed once.
	counterTTL           time.Duration // the counter's expiry at each use: retention + TTL, 0 to keep it
	ttlArg, retentionArg any           // ttl and counterTTL in ms, boxed once
	delayArg             any           // the delay key's expiry, TTL + LockDelay, in ms; 0 for no delay
}

// Keys and channel: the lock (prefix{name}), its token counter
// (prefix{name}:token) and its release channel share a hash tag, so one
// script can touch them all on Cluster. The commands of
// an attempt and its lease take them from a lockRef (lockref.go), made in
// one allocation; these are for the rest.
func (c *config) lockKey(name string) string  { return c.prefix + "{" + name + "}" }
func (c *config) tokenKey(name string) string { return c.prefix + "{" + name + "}:token" }
func (c *config) channel(name string) string  { return c.prefix + "{" + name + "}:released" }
func (c *config) delayKey(name string) string { return c.prefix + "{" + name + "}:delay" }

// Validate reports whether New would accept o, with the error, wrapping
// ErrInvalid, that every call on such a Client would return: a
// configuration read at start-up can be checked before any Client is
// made. A nil *Options is valid.
func (o *Options) Validate() error {
	_, err := o.config()
	return err
}

func (o *Options) config() (config, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	c := config{
		ttl:            opts.TTL,
		renewEvery:     opts.RenewInterval,
		retry:          opts.RetryInterval,
		replicaTimeout: opts.ReplicaTimeout,
		nodeTimeout:    opts.NodeTimeout,
		retention:      opts.TokenRetention,
		prefix:         opts.Prefix,
		minReplicas:    opts.MinReplicas,
		lockDelay:      opts.LockDelay,
		logger:         opts.Logger,
	}
	if opts.Hooks != nil {
		h := *opts.Hooks // later changes by the caller must not race with events
		c.hooks = &h
	}
	c.opts = opts
	c.opts.Hooks = c.hooks
	if c.ttl == 0 {
		c.ttl = 10 * time.Second
	}
	if c.ttl < MinTTL || c.ttl > MaxTTL {
		return c, fmt.Errorf("%w: TTL %v outside [%v, %v]", ErrInvalid, c.ttl, MinTTL, MaxTTL)
	}
	// Redis and the client clocks may run at slightly different rates;
	// the local deadline ends this much before the server's expiry.
	c.drift = c.ttl/100 + 2*time.Millisecond
	if c.renewEvery == 0 {
		c.renewEvery = c.ttl / 3
	}
	if c.renewEvery >= c.ttl-c.drift {
		return c, fmt.Errorf("%w: RenewInterval %v not shorter than TTL %v", ErrInvalid, c.renewEvery, c.ttl)
	}
	if c.retry == 0 {
		c.retry = 500 * time.Millisecond
	}
	if c.retry < 0 {
		return c, fmt.Errorf("%w: negative RetryInterval %v", ErrInvalid, c.retry)
	}
	if c.prefix == "" {
		c.prefix = "fencelock:"
	}
	if c.minReplicas < 0 {
		return c, fmt.Errorf("%w: negative MinReplicas %d", ErrInvalid, c.minReplicas)
	}
	if c.replicaTimeout == 0 {
		c.replicaTimeout = min(time.Second, c.ttl/4)
	}
	if c.replicaTimeout < time.Millisecond || c.replicaTimeout >= c.ttl {
		return c, fmt.Errorf("%w: ReplicaTimeout %v not in [1ms, TTL %v)", ErrInvalid, c.replicaTimeout, c.ttl)
	}
	if c.nodeTimeout == 0 {
		c.nodeTimeout = min(c.ttl/10, 500*time.Millisecond)
		if c.minReplicas > 0 {
			c.nodeTimeout += c.replicaTimeout
		}
		c.nodeTimeout = min(c.nodeTimeout, c.ttl-c.drift-time.Millisecond)
	}
	if c.nodeTimeout <= 0 || c.nodeTimeout >= c.ttl-c.drift {
		return c, fmt.Errorf("%w: NodeTimeout %v not in (0, TTL %v less drift %v)", ErrInvalid, c.nodeTimeout, c.ttl, c.drift)
	}
	switch {
	case c.retention == 0:
		c.retention = 24 * time.Hour
	case c.retention < 0:
		c.retention = 0 // the script's "keep forever"
	case c.retention < c.ttl:
		return c, fmt.Errorf("%w: TokenRetention %v shorter than TTL %v", ErrInvalid, c.retention, c.ttl)
	}
	// Below a millisecond the scripts would read the delay as none.
	if c.lockDelay != 0 && (c.lockDelay < time.Millisecond || c.lockDelay > MaxLockDelay) {
		return c, fmt.Errorf("%w: LockDelay %v neither 0 nor in [1ms, %v]", ErrInvalid, c.lockDelay, MaxLockDelay)
	}
	// The counter is kept for the retention after its lock's last use,
	// which lasts until the lock's expiry: a TTL from the acquisition or
	// renewal that writes the counter's expiry. A lock taken over by
	// expiry then still finds its counter, even with TokenRetention = TTL.
	if c.retention > 0 {
		c.counterTTL = c.retention + c.ttl
	}
	c.ttlArg, c.retentionArg = c.ttl.Milliseconds(), c.counterTTL.Milliseconds()
	c.delayArg = int64(0)
	if c.lockDelay > 0 {
		c.delayArg = (c.ttl + c.lockDelay).Milliseconds()
	}
	return c, nil
}

// CheckName reports whether name can be the name of a lock (or of an
// election): 1 to MaxNameLen bytes of printable ASCII, without braces. It
// is the check that every call of a Client makes before it sends
// anything; the error wraps ErrInvalid. A program that takes names from
// outside (a command line, a request) can use it to reject a bad one
// before it connects.
func CheckName(name string) error { return checkName(name) }

// checkName reports whether name can be a lock name: 1 to MaxNameLen
// bytes of printable ASCII, without braces. Braces would break the hash
// tag that keeps the lock and its token in one Cluster slot, and the
// fence text form carries the name as an RFC 8941 string, which is
// printable ASCII only.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: lock name length %d not in [1, %d]", ErrInvalid, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e || c == '{' || c == '}' {
			return fmt.Errorf("%w: lock name %q: byte %#x at %d is not printable ASCII other than braces", ErrInvalid, name, c, i)
		}
	}
	return nil
}
