package fencelock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fencelock/fencelock/internal/node"
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

	// MaxTokenRetention bounds a positive Options.TokenRetention: a
	// century, against which the TTL can be added without overflow. To keep
	// counters forever, make it negative.
	MaxTokenRetention = 100 * 365 * 24 * time.Hour

	// MinInterval is the shortest RenewInterval, RetryInterval and
	// NodeTimeout: below it the library would only keep the server busy.
	MinInterval = time.Millisecond
)

// Options configure a Client. A nil *Options is valid and selects every
// default.
type Options struct {
	// TTL is how long a lease stays valid in Redis without renewal.
	// It must lie between MinTTL and MaxTTL. As for every field here, zero
	// selects the default.
	// Default: 10s.
	TTL time.Duration

	// RenewInterval is how often a held lease is renewed in the
	// background. A negative value disables the background renewal: the
	// holder then calls Lease.Renew itself, and the lease is lost when its
	// Deadline passes. It must lie between MinInterval and the TTL less the
	// drift allowance (Drift), excluded.
	// Default: TTL/3.
	RenewInterval time.Duration

	// RetryInterval bounds how long Acquire waits between attempts when no
	// release wakes it: a lock that expires, rather than being released,
	// publishes nothing. Waiters also retry when the holder's TTL runs
	// out, whichever is sooner. Jitter is added. It must be at least
	// MinInterval.
	// Default: 500ms.
	RetryInterval time.Duration

	// DownTimeout bounds how long Acquire (and Semaphore.Acquire and
	// Election.Campaign) keeps trying while every attempt fails with an
	// error rather than meeting a holder: Redis cannot be reached, refuses
	// connections or the ACL user, or is failing over. Then it returns the
	// last attempt's error, wrapping ErrNotAcquired, even though its
	// context has not ended: a caller whose context never ends
	// (context.Background) learns that Redis is down instead of waiting
	// for ever. Waiting for a held lock is bounded by the context alone. A
	// negative value keeps trying until the context ends. It must be at
	// least RetryInterval.
	// Default: 1m, long enough to ride out a restart, or a Sentinel
	// failover with Sentinel's default down-after-milliseconds (30s).
	DownTimeout time.Duration

	// Prefix is prepended to every Redis key and channel, at most MaxNameLen
	// bytes. A lock's keys share a hash tag, its name ("prefix{name}"), so
	// that a Cluster keeps them in one slot. A Prefix with a hash tag of its
	// own ("{app}:") puts every key of every lock in that tag's slot, on one
	// Cluster master; an empty one ("{}", "jobs{}:") is refused, since a
	// Cluster would then hash each key whole, to different slots.
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
	// added to the default. It must lie between MinInterval and the TTL
	// less the drift allowance (Drift), excluded. A Client from New ignores
	// it: its requests end with their context.
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
	// forever. It must lie between the TTL and MaxTokenRetention.
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

// Drift returns the allowance for clock drift that a lease of the given
// TTL keeps: its Deadline is the TTL less Drift after its acquisition or
// renewal was sent, so that it passes before Redis could grant the lock
// to another holder even if the clocks run at slightly different rates.
// It is TTL/100 + 2ms. A program that must stop work before the
// deadline by a margin of its own (the CLI kills COMMAND this much before
// it) reads it here rather than repeating the rule.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// config is Options with defaults applied and derived values computed:
// what the protocol needs (node.Config) and what the root package's
// leases need beyond it.
type config struct {
	node.Config
	renewEvery time.Duration
	down       time.Duration // DownTimeout; 0 for none
	hooks      *Hooks
	logger     *slog.Logger
	opts       Options // as given, Hooks copied: Client.WithTTL starts from it
}

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
	c := config{renewEvery: opts.RenewInterval, down: opts.DownTimeout, logger: opts.Logger}
	c.TTL, c.Retry, c.ReplicaTimeout, c.NodeTimeout = opts.TTL, opts.RetryInterval, opts.ReplicaTimeout, opts.NodeTimeout
	c.Prefix, c.MinReplicas, c.LockDelay = opts.Prefix, opts.MinReplicas, opts.LockDelay
	retention := opts.TokenRetention
	if opts.Hooks != nil {
		h := *opts.Hooks // later changes by the caller must not race with events
		c.hooks = &h
	}
	c.opts = opts
	c.opts.Hooks = c.hooks
	if c.TTL == 0 {
		c.TTL = 10 * time.Second
	}
	if c.TTL < MinTTL || c.TTL > MaxTTL {
		return c, fmt.Errorf("%w: TTL %v outside [%v, %v]", ErrInvalid, c.TTL, MinTTL, MaxTTL)
	}
	c.Drift = Drift(c.TTL)
	if c.renewEvery == 0 {
		c.renewEvery = c.TTL / 3
	}
	if c.renewEvery >= c.TTL-c.Drift || c.renewEvery > 0 && c.renewEvery < MinInterval {
		return c, fmt.Errorf("%w: RenewInterval %v not in [%v, TTL %v less drift %v)", ErrInvalid, c.renewEvery, MinInterval, c.TTL, c.Drift)
	}
	if c.Retry == 0 {
		c.Retry = 500 * time.Millisecond
	}
	if c.Retry < MinInterval {
		return c, fmt.Errorf("%w: RetryInterval %v shorter than %v", ErrInvalid, c.Retry, MinInterval)
	}
	switch {
	case c.down == 0:
		c.down = time.Minute
	case c.down < 0:
		c.down = 0 // until the context ends
	case c.down < c.Retry:
		return c, fmt.Errorf("%w: DownTimeout %v shorter than RetryInterval %v", ErrInvalid, c.down, c.Retry)
	}
	if c.Prefix == "" {
		c.Prefix = "fencelock:"
	}
	if err := checkPrefix(c.Prefix); err != nil {
		return c, err
	}
	if c.MinReplicas < 0 {
		return c, fmt.Errorf("%w: negative MinReplicas %d", ErrInvalid, c.MinReplicas)
	}
	if c.ReplicaTimeout == 0 {
		c.ReplicaTimeout = min(time.Second, c.TTL/4)
	}
	if c.ReplicaTimeout < time.Millisecond || c.ReplicaTimeout >= c.TTL {
		return c, fmt.Errorf("%w: ReplicaTimeout %v not in [1ms, TTL %v)", ErrInvalid, c.ReplicaTimeout, c.TTL)
	}
	if c.NodeTimeout == 0 {
		c.NodeTimeout = min(c.TTL/10, 500*time.Millisecond)
		if c.MinReplicas > 0 {
			c.NodeTimeout += c.ReplicaTimeout
		}
		c.NodeTimeout = min(c.NodeTimeout, c.TTL-c.Drift-time.Millisecond)
	}
	if c.NodeTimeout < MinInterval || c.NodeTimeout >= c.TTL-c.Drift {
		return c, fmt.Errorf("%w: NodeTimeout %v not in [%v, TTL %v less drift %v)", ErrInvalid, c.NodeTimeout, MinInterval, c.TTL, c.Drift)
	}
	switch {
	case retention == 0:
		retention = 24 * time.Hour
	case retention < 0:
		retention = 0 // the script's "keep forever"
	case retention < c.TTL:
		return c, fmt.Errorf("%w: TokenRetention %v shorter than TTL %v", ErrInvalid, retention, c.TTL)
	case retention > MaxTokenRetention:
		return c, fmt.Errorf("%w: TokenRetention %v longer than %v (a negative TokenRetention keeps counters forever)", ErrInvalid, retention, MaxTokenRetention)
	}
	// Below a millisecond the scripts would read the delay as none.
	if c.LockDelay != 0 && (c.LockDelay < time.Millisecond || c.LockDelay > MaxLockDelay) {
		return c, fmt.Errorf("%w: LockDelay %v neither 0 nor in [1ms, %v]", ErrInvalid, c.LockDelay, MaxLockDelay)
	}
	// The counter is kept for the retention after its lock's last use,
	// which lasts until the lock's expiry: a TTL from the acquisition or
	// renewal that writes the counter's expiry. A lock taken over by
	// expiry then still finds its counter, even with TokenRetention = TTL.
	if retention > 0 {
		c.CounterTTL = retention + c.TTL
	}
	c.TTLArg, c.RetentionArg = c.TTL.Milliseconds(), c.CounterTTL.Milliseconds()
	c.DelayArg = int64(0)
	if c.LockDelay > 0 {
		c.DelayArg = (c.TTL + c.LockDelay).Milliseconds()
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
		switch c := name[i]; {
		case c == '{' || c == '}':
			return fmt.Errorf("%w: lock name %q has a brace at byte %d: braces would break the hash tag that keeps a lock's keys in one Cluster slot", ErrInvalid, name, i)
		case c < 0x20 || c > 0x7e:
			return fmt.Errorf("%w: lock name %q has byte %#x at %d: only printable ASCII is allowed (the fence's text form carries the name)", ErrInvalid, name, c, i)
		}
	}
	return nil
}

// checkPrefix reports whether p can be a Prefix: at most MaxNameLen
// bytes, and no empty hash tag. A Cluster hashes a key by the text
// between its first '{' and the first '}' after it, or the whole key if
// that is empty: a Prefix without a '{', or whose first '{' opens a
// non-empty tag (closed in the Prefix or by the name's '}'), gives every
// key of a lock the same tag.
func checkPrefix(p string) error {
	if len(p) > MaxNameLen {
		return fmt.Errorf("%w: Prefix length %d more than %d", ErrInvalid, len(p), MaxNameLen)
	}
	if i := strings.IndexByte(p, '{'); i >= 0 && i+1 < len(p) && p[i+1] == '}' {
		return fmt.Errorf("%w: Prefix %q has an empty hash tag at byte %d: a Cluster would hash each key of a lock whole, to different slots", ErrInvalid, p, i)
	}
	return nil
}
