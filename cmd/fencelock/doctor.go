package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const doctorAbout = `Audit a Redis deployment for lock safety: server version and native
commands, persistence, eviction, replication, Sentinel or Cluster, clock
offset, round-trip time, the connection's encryption, the ACL user's
permissions, and a test acquire/renew/release (under the key prefix
PREFIXdoctor:). Each finding has a severity (ok, info, warn, critical)
and, where something should change, the fix.

Permissions are checked with ACL DRYRUN (Redis >= 7.0, Valkey): every
command the library sends to each server (the Lua scripts and the
commands they call, or DELEX/DELIFEQ, SET and PEXPIRE; PUBLISH and
SUBSCRIBE, or their sharded forms on a Cluster; WAIT with
--min-replicas; with --rueidis, what rueidis and valkey-go send too) for
the user doctor connects as, or the user that
--acl-user names. A missing permission is critical, with the ACL SETUSER
that grants it; a user that may do far more than locks need (+@all, ~*,
&*) is warned of. A least-privilege user may not run ACL DRYRUN itself:
run doctor as an administrator with --acl-user USER to check USER.

What is audited follows --redis: a redis:// URL audits that one node;
a redis+sentinel:// URL audits the master the Sentinels name now (the
Sentinels themselves are not audited); a redis+cluster:// URL audits every
master of the Cluster, each finding naming its node, and takes the test
lock through the Cluster client. Replicas are judged from their master's
INFO only.

Works on managed servers where CONFIG is disabled: what only CONFIG can
tell is reported as not checked. Exits 1 if a finding is critical, 125 if
the server cannot be reached.`

const doctorExits = `  0    no finding is critical
  1    a finding is critical
  2    usage error: bad flags or arguments
  125  the server could not be reached
`

// Severities, from best to worst.
const (
	sevOK       = "ok"
	sevInfo     = "info"
	sevWarn     = "warn"
	sevCritical = "critical"
)

type finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

type doctorReport struct {
	Redis    string    `json:"redis"`  // the URL, without password
	Server   string    `json:"server"` // "Redis 7.0.15", "Valkey 8.1.0"
	Findings []finding `json:"findings"`
	Critical int       `json:"critical"`
	Warnings int       `json:"warnings"`

	delex, delifeq bool // a server audited has DELEX, DELIFEQ (COMMAND INFO)
	// paths are the release paths of the servers audited, for the ACL
	// rule (Prefix, Cluster and MinReplicas are set too).
	paths fencelock.ACLOptions
	addrs []string // the addresses of the servers audited, as they saw the connection
}

func (r *doctorReport) add(check, sev, msg, fix string) {
	r.Findings = append(r.Findings, finding{Check: check, Severity: sev, Message: msg, Fix: fix})
	switch sev {
	case sevCritical:
		r.Critical++
	case sevWarn:
		r.Warnings++
	}
}

// doctoring is what one doctor run audits and how.
type doctoring struct {
	cn          *conn
	target      *redisTarget
	aclUser     string // the ACL user whose permissions are checked
	minReplicas int
	rueidis     bool // the clients run over rueidis or valkey-go
}

