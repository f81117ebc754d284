package main

import (
	"net/url"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const defaultRedisURL = "redis://127.0.0.1:6379"

// conn holds the connection and lock flags that most commands share.
type conn struct {
	url    string
	prefix string
	ttl    time.Duration
	hooks  *fencelock.Hooks // for the lock client, if set
}

// addConn registers --redis and --prefix on cmd.
func (cn *conn) addConn(cmd *command) {
	cmd.fs.StringVar(&cn.url, "redis", defaultRedisURL,
		"Redis `URL`: redis://[user:password@]host:port/db, or rediss:// for TLS;\n"+
			"      user and password may come from REDIS_USERNAME and REDIS_PASSWORD instead")
	cmd.fromEnv("redis", "REDIS_URL")
	cmd.fs.StringVar(&cn.prefix, "prefix", "fencelock:", "`prefix` of every lock key, as in fencelock.Options.Prefix")
	cmd.fromEnv("prefix", "FENCELOCK_PREFIX")
}

// addTTL registers --ttl on cmd.
func (cn *conn) addTTL(cmd *command) {
	cmd.fs.DurationVar(&cn.ttl, "ttl", 10*time.Second, "lease TTL (a `duration`): how long the lock outlives its holder without renewal")
	cmd.fromEnv("ttl", "FENCELOCK_TTL")
}

// check validates the flags without connecting, so usage errors come
// before any network traffic.
func (cn *conn) check(getenv func(string) string) (*redis.Options, error) {
	if cn.ttl != 0 {
		if err := durationIn("ttl", cn.ttl, fencelock.MinTTL, fencelock.MaxTTL); err != nil {
			return nil, err
		}
	}
	if cn.prefix == "" {
		return nil, usageErrorf("--prefix must not be empty")
	}
	return redisOptions(cn.url, getenv)
}

// redisOptions turns a URL into client options. It is the seam for other
// deployments: Sentinel (redis.NewFailoverClient) and Cluster
// (redis.NewClusterClient) URL forms belong here, returning a
// redis.UniversalClient; only a single node is supported so far.
func redisOptions(raw string, getenv func(string) string) (*redis.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, which may hold a password.
		return nil, usageErrorf("--redis: not a URL")
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	case "redis+sentinel", "sentinel", "redis+cluster", "cluster":
		return nil, usageErrorf("--redis %s: Sentinel and Cluster URLs are not supported yet; give the master's redis:// URL", u.Redacted())
	default:
		return nil, usageErrorf("--redis %s: scheme %q not supported; use redis://, rediss:// (TLS) or unix://", u.Redacted(), u.Scheme)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, usageErrorf("--redis %s: %v", u.Redacted(), err)
	}
	if opts.Username == "" {
		opts.Username = getenv("REDIS_USERNAME")
	}
	if opts.Password == "" {
		opts.Password = getenv("REDIS_PASSWORD")
	}
	opts.ClientName = "fencelock"
	return opts, nil
}

// locks connects and returns the lock client for cn's flags; renew says
// whether leases are renewed in the background.
func (cn *conn) locks(opts *redis.Options, renew bool) (*fencelock.Client, *redis.Client) {
	rdb := redis.NewClient(opts)
	o := &fencelock.Options{TTL: cn.ttl, Prefix: cn.prefix, Hooks: cn.hooks}
	if !renew {
		o.RenewInterval = -1
	}
	return fencelock.New(rdb, o), rdb
}

// lockKey and tokenKey follow the key layout of DESIGN.md §3, which the
// library uses: the lock name in a hash tag, the counter beside it.
func (cn *conn) lockKey(name string) string  { return cn.prefix + "{" + name + "}" }
func (cn *conn) tokenKey(name string) string { return cn.prefix + "{" + name + "}:token" }

// redactedURL returns the URL with any password replaced by "xxxxx".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}
