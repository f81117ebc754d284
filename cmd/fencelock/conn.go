package main

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const defaultRedisURL = "redis://127.0.0.1:6379"

// redisURLHelp documents --redis; the README's REDIS_URL row says the same.
const redisURLHelp = "Redis `URL`, one of:\n" +
	"        redis://[user:password@]host:port[/db]    one node (rediss:// for TLS, or unix:///path?db=N)\n" +
	"        redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]\n" +
	"                                                  the master that these Sentinels name MASTER\n" +
	"                                                  (rediss+sentinel:// for TLS; user:password are the Sentinels')\n" +
	"        redis+cluster://[user:password@]host:port[,host:port...]\n" +
	"                                                  a Cluster, found from these seed nodes (rediss+cluster:// for TLS)\n" +
	"      More addresses may also come as ?addr=host:port (IPv6: ?addr=[::1]:26379), as go-redis accepts.\n" +
	"      The user and password of a node, a Cluster's nodes or a Sentinel group's master may come from\n" +
	"      REDIS_USERNAME and REDIS_PASSWORD (for redis+sentinel://, only from them)"

// conn holds the connection and lock flags that most commands share.
type conn struct {
	url    string
	prefix string
	ttl    time.Duration
	hooks  *fencelock.Hooks // for the lock client, if set
}

// addConn registers --redis and --prefix on cmd.
func (cn *conn) addConn(cmd *command) {
	cmd.fs.StringVar(&cn.url, "redis", defaultRedisURL, redisURLHelp)
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
func (cn *conn) check(getenv func(string) string) (*redisTarget, error) {
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

// redisTarget is what --redis names: exactly one of a single node, a
// master found through Sentinels, or a Cluster.
type redisTarget struct {
	node     *redis.Options         // redis://, rediss://, unix://
	failover *redis.FailoverOptions // redis+sentinel://, rediss+sentinel://
	cluster  *redis.ClusterOptions  // redis+cluster://, rediss+cluster://
}

// client connects to the target. The failover client is a *redis.Client
// that follows the master the Sentinels name.
func (t *redisTarget) client() redis.UniversalClient {
	switch {
	case t.failover != nil:
		return redis.NewFailoverClient(t.failover)
	case t.cluster != nil:
		return redis.NewClusterClient(t.cluster)
	}
	return redis.NewClient(t.node)
}

// redisOptions turns a URL into client options: a single node
// (redis.ParseURL), Sentinel (redis.ParseFailoverURL) or Cluster
// (redis.ParseClusterURL). Errors are usage errors and never contain the
// URL's password.
func redisOptions(raw string, getenv func(string) string) (*redisTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, which may hold a password.
		return nil, usageErrorf("--redis: not a URL")
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
		return nodeOptions(raw, u, getenv)
	case "redis+sentinel", "rediss+sentinel":
		return sentinelOptions(u, getenv)
	case "redis+cluster", "rediss+cluster":
		return clusterOptions(u, getenv)
	case "sentinel", "cluster":
		return nil, usageErrorf("--redis %s: write redis+%s:// (or rediss+%[2]s:// for TLS)", redact(u), u.Scheme)
	default:
		return nil, usageErrorf("--redis %s: scheme %q not supported; use redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster://", redact(u), u.Scheme)
	}
}

func nodeOptions(raw string, u *url.URL, getenv func(string) string) (*redisTarget, error) {
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, parseError(u, err)
	}
	if opts.Username == "" {
		opts.Username = getenv("REDIS_USERNAME")
	}
	if opts.Password == "" {
		opts.Password = getenv("REDIS_PASSWORD")
	}
	opts.ClientName = "fencelock"
	return &redisTarget{node: opts}, nil
}