func (c *cli) doctor(ctx context.Context, args []string) int {
	var (
		cn     conn
		asJSON bool
		d      = doctoring{cn: &cn}
	)
	cmd := c.command("doctor", "[flags]", doctorAbout, doctorExits)
	cn.addConn(cmd)
	cn.addTTL(cmd, "FENCELOCK_TTL")
	cmd.fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.fs.StringVar(&d.aclUser, "acl-user", "", "check the permissions of the ACL user `name` (default: the user doctor connects as)")
	cmd.fromEnv("acl-user", "FENCELOCK_ACL_USER")
	cmd.fs.IntVar(&d.minReplicas, "min-replicas", 0, "audit for clients with fencelock.Options.MinReplicas `n`: WAIT permitted, n replicas connected")
	cmd.fs.BoolVar(&d.rueidis, "rueidis", false, "audit for clients over rueidis or valkey-go (transport/rueidisconn, transport/valkeyconn): the ACL rule grants what they send")
	var res doctorS3 // --resource: a fenced store instead of Redis (doctor_s3.go)
	res.add(cmd)
	pos, _, dashes, err := cmd.parse(args)
	if err == nil && (len(pos) > 0 || dashes) {
		err = usageErrorf("unexpected argument %q", append(pos, "--")[0])
	}
	if err == nil && res.resource != "" {
		return c.doctorResource(ctx, cmd, &res, asJSON)
	}
	if err == nil && d.minReplicas < 0 {
		err = usageErrorf("--min-replicas %d is negative", d.minReplicas)
	}
	if err == nil {
		d.target, err = cn.check(cmd)
	}
	if err != nil {
		return cmd.exit(err)
	}
	if d.aclUser == "" {
		d.aclUser = d.target.username()
	}
	rep := &doctorReport{Redis: redactedURL(cn.url)}
	rep.paths = fencelock.ACLOptions{Prefix: cn.prefix, MinReplicas: d.minReplicas > 0, Rueidis: d.rueidis, Sentinel: d.target.failover != nil}
	var reachable bool
	switch t := d.target; {
	case t.cluster != nil:
		reachable = d.diagnoseCluster(ctx, rep)
	case t.failover != nil:
		rdb := redis.NewFailoverClient(t.failover)
		defer rdb.Close()
		reachable = d.diagnose(ctx, rdb, rep, viaSentinel)
	default:
		rdb := redis.NewClient(t.node)
		defer rdb.Close()
		reachable = d.diagnose(ctx, rdb, rep, viaNode)
	}
	if reachable {
		checkTransport(rep, d.target)
	}

	if asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(c.stdout, "%s\n", b)
	} else {
		printReport(c, rep)
	}
	switch {
	case !reachable:
		return exitInternal
	case rep.Critical > 0:
		return exitCritical
	}
	return exitOK
}

func printReport(c *cli, rep *doctorReport) {
	fmt.Fprintf(c.stdout, "fencelock doctor: %s", rep.Redis)
	if rep.Server != "" {
		fmt.Fprintf(c.stdout, " (%s)", rep.Server)
	}
	fmt.Fprint(c.stdout, "\n\n")
	for _, f := range rep.Findings {
		fmt.Fprintf(c.stdout, "%-9s %-12s %s\n", strings.ToUpper(f.Severity), f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(c.stdout, "%-9s %-12s fix: %s\n", "", "", f.Fix)
		}
	}
	fmt.Fprintf(c.stdout, "\ncritical: %d, warnings: %d\n", rep.Critical, rep.Warnings)
}

// How doctor reached the server it audits.
const (
	viaNode     = iota // a redis:// URL: the node named
	viaSentinel        // a redis+sentinel:// URL: the master the Sentinels name
	viaCluster         // a redis+cluster:// URL: one master of the Cluster
)

// diagnose runs every check it can, adding findings to rep. It reports
// false if the server could not be reached at all.
func (d *doctoring) diagnose(ctx context.Context, rdb *redis.Client, rep *doctorReport, via int) bool {
	reachable, data := d.diagnoseNode(ctx, rdb, rdb, rep, via)
	if data {
		d.checkLock(ctx, rdb, rep)
	}
	return reachable
}

// diagnoseCluster audits every master of the Cluster, prefixing each
// finding with the node's address, then takes the test lock through the
// Cluster client.
func (d *doctoring) diagnoseCluster(ctx context.Context, rep *doctorReport) bool {
	cc := redis.NewClusterClient(d.target.cluster)
	defer cc.Close()
	pctx, cancel := d.cn.request(ctx)
	defer cancel()
	if err := cc.Ping(pctx).Err(); err != nil {
		rep.add("connect", sevCritical, "cannot reach the Cluster: "+withHint(err),
			"check --redis (or REDIS_URL) names Cluster nodes, REDIS_USERNAME/REDIS_PASSWORD, TLS (rediss+cluster://, --tls, --cacert) and the network")
		return false
	}
	var (
		mu      sync.Mutex
		masters []*redis.Client
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, node *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, node)
		return nil
	})
	if err != nil {
		rep.add("connect", sevCritical, "cannot list the Cluster's masters: "+err.Error(), "check that every master is reachable from this host")
		return false
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	rep.paths.Cluster = true
	for _, node := range masters {
		sub := &doctorReport{paths: rep.paths}
		d.diagnoseNode(ctx, node, cc, sub, viaCluster)
		if rep.Server == "" {
			rep.Server = sub.Server
		}
		// A Cluster mid-upgrade mixes versions: the ACL must allow what
		// any master's version makes the library send.
		rep.delex, rep.delifeq = rep.delex || sub.delex, rep.delifeq || sub.delifeq
		rep.paths.OlderServers = rep.paths.OlderServers || sub.paths.OlderServers
		rep.paths.Redis84, rep.paths.Valkey9 = rep.paths.Redis84 || sub.paths.Redis84, rep.paths.Valkey9 || sub.paths.Valkey9
		rep.addrs = append(rep.addrs, sub.addrs...)
		for _, f := range sub.Findings {
			rep.add(f.Check, f.Severity, node.Options().Addr+": "+f.Message, f.Fix)
		}
	}
	rep.add("mode", sevOK, fmt.Sprintf("Cluster of %d masters, each audited above", len(masters)), "")
	d.checkLock(ctx, cc, rep)
	return true
}

