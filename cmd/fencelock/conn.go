package main

import (
	"context"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const defaultRedisURL = "redis://127.0.0.1:6379"

// redisURLHelp is --redis's help in each command's -h; "fencelock -h"
// and docs/cli.md's REDIS_URL row list every URL form.
const redisURLHelp = "Redis `URL`: redis://host:port[/db], rediss:// (TLS), unix:///path,\n" +
	"      redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER or redis+cluster://HOST:PORT[,HOST:PORT...]\n" +
	"      (every form: fencelock -h)"

// defaultTimeout bounds connecting and each request that does not wait
// for a lock; go-redis's own dial timeout is the same.
const defaultTimeout = 5 * time.Second

// conn holds the connection and lock flags that most commands share.
type conn struct {
	url     string
	tls     tlsFlags
	prefix  string
	ttl     time.Duration // 0 for commands without --ttl
	delay   time.Duration // --lock-delay, 0 for none
	timeout time.Duration
	hooks   *fencelock.Hooks // for the lock client, if set
}

// addConn registers --redis, the TLS flags, --prefix and --timeout on cmd.
func (cn *conn) addConn(cmd *command) {
	cmd.fs.StringVar(&cn.url, "redis", defaultRedisURL, redisURLHelp)
	cmd.fromEnv("redis", "REDIS_URL")
	cn.tls.add(cmd)
	cmd.fs.StringVar(&cn.prefix, "prefix", "fencelock:", "`prefix` of every lock key, as in fencelock.Options.Prefix")
	cmd.fromEnv("prefix", "FENCELOCK_PREFIX")
	cmd.duration(&cn.timeout, "timeout", defaultTimeout, "how long to wait for Redis to answer when connecting (through the Sentinels, if any)\n      and for each request that does not wait for the lock (a `duration`)")
	cmd.fromEnv("timeout", "FENCELOCK_TIMEOUT")
}

// addTTL registers --ttl on cmd; envs are the environment variables that
// may set it, the first set winning.
func (cn *conn) addTTL(cmd *command, envs ...string) {
	cmd.duration(&cn.ttl, "ttl", 10*time.Second, "lease TTL (a `duration`): how long the lock outlives its holder without renewal")
	cmd.fromEnv("ttl", envs...)
}

// addLockDelay registers --lock-delay, and FENCELOCK_LOCK_DELAY, on cmd.
func (cn *conn) addLockDelay(cmd *command) {
	cmd.duration(&cn.delay, "lock-delay", 0, "after a lease ends by expiry rather than release, keep the lock from every acquirer\n      this much longer (a `duration`; fencelock.Options.LockDelay): time for a crashed\n      holder's delayed requests to drain. No safety guarantee (default 0: none)")
	cmd.fromEnv("lock-delay", "FENCELOCK_LOCK_DELAY")
}

// check validates the flags without connecting, so usage errors come
// before any network traffic.
func (cn *conn) check(cmd *command) (*redisTarget, error) {
	// The library decides which TTLs it accepts; a zero one, which Options
	// would take for the default, is a mistake on the command line.
	if cn.delay != 0 {
		if err := cmd.durationIn("lock-delay", cn.delay, time.Millisecond, fencelock.MaxLockDelay); err != nil {
			return nil, err
		}
	}
	if cmd.fs.Lookup("ttl") != nil && (cn.ttl == 0 || cn.options(true).Validate() != nil) {
		return nil, usageErrorf("%s: want a duration from %s to %s, e.g. 30s", cmd.source("ttl"), shortDuration(fencelock.MinTTL), shortDuration(fencelock.MaxTTL))
	}
	if err := cmd.durationIn("timeout", cn.timeout, time.Millisecond, time.Hour); err != nil {
		return nil, err
	}
	if cn.prefix == "" {
		return nil, usageErrorf("--prefix must not be empty")
	}
	t, err := redisOptions(cn.url, cmd.c.getenv)
	if err != nil {
		return nil, err
	}
	if err := cn.tls.apply(cmd, t); err != nil {
		return nil, err
	}
	t.setDialTimeout(cn.timeout)
	t.honourDeadlines()
	return t, nil
}

// request returns a context for one request that does not wait for a
// lock: bounded by --timeout.
func (cn *conn) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cn.timeout)
}

// locks returns the lock client on rdb for cn's flags; renew says
// whether leases are renewed in the background.
func (cn *conn) locks(rdb redis.UniversalClient, renew bool) *fencelock.Client {
	return fencelock.New(rdb, cn.options(renew))
}

// options returns the lock client's Options for cn's flags.
func (cn *conn) options(renew bool) *fencelock.Options {
	o := &fencelock.Options{TTL: cn.ttl, Prefix: cn.prefix, Hooks: cn.hooks, LockDelay: cn.delay}
	if !renew {
		o.RenewInterval = -1
	}
	return o
}
