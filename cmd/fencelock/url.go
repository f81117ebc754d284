package main

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTarget is what --redis names: exactly one of a single node, a
// master found through Sentinels, or a Cluster.
type redisTarget struct {
	node     *redis.Options         // redis://, rediss://, unix://
	failover *redis.FailoverOptions // redis+sentinel://, rediss+sentinel://
	cluster  *redis.ClusterOptions  // redis+cluster://, rediss+cluster://

	// seen records the TLS handshakes of the target's connections, for
	// doctor; nil without TLS.
	seen *tlsSeen
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

// setDialTimeout lowers go-redis's dial timeout to d, so that one dial
// cannot outlast --timeout.
func (t *redisTarget) setDialTimeout(d time.Duration) {
	set := func(p *time.Duration) {
		if *p == 0 || *p > d {
			*p = d
		}
	}
	switch {
	case t.failover != nil:
		set(&t.failover.DialTimeout)
	case t.cluster != nil:
		set(&t.cluster.DialTimeout)
	default:
		set(&t.node.DialTimeout)
	}
}

// honourDeadlines makes go-redis stop waiting for a reply when the
// request's context ends, not only after its ReadTimeout: a renewal sent
// to a frozen Redis must not outlive the lease's deadline, nor keep
// Release (which waits for it) and run waiting.
func (t *redisTarget) honourDeadlines() {
	switch {
	case t.failover != nil:
		t.failover.ContextTimeoutEnabled = true
	case t.cluster != nil:
		t.cluster.ContextTimeoutEnabled = true
	default:
		t.node.ContextTimeoutEnabled = true
	}
}

// redisOptions turns a URL into client options: a single node
// (redis.ParseURL), Sentinel (redis.ParseFailoverURL) or Cluster
// (redis.ParseClusterURL). Errors are usage errors and never contain the
// URL's password, nor a password among its query options. The clients
// set no client name: CLIENT SETNAME would need a permission beyond the
// library's least-privilege rule (fencelock.ACLRule), which is all that
// fencelock needs.
func redisOptions(raw string, getenv func(string) string) (*redisTarget, error) {
	if hostPort(raw) {
		// As redis-cli's -h and -p, or a Docker port mapping, write it;
		// without @, it shows no password.
		return nil, usageErrorf("--redis %s: not a URL: write redis://%[1]s", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the input, which may hold a password.
		return nil, usageErrorf("--redis: not a URL")
	}
	if _, err := url.ParseQuery(u.RawQuery); err != nil {
		// go-redis would drop the pairs that do not parse, silently; the
		// error would quote them.
		return nil, usageErrorf("--redis %s: the options after ? do not parse: write key=value pairs joined by &, with %%XX escapes", redact(u))
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
		// The redacted URL shows the scheme; quoting it again would repeat
		// a password that was typed where the scheme goes.
		return nil, usageErrorf("--redis %s: unsupported scheme; use redis://, rediss:// (TLS), unix://, redis+sentinel:// or redis+cluster://", redact(u))
	}
}

func nodeOptions(raw string, u *url.URL, getenv func(string) string) (*redisTarget, error) {
	if u.Scheme != "unix" && u.Port() != "" && !validPort(u.Port()) {
		return nil, usageErrorf("--redis %s: port %q is not a number from 1 to 65535", redact(u), u.Port())
	}
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
		_, port, err := net.SplitHostPort(h)
		if err != nil {
			return nil, usageErrorf("--redis %s: want host:port[,host:port...] before the path", redact(u))
		}
		if !validPort(port) {
			return nil, usageErrorf("--redis %s: port %q is not a number from 1 to 65535", redact(u), port)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// hostPort reports whether s is a bare host:port (or [IPv6]:port), which
// is not a URL.
func hostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || !validPort(port) {
		return false
	}
	if net.ParseIP(host) != nil {
		return true
	}
	return strings.Trim(strings.ToLower(host), "abcdefghijklmnopqrstuvwxyz0123456789.-_") == ""
}

// validPort reports whether s is a TCP port number, 1 to 65535.
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && strings.Trim(s, "0123456789") == "" && n >= 1 && n <= 65535
}

// parseError reports a go-redis parse error as a usage error, with the
// URL's password masked wherever the error repeats it.
func parseError(u *url.URL, err error) error {
	msg := err.Error()
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	for _, pw := range querySecrets(u.RawQuery) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	return usageErrorf("--redis %s: %s", redact(u), msg)
}