// diagnoseNode runs the checks of one server; keys takes the probe key of
// checkCommands (the node itself, or the Cluster client). It reports
// whether the server was reached, and whether it holds data (the test
// lock makes sense there).
func (d *doctoring) diagnoseNode(ctx context.Context, rdb *redis.Client, keys redis.UniversalClient, rep *doctorReport, via int) (reachable, data bool) {
	pctx, cancel := d.cn.request(ctx)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rep.add("connect", sevCritical, "cannot reach the server: "+withHint(err),
			"check --redis (or REDIS_URL), REDIS_USERNAME/REDIS_PASSWORD, TLS (rediss://, --tls, --cacert) and the network")
		return false, false
	}
	rep.addrs = append(rep.addrs, serverAddr(ctx, rdb))
	info, err := rdb.Info(ctx).Result()
	if err != nil && !redis.HasErrorPrefix(err, "NOPERM") {
		rep.add("server", sevCritical, "INFO failed: "+err.Error(), "grant the connection's ACL user the INFO command")
		return true, false
	}
	if err != nil {
		// A least-privilege user: what INFO and CONFIG tell goes
		// unchecked, the permissions and the test lock do not.
		rep.add("server", sevWarn, "INFO is not permitted to this user: the server's version, persistence, eviction and replication are not audited",
			"run doctor as a user that may run INFO and CONFIG GET (an administrator), with --acl-user "+d.aclUser+" to check this user's permissions")
		d.checkCommands(ctx, rdb, keys, rep)
		d.checkACL(ctx, rdb, rep)
		checkClock(ctx, rdb, rep)
		checkRTT(ctx, rdb, d.cn, rep)
		return true, true
	}
	inf := parseInfo(info)

	if !checkServer(rep, inf, via) {
		return true, false // a Sentinel: nothing else applies
	}
	d.checkCommands(ctx, rdb, keys, rep)
	d.checkACL(ctx, rdb, rep)
	cfg := configGetter{rdb: rdb}
	checkPersistence(ctx, &cfg, rep, inf)
	checkEviction(rep, inf)
	d.checkReplication(ctx, &cfg, rep, inf)
	checkClock(ctx, rdb, rep)
	checkRTT(ctx, rdb, d.cn, rep)
	return true, true
}

// checkACL checks the ACL user's permissions on rdb's server, for the
// release path that this server takes.
func (d *doctoring) checkACL(ctx context.Context, rdb *redis.Client, rep *doctorReport) {
	opts := rep.paths
	opts.OlderServers, opts.Redis84, opts.Valkey9 = !rep.delex && !rep.delifeq, rep.delex, !rep.delex && rep.delifeq
	rep.paths = opts
	checkACL(ctx, rdb, rep, d.aclUser, opts)
}

