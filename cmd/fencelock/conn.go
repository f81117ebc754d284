package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const defaultRedisURL = "redis://127.0.0.1:6379"

// redisURLHelp is --redis's help in each command's -h; "fencelock -h"
// and the README's REDIS_URL row list every URL form.
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

// connect makes a client for t and checks, within --timeout, that Redis
// answers: through a Sentinel group, that the Sentinels name a master
// that answers. An unreachable server is reported at once, not after
// go-redis's retries, and not as a lock that could not be acquired.
func (cn *conn) connect(ctx context.Context, t *redisTarget) (redis.UniversalClient, error) {
	rdb := t.client()
	refused, stopRefused := context.WithCancelCause(ctx)
	defer stopRefused(nil)
	w := &dialWatch{refused: stopRefused, single: t.node != nil}
	rdb.AddHook(w)
	pctx, cancel := context.WithTimeoutCause(refused, cn.timeout, errNoAnswer)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	lastDial := w.done()
	if err == nil {
		return rdb, nil
	}
	rdb.Close()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("interrupted (%v) while connecting to %s", context.Cause(ctx), redactedURL(cn.url))
	}
	hint := tlsHint(err)
	if hint == "" {
		hint = t.resetAfterHandshake(err)
	}
	if hint != "" {
		return nil, fmt.Errorf("cannot reach Redis at %s: %v (%s)", redactedURL(cn.url), err, hint)
	}
	if context.Cause(pctx) == errNoAnswer {
		hint := ""
		if t.seen != nil {
			hint = "; a server that does not speak TLS at this port does not answer a TLS client either"
		}
		if lastDial != nil {
			hint = "; the last dial failed: " + lastDial.Error() + hint
		}
		return nil, fmt.Errorf("cannot reach Redis at %s: no answer within --timeout %v (%v)%s", redactedURL(cn.url), cn.timeout, err, hint)
	}
	if cause := context.Cause(refused); cause != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %w", redactedURL(cn.url), cause)
	}
	return nil, fmt.Errorf("cannot reach Redis at %s: %v", redactedURL(cn.url), err)
}

var errNoAnswer = errors.New("no answer within --timeout")

// dialWatch follows the dials of connect's first request. go-redis
// retries a refused dial (for 1.7s in all), and a shorter --timeout then
// hid the refusal behind "no answer": a single node that refuses is
// reported at once (refused is cancelled with the dial's error); through
// Sentinels or a Cluster another address may answer, so the last failed
// dial is only kept for the message. After the first request the hook
// does nothing: the lock client's own retries are its business.
type dialWatch struct {
	refused context.CancelCauseFunc
	single  bool

	mu    sync.Mutex
	ended bool
	last  error
}

// done ends the watch and returns the last failed dial, if any.
func (w *dialWatch) done() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	return w.last
}

func (w *dialWatch) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err == nil {
			return c, nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ended {
			return c, err
		}
		w.last = err
		if w.single && (errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)) {
			w.refused(err)
		}
		return c, err
	}
}

func (w *dialWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (w *dialWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// dial checks cn's flags and connects, for the commands that do nothing
// in between. A failure is reported, and comes as a nil client with the
// exit status: 2 for a usage error, 125 if Redis does not answer.
func (c *cli) dial(ctx context.Context, cmd *command, cn *conn) (redis.UniversalClient, int) {
	target, err := cn.check(cmd)
	if err != nil {
		return nil, cmd.exit(err)
	}
	rdb, err := cn.connect(ctx, target)
	if err != nil {
		return nil, c.fail(cmd.name, exitInternal, err)
	}
	return rdb, exitOK
}

// dialName parses args as exactly one lock NAME, then dials; with -h, or
// on failure, the client is nil.
func (c *cli) dialName(ctx context.Context, cmd *command, cn *conn, args []string) (string, redis.UniversalClient, int) {
	pos, _, dashes, err := cmd.parse(args)
	if err == nil {
		err = oneName(pos, dashes)
	}
	if err != nil {
		return "", nil, cmd.exit(err)
	}
	rdb, code := c.dial(ctx, cmd, cn)
	if rdb == nil {
		return "", nil, code
	}
	return pos[0], rdb, exitOK
}

// request returns a context for one request that does not wait for a
// lock: bounded by --timeout.
func (cn *conn) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cn.timeout)
}

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

// redactedURL returns the URL with any password replaced by "xxxxx".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return redact(u)
}

// redact returns u with the password of its userinfo, and the value of
// every query option that may hold a secret (see secretKey), replaced by
// "xxxxx".
func redact(u *url.URL) string {
	r := *u
	r.RawQuery = redactQuery(u.RawQuery)
	shown := r.Redacted()
	for _, pw := range querySecrets(u.RawQuery) { // given to another option too
		shown = strings.ReplaceAll(shown, pw, "xxxxx")
	}
	return shown
}

// redactQuery masks the values of raw's secret options and keeps the
// rest as written. It splits at ";" too, and reads keys whose escapes do
// not decode as written: a query that url.ParseQuery refuses, and so
// drops pairs of, must not show a password that it dropped.
func redactQuery(raw string) string {
	var b strings.Builder
	for raw != "" {
		pair, rest := raw, ""
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, rest = raw[:i], raw[i:]
		}
		if k, _, ok := strings.Cut(pair, "="); ok && secretKey(k) {
			pair = k + "=xxxxx"
		}
		b.WriteString(pair)
		if rest != "" {
			b.WriteByte(rest[0])
			rest = rest[1:]
		}
		raw = rest
	}
	return b.String()
}

// secretKey reports whether the query option key may hold a secret:
// password= (go-redis's, for Sentinel), and whatever a user may have
// meant as one (Password=, sentinel_password=, auth=...), in any case.
func secretKey(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	key = strings.ToLower(key)
	return strings.Contains(key, "pass") || strings.Contains(key, "secret") || strings.Contains(key, "auth")
}

// querySecrets returns the values of raw's secret options, as written
// and decoded, for masking in messages that may repeat them.
func querySecrets(raw string) []string {
	var secrets []string
	for pair := range strings.FieldsFuncSeq(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || !secretKey(k) || v == "" {
			continue
		}
		secrets = append(secrets, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v && d != "" {
			secrets = append(secrets, d)
		}
	}
	return secrets
}