// sentinelOptions reads redis+sentinel://[user:pass@]host:port[,host:port...]/MASTER[/db].
// The userinfo authenticates to the Sentinels; the master's user and
// password come from REDIS_USERNAME and REDIS_PASSWORD.
func sentinelOptions(u *url.URL, getenv func(string) string) (*redisTarget, error) {
	hosts, err := hostList(u, "26379")
	if err != nil {
		return nil, err
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if path[0] == "" || len(path) > 2 {
		return nil, usageErrorf("--redis %s: want the master's name as the path: redis+sentinel://host:port[,host:port...]/MASTER[/db]", redact(u))
	}
	q := u.Query()
	for _, k := range []string{"master_name", "username", "password"} {
		if q.Has(k) {
			return nil, usageErrorf("--redis %s: option %q not allowed: the master's name is the URL's path, its user and password come from REDIS_USERNAME and REDIS_PASSWORD", redact(u), k)
		}
	}
	q.Set("master_name", path[0])
	q["addr"] = append(hosts[1:], q["addr"]...)
	g := &url.URL{Scheme: strings.TrimSuffix(u.Scheme, "+sentinel"), User: u.User, Host: hosts[0], RawQuery: q.Encode()}
	if len(path) == 2 {
		g.Path = "/" + path[1]
	}
	opts, err := redis.ParseFailoverURL(g.String())
	if err != nil {
		return nil, parseError(u, err)
	}
	if opts.TLSConfig != nil {
		// go-redis names the first Sentinel as the TLS server for every
		// connection; let each dial check the host it dials instead.
		opts.TLSConfig.ServerName = ""
	}
	opts.Username = getenv("REDIS_USERNAME")
	opts.Password = getenv("REDIS_PASSWORD")
	opts.ClientName = "fencelock"
	return &redisTarget{failover: opts}, nil
}

// clusterOptions reads redis+cluster://[user:pass@]host:port[,host:port...];
// the userinfo (or REDIS_USERNAME and REDIS_PASSWORD) authenticates to
// every node.
func clusterOptions(u *url.URL, getenv func(string) string) (*redisTarget, error) {
	hosts, err := hostList(u, "6379")
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, usageErrorf("--redis %s: a Cluster has only database 0; give no path", redact(u))
	}
	q := u.Query()
	q["addr"] = append(hosts[1:], q["addr"]...)
	c := &url.URL{Scheme: strings.TrimSuffix(u.Scheme, "+cluster"), User: u.User, Host: hosts[0], RawQuery: q.Encode()}
	opts, err := redis.ParseClusterURL(c.String())
	if err != nil {
		return nil, parseError(u, err)
	}
	if opts.TLSConfig != nil {
		opts.TLSConfig.ServerName = "" // as for Sentinel: each node's own host
	}
	if opts.Username == "" {
		opts.Username = getenv("REDIS_USERNAME")
	}
	if opts.Password == "" {
		opts.Password = getenv("REDIS_PASSWORD")
	}
	opts.ClientName = "fencelock"
	return &redisTarget{cluster: opts}, nil
}

// hostList splits the URL's comma-separated host:port list, adding
// defaultPort where a port is missing.
func hostList(u *url.URL, defaultPort string) ([]string, error) {
	var hosts []string
	for h := range strings.SplitSeq(u.Host, ",") {
		hu := &url.URL{Host: h}
		if hu.Hostname() == "" {
			return nil, usageErrorf("--redis %s: want host:port[,host:port...] before the path", redact(u))
		}
		if hu.Port() == "" {
			h = strings.TrimSuffix(h, ":") + ":" + defaultPort
		}
		if _, port, err := net.SplitHostPort(h); err != nil || !allDigits(port) {
			return nil, usageErrorf("--redis %s: want host:port[,host:port...] before the path", redact(u))
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseError reports a go-redis parse error as a usage error, with the
// URL's password masked wherever the error repeats it.
func parseError(u *url.URL, err error) error {
	msg := err.Error()
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return usageErrorf("--redis %s: %s", redact(u), msg)
}

// locks connects and returns the lock client for cn's flags; renew says
// whether leases are renewed in the background.
func (cn *conn) locks(t *redisTarget, renew bool) (*fencelock.Client, redis.UniversalClient) {
	rdb := t.client()
	o := &fencelock.Options{TTL: cn.ttl, Prefix: cn.prefix, Hooks: cn.hooks}
	if !renew {
		o.RenewInterval = -1
	}
	return fencelock.New(rdb, o), rdb
}

// lockKey and tokenKey follow the key layout of DESIGN.md §3, which the
// library uses: the lock name in a hash tag, the counter beside it. Both
// share the hash tag, so on a Cluster they live in one slot.
func (cn *conn) lockKey(name string) string  { return cn.prefix + "{" + name + "}" }
func (cn *conn) tokenKey(name string) string { return cn.prefix + "{" + name + "}:token" }

// redactedURL returns the URL with any password replaced by "xxxxx".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return redact(u)
}

// redact returns u with the password of its userinfo and of a password=
// option replaced by "xxxxx".
func redact(u *url.URL) string {
	if q := u.Query(); q.Has("password") {
		r := *u
		q.Set("password", "xxxxx")
		r.RawQuery = q.Encode()
		return r.Redacted()
	}
	return u.Redacted()
}