// parseInfo reads INFO's "key:value" lines.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// checkServer reports flavour, version and mode; false means the server
// is a Sentinel.
func checkServer(rep *doctorReport, inf map[string]string, via int) bool {
	// The oldest releases the test matrix runs (docs/operations.md, "Tested servers").
	flavour, version, minVersion := "Redis", inf["redis_version"], "7.0"
	if inf["server_name"] == "valkey" {
		flavour, minVersion = "Valkey", "9.0"
		if v := inf["valkey_version"]; v != "" {
			version = v // Valkey's redis_version is the Redis it is compatible with
		}
	}
	// Valkey >= 8 says server_mode, unless extended-redis-compatibility
	// is on; Redis says redis_mode.
	mode := inf["redis_mode"]
	if mode == "" {
		mode = inf["server_mode"]
	}
	if mode == "" {
		mode = "standalone"
	}
	if inf["cluster_enabled"] == "1" {
		mode = "cluster"
	}
	rep.Server = fmt.Sprintf("%s %s, %s", flavour, version, mode)
	if versionLess(version, minVersion) {
		rep.add("server", sevWarn, fmt.Sprintf("%s %s is older than %s, the oldest release fencelock is tested on", flavour, version, minVersion),
			"upgrade the server, or run fencelock's tests on this one first (docs/operations.md, \"Tested servers\")")
	} else {
		rep.add("server", sevOK, fmt.Sprintf("%s %s", flavour, version), "")
	}
	switch {
	case mode == "sentinel":
		rep.add("mode", sevCritical, "this is a Sentinel, which keeps no data: locks cannot live here",
			"use --redis redis+sentinel://SENTINEL:PORT[,SENTINEL:PORT...]/MASTER to reach the master the Sentinels name")
		return false
	case mode == "cluster" && via == viaCluster:
		// diagnoseCluster reports the mode once, for all masters.
	case mode == "cluster":
		rep.add("mode", sevWarn, "Cluster mode: the library's hash tags keep each lock and its token in one slot, but a redis:// URL talks to this one node and gets MOVED for locks of other slots",
			"use --redis redis+cluster://NODE:PORT[,NODE:PORT...] (or a redis.ClusterClient in the library)")
	case via == viaSentinel:
		rep.add("mode", sevOK, mode+": the master that the Sentinels name now", "")
	default:
		rep.add("mode", sevOK, mode, "")
	}
	return true
}

// versionLess compares dotted versions numerically, ignoring suffixes.
func versionLess(v, than string) bool {
	a, b := strings.Split(v, "."), strings.Split(than, ".")
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x, _ = strconv.Atoi(a[i])
		}
		if i < len(b) {
			y, _ = strconv.Atoi(b[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func (d *doctoring) checkCommands(ctx context.Context, rdb *redis.Client, keys redis.UniversalClient, rep *doctorReport) {
	names := []string{"DELEX", "DELIFEQ", "WAITAOF"}
	reply, err := rdb.Do(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ", "WAITAOF").Slice()
	if err != nil || len(reply) != len(names) {
		rep.add("commands", sevInfo, fmt.Sprintf("could not check native commands (COMMAND INFO: %v); the library then uses its Lua scripts", err), "")
		return
	}
	var have, lack []string
	for i, n := range names {
		if reply[i] != nil {
			have = append(have, n)
		} else {
			lack = append(lack, n)
		}
	}
	rep.delex, rep.delifeq = reply[0] != nil, reply[1] != nil
	// SET ... IFEQ is an option, not a command: try it on a key of ours.
	key := d.cn.prefix + "doctor:{probe-" + randomHex() + "}"
	err = keys.Do(ctx, "SET", key, "x", "IFEQ", "x", "PX", 1000).Err()
	if err == nil || errors.Is(err, redis.Nil) {
		have = append(have, "SET IFEQ")
	} else {
		lack = append(lack, "SET IFEQ")
	}
	keys.Del(ctx, key)

	msg := "native: " + listOrNone(have) + "; missing: " + listOrNone(lack)
	if slices.Contains(have, "DELEX") || slices.Contains(have, "DELIFEQ") {
		rep.add("commands", sevOK, msg+" (release and renew use native commands)", "")
	} else {
		rep.add("commands", sevInfo, msg+" (release and renew use Lua scripts: also one round trip)", "")
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// configGetter reads CONFIG GET, remembering whether CONFIG is available
// (managed services often rename or disable it).
type configGetter struct {
	rdb    *redis.Client
	broken error
}

func (g *configGetter) get(ctx context.Context, name string) (string, error) {
	if g.broken != nil {
		return "", g.broken
	}
	m, err := g.rdb.ConfigGet(ctx, name).Result()
	if err != nil {
		g.broken = err
		return "", err
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", name)
	}
	return v, nil
}

func notChecked(what string, err error) string {
	return fmt.Sprintf("could not check %s: CONFIG unavailable (%v)", what, err)
}

func checkPersistence(ctx context.Context, cfg *configGetter, rep *doctorReport, inf map[string]string) {
	aof, known := inf["aof_enabled"]
	if !known {
		if v, err := cfg.get(ctx, "appendonly"); err == nil {
			aof, known = map[string]string{"yes": "1", "no": "0"}[v], true
		}
	}
	switch {
	case !known:
		rep.add("persistence", sevWarn, "could not tell whether appendonly is on (INFO persistence and CONFIG unavailable)",
			"ask your provider whether AOF persistence is enabled")
		return
	case aof != "1":
		rep.add("persistence", sevWarn, "appendonly is off: a restart or crash loses every lock, so a new holder can acquire while the old one still works; tokens stay increasing (clock floor), so fenced resources stay safe",
			"CONFIG SET appendonly yes (and appendfsync everysec or always), and persist it in redis.conf")
		return
	}
	fsync, err := cfg.get(ctx, "appendfsync")
	switch {
	case err != nil:
		rep.add("persistence", sevWarn, "appendonly is on; "+notChecked("appendfsync", err), "ask your provider which appendfsync policy is used")
	case fsync == "always":
		rep.add("persistence", sevOK, "appendonly yes, appendfsync always", "")
	case fsync == "everysec":
		rep.add("persistence", sevInfo, "appendonly yes, appendfsync everysec: a crash can lose the last second of acquisitions", "appendfsync always, if that second matters")
	default:
		rep.add("persistence", sevWarn, "appendonly yes, appendfsync "+fsync+": a crash can lose many seconds of acquisitions",
			"CONFIG SET appendfsync everysec (or always)")
	}
}

func checkEviction(rep *doctorReport, inf map[string]string) {
	policy, ok := inf["maxmemory_policy"]
	if !ok {
		rep.add("eviction", sevWarn, "could not read maxmemory_policy from INFO memory", "make sure maxmemory-policy is noeviction")
		return
	}
	maxmem, _ := strconv.ParseInt(inf["maxmemory"], 10, 64)
	evicts := strings.HasPrefix(policy, "allkeys-") || strings.HasPrefix(policy, "volatile-")
	switch {
	case !evicts:
		rep.add("eviction", sevOK, "maxmemory-policy "+policy+": lock keys are never evicted (writes fail instead when memory is full)", "")
	case maxmem > 0:
		rep.add("eviction", sevCritical, fmt.Sprintf("maxmemory-policy %s with maxmemory %d: under memory pressure Redis evicts keys, lock keys with their TTL included, and a second holder acquires a lock that is still in use", policy, maxmem),
			"CONFIG SET maxmemory-policy noeviction, ideally on an instance that holds only locks")
	default:
		rep.add("eviction", sevWarn, fmt.Sprintf("maxmemory-policy %s: no maxmemory is set now, but once one is, lock keys can be evicted while in use", policy),
			"CONFIG SET maxmemory-policy noeviction")
	}
}

func (d *doctoring) checkReplication(ctx context.Context, cfg *configGetter, rep *doctorReport, inf map[string]string) {
	role := inf["role"]
	if role == "slave" || role == "replica" {
		rep.add("replication", sevCritical, fmt.Sprintf("this server is a replica of %s:%s: acquisitions fail (READONLY) or, on a writable replica, take locks the master never sees", inf["master_host"], inf["master_port"]),
			"point --redis at the master")
		return
	}
	replicas, _ := strconv.Atoi(inf["connected_slaves"])
	if replicas < d.minReplicas {
		rep.add("replication", sevCritical, fmt.Sprintf("role %s, %d replicas connected, but --min-replicas %d: every acquisition with that MinReplicas fails (ErrNotReplicated)", role, replicas, d.minReplicas),
			"connect the replicas, or lower fencelock.Options.MinReplicas")
		return
	}
	if replicas == 0 {
		rep.add("replication", sevInfo, "role "+role+", no replicas: nothing to fail over to, and nothing to lose the lock in a failover", "")
		return
	}
	minWrite, err := cfg.get(ctx, "min-replicas-to-write")
	if err != nil {
		if _, ok := inf["min_slaves_good_slaves"]; ok {
			rep.add("replication", sevOK, fmt.Sprintf("role master, %d replicas, min-replicas-to-write is set (INFO min_slaves_good_slaves)", replicas), "")
			return
		}
		rep.add("replication", sevWarn, fmt.Sprintf("role master, %d replicas; %s", replicas, notChecked("min-replicas-to-write", err)),
			"ask your provider; fencelock.Options.MinReplicas makes each acquisition wait for replicas")
		return
	}
	if n, _ := strconv.Atoi(minWrite); n == 0 {
		rep.add("replication", sevWarn, fmt.Sprintf("role master, %d replicas, min-replicas-to-write 0: replication is asynchronous, and a failover right after an acquisition can lose the lock, letting a second holder in (fenced resources stay safe)", replicas),
			"set fencelock.Options.MinReplicas (WAIT after each acquisition), or min-replicas-to-write; both narrow the window, neither closes it")
		return
	}
	rep.add("replication", sevOK, fmt.Sprintf("role master, %d replicas, min-replicas-to-write %s", replicas, minWrite), "")
}

// checkClock estimates the server clock's offset from this host's: the
// server's TIME lies between the local times before and after the call.
func checkClock(ctx context.Context, rdb *redis.Client, rep *doctorReport) {
	var (
		best   time.Duration = -1
		offset time.Duration
	)
	for range 5 {
		t0 := time.Now()
		st, err := rdb.Time(ctx).Result()
		t1 := time.Now()
		if err != nil {
			rep.add("clock", sevInfo, "could not read the server clock (TIME): "+err.Error(), "")
			return
		}
		rtt := t1.Sub(t0)
		if best < 0 || rtt < best {
			best = rtt
			mid := t0.Add(rtt / 2)
			offset = st.Sub(mid.Round(0)) // wall clocks: drop the monotonic reading
		}
	}
	msg := fmt.Sprintf("server clock is %+v ± %v from this host's", offset.Round(10*time.Microsecond), (best / 2).Round(10*time.Microsecond))
	if abs(offset)-best/2 > time.Second {
		rep.add("clock", sevWarn, msg+": one of the two clocks is off. Leases do not depend on it (durations, not times), but tokens' clock floor uses the server clock, which must agree with its replicas' across failovers",
			"run NTP (chrony, systemd-timesyncd) on the servers and this host")
		return
	}
	rep.add("clock", sevOK, msg, "")
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func checkRTT(ctx context.Context, rdb *redis.Client, cn *conn, rep *doctorReport) {
	var rtts []time.Duration
	for range 7 {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			rep.add("latency", sevWarn, "PING failed: "+err.Error(), "")
			return
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	med := rtts[len(rtts)/2]
	msg := fmt.Sprintf("round trip median %v (min %v, max %v, %d PINGs)", med.Round(time.Microsecond), rtts[0].Round(time.Microsecond), rtts[len(rtts)-1].Round(time.Microsecond), len(rtts))
	if med > cn.ttl/20 {
		rep.add("latency", sevWarn, fmt.Sprintf("%s: slow for a %v TTL; renewals every TTL/3 leave little room for a slow or retried request", msg, cn.ttl),
			"use a longer --ttl (fencelock.Options.TTL), or a Redis closer to this host")
		return
	}
	rep.add("latency", sevOK, msg, "")
}

// checkLock acquires, renews and releases a lock of its own, twice, and
// checks that tokens increase. Its token counter expires after --ttl.
func (d *doctoring) checkLock(ctx context.Context, rdb redis.UniversalClient, rep *doctorReport) {
	cn := d.cn
	prefix := cn.prefix + "doctor:"
	name := "probe-" + randomHex()
	locks := fencelock.New(rdb, &fencelock.Options{TTL: cn.ttl, Prefix: prefix, RenewInterval: -1, TokenRetention: cn.ttl})
	fix := fmt.Sprintf("see the findings above; the ACL rule for these servers: ACL SETUSER %s reset on >PASSWORD %s", d.aclUser, fencelock.ACLRule(&rep.paths))
	var tokens []int64
	for range 2 {
		l, err := locks.TryAcquire(ctx, name)
		if err != nil {
			rep.add("lock", sevCritical, "test acquire failed: "+message(err), fix)
			return
		}
		tokens = append(tokens, l.Token())
		if err := l.Renew(ctx); err != nil {
			l.Release(ctx)
			rep.add("lock", sevCritical, "test renew failed: "+message(err), fix)
			return
		}
		if err := l.Release(ctx); err != nil {
			rep.add("lock", sevCritical, "test release failed: "+message(err), fix)
			return
		}
	}
	if tokens[1] <= tokens[0] {
		rep.add("lock", sevCritical, fmt.Sprintf("tokens did not increase: %d then %d", tokens[0], tokens[1]), "report this as a bug")
		return
	}
	rep.add("lock", sevOK, fmt.Sprintf("acquire, renew and release work; tokens %d then %d (lock %q under %q)", tokens[0], tokens[1], name, prefix), "")
}

func randomHex() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
