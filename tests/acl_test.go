package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// aclRuleMinReplicas is what the rule gains when Options.MinReplicas > 0.
const aclRuleMinReplicas = "+wait"

// aclRuleRueidis is what ACLOptions.Rueidis adds to a rule: rueidis and
// valkey-go clean a dedicated connection they take back with these.
const aclRuleRueidis = "+discard +unsubscribe +punsubscribe +sunsubscribe"

// aclSetUser is how docs/topologies.md introduces every rule.
const aclSetUser = "ACL SETUSER fencelock reset on >PASSWORD "

// aclPassword is the password of every test user.
const aclPassword = "fencelock-test-password"

// docs/topologies.md states the rule for each server (the release paths Lua,
// DELEX and DELIFEQ; standalone or Sentinel, and Cluster) and the
// sentinels' rule, each on a line of its own, and names what MinReplicas
// adds.
func TestACL_docs(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../docs/topologies.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := []string{fencelock.SentinelACLRule, fencelock.RueidisSentinelACLRule}
	for _, cluster := range []bool{false, true} {
		for _, path := range []string{"lua", "delex", "delifeq"} {
			rules = append(rules, fencelock.ACLRule(aclOptions(path, cluster, "", false)))
		}
	}
	for _, rule := range rules {
		if !strings.Contains(string(readme), "\n"+aclSetUser+rule+"\n") {
			t.Errorf("docs/topologies.md does not state the rule (on a line of its own):\n%s%s", aclSetUser, rule)
		}
	}
	for _, cluster := range []bool{false, true} {
		if got, want := fencelock.ACLRule(aclOptions("lua", cluster, "", true)), fencelock.ACLRule(aclOptions("lua", cluster, "", false))+" "+aclRuleMinReplicas; got != want {
			t.Errorf("rule with MinReplicas = %q, want %q", got, want)
		}
	}
	if !strings.Contains(string(readme), "`"+aclRuleMinReplicas+"`") {
		t.Errorf("docs/topologies.md does not name %q for MinReplicas", aclRuleMinReplicas)
	}
	for _, cluster := range []bool{false, true} {
		o := fencelock.ACLOptions{Cluster: cluster}
		goRedis := fencelock.ACLRule(&o)
		o.Rueidis = true
		if got, want := fencelock.ACLRule(&o), strings.Replace(goRedis, " +command ", " +command|info ", 1); !strings.HasPrefix(got, want+" ") {
			t.Errorf("rule with Rueidis = %q, want %q and what rueidis cleans a connection with", got, want)
		}
	}
	if !strings.Contains(string(readme), "`"+aclRuleRueidis+"`") {
		t.Errorf("docs/topologies.md does not name %q for rueidis and valkey-go", aclRuleRueidis)
	}
	lock, election := fencelock.ACLRule(nil), fencelock.ACLRule(&fencelock.ACLOptions{Elections: true})
	if !strings.Contains(string(readme), "`"+strings.TrimPrefix(election, lock+" ")+"`") {
		t.Errorf("docs/topologies.md does not name what Elections adds to the rule, %q", strings.TrimPrefix(election, lock+" "))
	}
}

// aclRule returns ACLRule's rule for servers whose release path is path
// ("lua", "delex", "delifeq"), for the transport the tests run on.
func aclRule(path string, cluster bool, prefix string, minReplicas bool) string {
	o := aclOptions(path, cluster, prefix, minReplicas)
	o.Rueidis = !goRedisTransport()
	return fencelock.ACLRule(o)
}

// aclOptions describe servers whose release path is path to ACLRule, for
// go-redis.
func aclOptions(path string, cluster bool, prefix string, minReplicas bool) *fencelock.ACLOptions {
	return &fencelock.ACLOptions{
		Prefix:       prefix,
		OlderServers: path == "lua",
		Redis84:      path == "delex",
		Valkey9:      path == "delifeq",
		Cluster:      cluster, MinReplicas: minReplicas,
	}
}

// aclRuleFor returns the rule for the server admin is connected to, with
// keys and channels under prefix.
func aclRuleFor(t *testing.T, admin *redis.Client, cluster bool, prefix string) string {
	t.Helper()
	return aclRule(serverPath(t, admin), cluster, prefix, false)
}

// serverPath returns the native compare-and-delete command the server
// has, "delex" or "delifeq", or "lua" if it has neither.
func serverPath(t *testing.T, admin *redis.Client) string {
	t.Helper()
	info, err := admin.Do(t.Context(), "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil || len(info) != 2 {
		t.Fatalf("COMMAND INFO DELEX DELIFEQ = %v, %v", info, err)
	}
	switch {
	case info[0] != nil:
		return "delex"
	case info[1] != nil:
		return "delifeq"
	}
	return "lua"
}

// setUser creates user, or resets it, on every server with rule and
// aclPassword.
func setUser(t *testing.T, user, rule string, servers ...*redistest.Server) {
	t.Helper()
	args := append([]string{"reset", "on", ">" + aclPassword}, strings.Fields(rule)...)
	for _, s := range servers {
		rdb := s.Client(t)
		if err := rdb.ACLSetUser(t.Context(), user, args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s %s on %s: %v", user, rule, s.Addr(), err)
		}
		rdb.Close()
	}
}

// without returns rule without the permission perm (one of its fields).
func without(t *testing.T, rule, perm string) string {
	t.Helper()
	fields := strings.Fields(rule)
	i := slices.Index(fields, perm)
	if i < 0 {
		t.Fatalf("rule %q has no %q", rule, perm)
	}
	return strings.Join(slices.Delete(fields, i, i+1), " ")
}

// aclDenial is one ACL LOG entry: what was denied, and where.
type aclDenial struct {
	server, reason, object, context string
}

func (d aclDenial) String() string {
	return fmt.Sprintf("%s: %s %q denied (%s)", d.server, d.reason, d.object, d.context)
}

// aclDenials returns the ACL LOG entries of every server.
func aclDenials(t *testing.T, servers ...*redistest.Server) []aclDenial {
	t.Helper()
	var all []aclDenial
	for _, s := range servers {
		rdb := s.Client(t)
		entries, err := rdb.Do(t.Context(), "ACL", "LOG").Slice()
		rdb.Close()
		if err != nil {
			t.Fatalf("ACL LOG on %s: %v", s.Addr(), err)
		}
		for _, e := range entries {
			m, ok := e.(map[any]any)
			if !ok {
				t.Fatalf("ACL LOG entry %#v is not a map", e)
			}
			all = append(all, aclDenial{s.Addr(), fmt.Sprint(m["reason"]), fmt.Sprint(m["object"]), fmt.Sprint(m["context"])})
		}
	}
	return all
}

// resetACLLog empties the ACL LOG of every server.
func resetACLLog(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	for _, s := range servers {
		rdb := s.Client(t)
		if err := rdb.ACLLogReset(t.Context()).Err(); err != nil {
			t.Fatalf("ACL LOG RESET on %s: %v", s.Addr(), err)
		}
		rdb.Close()
	}
}

// assertNoDenials fails the test if any server logged an ACL denial: the
// rule was enough for everything the clients did, including what go-redis
// and the library do quietly (a refused SUBSCRIBE only delays wake-ups).
func assertNoDenials(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	if d := aclDenials(t, servers...); len(d) > 0 {
		t.Errorf("ACL LOG has %d denials, want none:\n%v", len(d), d)
	}
}

// watchedLoss follows the Context of a lease of name that c acquires,
// deletes its lock as admin, and waits for the Context to end with
// ErrLeaseLost, then for no connection to servers to track keys: the
// watch's tracking connection was given back, with whatever its client
// sends then.
func watchedLoss(t *testing.T, c *fencelock.Client, admin redis.UniversalClient, name string, servers ...*redistest.Server) {
	t.Helper()
	ctx := t.Context()
	l := mustAcquire(t, c, name)
	lctx := l.Context()
	if err := admin.Del(ctx, "fencelock:{"+name+"}").Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: its lock deleted; waiting for its lease's Context to end", name)
	waitDone(t, lctx, 10*time.Second)
	if cause := context.Cause(lctx); !errors.Is(cause, fencelock.ErrLeaseLost) {
		t.Errorf("the Context's cause = %v, want ErrLeaseLost", cause)
	}
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		clients[i] = s.Client(t)
	}
	redistest.WaitFor(t, 10*time.Second, "no connection tracking keys after the watch ended", func() bool {
		for _, c := range clients {
			list, err := c.ClientList(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(list) {
				for f := range strings.FieldsSeq(line) {
					if flags, ok := strings.CutPrefix(f, "flags="); ok && strings.Contains(flags, "t") {
						return false
					}
				}
			}
		}
		return true
	})
}

// waitDenial waits until a server logs the denial of perm: a command
// ("+get"), a key pattern ("~fencelock:*") or a channel pattern
// ("&fencelock:*"), and fails the test after a few seconds.
func waitDenial(t *testing.T, perm string, servers ...*redistest.Server) {
	t.Helper()
	var last []aclDenial
	redistest.WaitFor(t, 10*time.Second, "an ACL LOG entry naming "+perm, func() bool {
		last = aclDenials(t, servers...)
		return slices.ContainsFunc(last, func(d aclDenial) bool { return names(d, perm) })
	})
}

// names reports whether d is the denial of perm.
func names(d aclDenial, perm string) bool {
	switch perm[0] {
	case '+':
		// A rule without a command refuses its subcommands too, and Redis
		// 7.0 logs a refused subcommand as "command|info".
		cmd := perm[1:]
		return d.reason == "command" && (d.object == cmd || strings.HasPrefix(d.object, cmd+"|"))
	case '~':
		return d.reason == "key" && strings.HasPrefix(d.object, strings.TrimSuffix(perm[1:], "*"))
	case '&':
		return d.reason == "channel" && strings.HasPrefix(d.object, strings.TrimSuffix(perm[1:], "*"))
	}
	return false
}

// asUser returns rdb, a client that logs in as a user, once the transport
// the tests run on has made its own client for it: rueidis and valkey-go
// connect when their client is made, and a rule that does not let them
// (where a test does not expect it: assertNotMade) must fail the test,
// not skip it as newClient does.
func asUser(t *testing.T, rdb redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	if !goRedisTransport() {
		mustConn(t, rdb)
	}
	return rdb
}

// userClient returns a go-redis client for s that logs in as user.
// Identity (CLIENT SETINFO, which go-redis sends on each connection and
// whose refusal it ignores) is off, so that ACL LOG holds only what the
// library itself needs; docs/topologies.md says so.
func userClient(t *testing.T, s *redistest.Server, user string) *redis.Client {
	t.Helper()
	o := s.ClientOptions()
	o.Username, o.Password, o.DisableIdentity = user, aclPassword, true
	o.MaxRetries = -1
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// A user with exactly the rule for its server passes the life cycle
// (acquire, contention, renewals, release, a waiter woken by the release)
// and, with the rule's +wait, MinReplicas; no server logs a denial; and
// the native commands are what it used where the server has them.
func TestACL_standalone(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	admin := m.Client(t)
	rule := aclRule(serverPath(t, admin), false, "", true)
	setUser(t, "fencelock", rule, m, r)
	redistest.WaitReplicasInSync(t, m, 1)
	resetStats(t, m)

	lifeCycle(t, func() redis.UniversalClient { return asUser(t, userClient(t, m, "fencelock")) }, fencelock.Options{}, 1)
	watchedLoss(t, newClient(t, asUser(t, userClient(t, m, "fencelock")), nil), admin, "watched", m)
	assertNoDenials(t, m, r)
	assertPath(t, serverPath(t, admin), m)
}

// A Client with LockDelay releases by the Lua script on every server (a
// native delete of the delay key would cut short the delay that an
// expiry started), and so does any Client while it does not know the
// master's native commands (their detection unanswered mid failover, or
// in flight): the rule of a server with native commands grants the Lua
// path's DEL too.
func TestACL_lockDelay(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	setUser(t, "fencelock", aclRuleFor(t, admin, false, ""), s)
	lifeCycle(t, func() redis.UniversalClient { return asUser(t, userClient(t, s, "fencelock")) }, fencelock.Options{LockDelay: time.Second}, 0)
	assertNoDenials(t, s)
}

// resetStats resets the command statistics of every server.
func resetStats(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	for _, s := range servers {
		if err := s.Client(t).ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// assertPath checks, by the servers' command statistics, that releases
// used the compare-and-delete of path ("lua", "delex", "delifeq").
func assertPath(t *testing.T, path string, servers ...*redistest.Server) {
	t.Helper()
	want := map[string]string{"lua": "del", "delex": "delex", "delifeq": "delifeq"}[path]
	for _, s := range servers {
		stats, err := s.Client(t).Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		prefix := "cmdstat_" + want + ":calls="
		if i := strings.Index(stats, prefix); i >= 0 && !strings.HasPrefix(stats[i+len(prefix):], "0,") {
			return
		}
	}
	t.Errorf("INFO commandstats shows no %s call on any server: releases did not take the %s path", want, path)
}

// The Lua rule, without DELEX or DELIFEQ, serves on every server: where
// the server has the native command but the user may not run it, the
// library falls back to the Lua scripts. The only denials logged are of
// the native command.
func TestACL_luaRuleOnEveryServer(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	path := serverPath(t, admin)
	setUser(t, "fencelock", aclRule("lua", false, "", false), s)
	resetStats(t, s)

	lifeCycle(t, func() redis.UniversalClient { return asUser(t, userClient(t, s, "fencelock")) }, fencelock.Options{}, 0)
	for _, d := range aclDenials(t, s) {
		if d.reason != "command" || d.object != path {
			t.Errorf("ACL LOG: %v; want no denial but of %s", d, path)
		}
	}
	assertPath(t, "lua", s)
}

// A user missing any one permission of its rule is refused, by an error
// where the library can report one (naming the permission, as far as the
// server's error text does), and always in the server's ACL LOG, which
// names it. What the library does about the refusals it cannot report (a
// wake-up subscription, a publish after a native release) is asserted
// too.
//
// The rows for DELEX and DELIFEQ are TestACL_luaRuleOnEveryServer: a user
// without them falls back to the Lua scripts.
func TestACL_missingPermission(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	env := aclEnv{
		servers: []*redistest.Server{s},
		admin:   admin,
		path:    serverPath(t, admin),
		dial:    func(t *testing.T, user string) redis.UniversalClient { return userClient(t, s, user) },
	}
	for _, perm := range strings.Fields(aclRuleFor(t, admin, false, "fencelock:")) {
		if perm != "+"+env.path { // +delex, +delifeq
			t.Run(perm, func(t *testing.T) { env.missing(t, aclRuleFor(t, admin, false, "fencelock:"), perm) })
		}
	}
}

// aclEnv is a deployment in which a test drops permissions from a rule.
type aclEnv struct {
	servers []*redistest.Server // every server, for users and ACL LOG
	admin   redis.UniversalClient
	path    string // "lua", "delex" or "delifeq"
	cluster bool
	slotMap string // on Cluster, how rueidis reads the slot map: +cluster|shards or +cluster|slots
	dial    func(t *testing.T, user string) redis.UniversalClient
}

// missing checks what a user with rule but for perm is refused.
func (env aclEnv) missing(t *testing.T, rule, perm string) {
	ctx := t.Context()
	user := "without-" + perm
	r := without(t, rule, perm)
	if perm == "+publish" && env.cluster {
		// On Cluster the release publishes with PUBLISH only while it
		// does not know SPUBLISH: here, without the COMMAND it asks.
		for _, p := range strings.Fields(r) {
			if strings.HasPrefix(p, "+command") { // +command, or +command|info
				r = without(t, r, p)
			}
		}
	}
	setUser(t, user, r, env.servers...)
	resetACLLog(t, env.servers...)
	if strings.HasPrefix(perm, "+cluster|") && !goRedisTransport() {
		// rueidis reads the slot map when the client is made, with the
		// subcommand of env.slotMap; the other it does not send here.
		if perm != env.slotMap {
			c := newClient(t, asUser(t, env.dial(t, user)), nil)
			if err := mustAcquire(t, c, "lock-"+strings.Trim(perm, "+|")).Release(ctx); err != nil {
				t.Errorf("Release error = %v, want nil: %s reads the slot map with %s here", err, transportName, env.slotMap)
			}
			assertNoDenials(t, env.servers...)
			return
		}
		assertNotMade(t, env.dial(t, user), perm)
		waitDenial(t, perm, env.servers...)
		return
	}
	if err := env.admin.ScriptFlush(ctx).Err(); err != nil { // EVAL must be needed
		t.Fatal(err)
	}
	full := newClient(t, env.admin, &fencelock.Options{TTL: time.Minute})
	c := newClient(t, asUser(t, env.dial(t, user)), &fencelock.Options{TTL: time.Minute, RetryInterval: time.Minute, RenewInterval: -1})
	lock := "lock-" + strings.Trim(perm, "+~&*:|")
	key := "fencelock:{" + lock + "}"

	switch perm {
	case "~fencelock:*", "+evalsha", "+eval", "+get", "+set", "+time", "+cluster|slots":
		_, err := c.TryAcquire(ctx, lock)
		assertRefusedBy(t, err, perm)
		assertGone(t, env.admin, key)
	case "+pttl":
		held := mustAcquire(t, full, lock)
		defer held.Release(ctx)
		_, err := c.TryAcquire(ctx, lock)
		assertRefusedBy(t, err, perm)
	case "+pexpire":
		l := mustAcquire(t, c, lock)
		assertRefusedBy(t, l.Renew(ctx), perm)
		assertHeldBy(t, env.admin, key, l)
	case "+del":
		// The Lua release, which a Client with LockDelay takes on every
		// server.
		delayed := newClient(t, asUser(t, env.dial(t, user)), &fencelock.Options{TTL: time.Minute, RenewInterval: -1, LockDelay: time.Second})
		l := mustAcquire(t, delayed, lock)
		assertRefusedBy(t, l.Release(ctx), perm)
		assertHeldBy(t, env.admin, key, l)
	case "+command|info", "+command":
		// Without it the library cannot see the native commands and
		// takes the Lua path, which every rule allows: on Cluster, not
		// knowing SPUBLISH either, it publishes cluster-wide.
		l := mustAcquire(t, c, lock)
		if err := l.Renew(ctx); err != nil {
			t.Errorf("Renew error = %v, want nil: lua/renew.lua needs only what every rule has", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Errorf("Release error = %v, want nil: the Lua path needs no COMMAND INFO", err)
		}
		assertGone(t, env.admin, key)
	case "+publish", "+spublish", "&fencelock:*":
		// The release is refused on the Lua path, where the script
		// publishes (on Cluster with PUBLISH while it does not know
		// SPUBLISH); on the native path the publish is refused alone, and
		// the release's waiters wake by their retry.
		l := mustAcquire(t, c, lock)
		err := l.Release(ctx)
		if env.path == "lua" || perm == "+publish" && env.cluster {
			assertRefusedBy(t, err, perm)
			assertHeldBy(t, env.admin, key, l)
		} else if err != nil {
			t.Errorf("Release on the native path: error = %v, want nil (the lock is deleted, the publish refused)", err)
		}
		if perm == "&fencelock:*" {
			waitDenial(t, perm, env.servers...)
			env.assertNotWoken(t, perm, c, full, lock)
		}
	case "+subscribe", "+ssubscribe":
		env.assertNotWoken(t, perm, c, full, lock)
	case "+discard", "+punsubscribe", "+sunsubscribe", "+unsubscribe":
		if !goRedisTransport() && (perm != "+unsubscribe" || env.cluster) {
			// rueidis cleans the watch's connection with them when it
			// takes it back, and ignores their refusal.
			watchedLoss(t, c, env.admin, lock, env.servers...)
			break
		}
		if perm != "+unsubscribe" {
			t.Fatalf("no test for permission %s on go-redis", perm)
		}
		// A subscription that carries two locks' channels drops one of
		// them when its last waiter leaves.
		held := mustAcquire(t, full, lock)
		defer held.Release(ctx)
		other := mustAcquire(t, full, lock+"-other")
		defer other.Release(ctx)
		stay, cancelStay := context.WithCancel(ctx)
		defer cancelStay()
		waiting := make(chan error, 1)
		go func() { _, err := c.Acquire(stay, lock+"-other"); waiting <- err }()
		leave, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := c.Acquire(leave, lock); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire of a held lock: error = %v, want DeadlineExceeded", err)
		}
		waitDenial(t, perm, env.servers...)
		cancelStay()
		<-waiting
	case "+ping":
		// go-redis pings a subscription that has been idle for 3s.
		held := mustAcquire(t, full, lock)
		defer held.Release(ctx)
		wctx, cancel := context.WithCancel(ctx)
		waiting := make(chan error, 1)
		go func() { _, err := c.Acquire(wctx, lock); waiting <- err }()
		waitDenial(t, perm, env.servers...)
		cancel()
		<-waiting
	case "+client|tracking":
		// A lease's Context watches its lock; without the permission the
		// watch is refused, and the loss is learnt at a renewal instead.
		l := mustAcquire(t, c, lock)
		defer l.Release(ctx)
		l.Context()
		waitDenial(t, perm, env.servers...)
	default:
		t.Fatalf("no test for permission %s", perm)
	}
	waitDenial(t, perm, env.servers...)
}

// assertRefusedBy checks that err is the server's refusal, not a lock
// state: a Redis error, neither ErrNotAcquired nor ErrLeaseLost, that
// names perm where the server's error text does (Redis 7.0 does not name
// the command refused inside a script).
func assertRefusedBy(t *testing.T, err error, perm string) {
	t.Helper()
	var rerr redis.Error
	switch {
	case err == nil:
		t.Errorf("error = nil, want the refusal of %s", perm)
		return
	case !errors.As(err, &rerr):
		t.Errorf("error = %v, want a Redis error refusing %s", err, perm)
	case errors.Is(err, fencelock.ErrNotAcquired), errors.Is(err, fencelock.ErrLeaseLost):
		t.Errorf("error = %v, want a refusal of %s, not a lock state", err, perm)
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "can't run this command or subcommand"), // Redis 7.0, in a script
		strings.Contains(msg, "can't publish to the channel"),              // Redis 7.0, in a script
		strings.Contains(msg, "NOPERM") && strings.Contains(msg, "access"): // a key or channel
		return
	case perm[0] == '+' && !strings.Contains(msg, "'"+perm[1:]+"'"):
		t.Errorf("error = %v, want it to name %s", err, perm[1:])
	}
}

// assertNotMade checks that the transport the tests run on cannot make
// its client for rdb, whose user lacks perm: rueidis and valkey-go send
// some commands when the client is made, and the error is the NOPERM
// that names perm.
func assertNotMade(t *testing.T, rdb redis.UniversalClient, perm string) {
	t.Helper()
	if _, close, err := dialConn(t, rdb); err == nil {
		close()
		t.Errorf("making the client without %s: error = nil, want NOPERM", perm)
	} else if !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), perm[1:]) {
		t.Errorf("making the client without %s: error = %v, want NOPERM naming it", perm, err)
	}
}

// mustAcquire acquires name through c or fails the test.
func mustAcquire(t *testing.T, c *fencelock.Client, name string) *fencelock.Lease {
	t.Helper()
	l, err := c.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q) error = %v, want nil", name, err)
	}
	return l
}

// assertGone checks that none of keys exists: a refused acquisition wrote
// nothing.
func assertGone(t *testing.T, admin redis.UniversalClient, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if n, err := admin.Exists(t.Context(), k).Result(); err != nil || n != 0 {
			t.Errorf("EXISTS %s = %d, %v after a refused acquisition; want 0: nothing may be written", k, n, err)
		}
	}
}

// assertHeldBy checks that the lock key still holds l's secret: a refused
// renewal or release changed nothing.
func assertHeldBy(t *testing.T, admin redis.UniversalClient, key string, l *fencelock.Lease) {
	t.Helper()
	if v, err := admin.Get(t.Context(), key).Result(); err != nil || v != l.Secret() {
		t.Errorf("after the refusal, the lock is %q, %v; want it still held by the lease", v, err)
	}
}

// assertNotWoken checks that a waiter in c is not woken by a release
// through other within a few seconds: its wake-up subscription was
// refused (ACL LOG names perm), and only its retry interval (a minute)
// would wake it.
func (env aclEnv) assertNotWoken(t *testing.T, perm string, c, other *fencelock.Client, name string) {
	t.Helper()
	resetACLLog(t, env.servers...)
	ctx := t.Context()
	held := mustAcquire(t, other, name+"-wake")
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	go func() {
		l, err := c.Acquire(wctx, name+"-wake")
		if err == nil {
			l.Release(ctx)
		}
		got <- err
	}()
	// Release once the waiter's subscription was refused: a release
	// before it subscribed would prove nothing.
	waitDenial(t, perm, env.servers...)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter without its subscription: Acquire error = %v, want DeadlineExceeded (not woken)", err)
	}
}

// WAIT is needed with MinReplicas only: without it, an acquisition with
// MinReplicas is refused, naming WAIT, and leaves no lock behind; one
// without MinReplicas is not.
func TestACL_missingWait(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	admin := m.Client(t)
	setUser(t, "fencelock", aclRuleFor(t, admin, false, "fencelock:"), m, r)
	redistest.WaitReplicasInSync(t, m, 1)
	ctx := t.Context()

	c := newClient(t, userClient(t, m, "fencelock"), &fencelock.Options{TTL: time.Minute, MinReplicas: 1})
	_, err := c.TryAcquire(ctx, "replicated")
	assertRefusedBy(t, err, "+wait")
	waitDenial(t, "+wait", m)
	assertGone(t, admin, "fencelock:{replicated}")

	l := mustAcquire(t, newClient(t, userClient(t, m, "fencelock"), nil), "unreplicated")
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release error = %v, want nil", err)
	}
}

// A user whose key and channel patterns exclude the prefix cannot touch
// the locks: acquiring is refused (at once, not waited on) and writes
// nothing; renewing and releasing with the holder's secret are refused
// and change nothing. The same user works with a Prefix its patterns
// cover: the rule follows Options.Prefix.
func TestACL_keyPatternExcludesPrefix(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	setUser(t, "other", aclRuleFor(t, admin, false, "other:"), s)
	ctx := t.Context()
	held := mustAcquire(t, newClient(t, admin, &fencelock.Options{TTL: time.Minute}), "guarded")
	defer held.Release(ctx)
	const key = "fencelock:{guarded}"
	pttl, err := admin.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}

	c := newClient(t, userClient(t, s, "other"), &fencelock.Options{TTL: time.Minute, RenewInterval: -1})
	_, err = c.TryAcquire(ctx, "guarded")
	assertRefusedBy(t, err, "~fencelock:*")
	_, err = c.TryAcquire(ctx, "fresh")
	assertRefusedBy(t, err, "~fencelock:*")
	assertGone(t, admin, "fencelock:{fresh}", "fencelock:{fresh}:token")
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = c.Acquire(actx, "guarded")
	assertRefusedBy(t, err, "~fencelock:*")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire error = %v, want the refusal at once, not a wait", err)
	}

	a, err := c.Attach("guarded", held.Secret(), held.Token())
	if err != nil {
		t.Fatal(err)
	}
	assertRefusedBy(t, a.Renew(ctx), "~fencelock:*")
	assertRefusedBy(t, a.Release(ctx), "~fencelock:*")
	assertHeldBy(t, admin, key, held)
	if after, err := admin.PTTL(ctx, key).Result(); err != nil || after > pttl {
		t.Errorf("PTTL after the refused renewal = %v, %v; want at most %v: not extended", after, err, pttl)
	}
	waitDenial(t, "~fencelock:*", s)
	for _, d := range aclDenials(t, s) {
		if (d.reason != "key" && d.reason != "channel") || !strings.HasPrefix(d.object, "fencelock:") {
			t.Errorf("ACL LOG: %v; want only the prefix's keys and channels refused", d)
		}
	}

	lifeCycle(t, func() redis.UniversalClient { return asUser(t, userClient(t, s, "other")) }, fencelock.Options{Prefix: "other:"}, 0)
}

// Through Sentinel, with the data servers' rule for the fencelock user
// and the sentinels' rule for the sentinel user, the life cycle passes,
// MinReplicas included, and so does a failover: the client finds the new
// master. No process logs a denial. A sentinel user missing any one
// permission is refused, as its sentinel's ACL LOG shows.
func TestACL_sentinel(t *testing.T) {
	t.Parallel()
	g := redistest.NewSentinelGroup(t)
	admin := g.Servers[0].Client(t)
	o := aclOptions(serverPath(t, admin), false, "", true)
	o.Sentinel, o.Rueidis = true, !goRedisTransport()
	setUser(t, "fencelock", fencelock.ACLRule(o), g.Servers...)
	srule := fencelock.SentinelACLRule
	if !goRedisTransport() {
		srule = fencelock.RueidisSentinelACLRule
	}
	setUser(t, "sentinel-user", srule, g.Sentinels...)
	dial := func(sentinelUser string) redis.UniversalClient {
		return sentinelClient(t, g, &redis.FailoverOptions{
			ContextTimeoutEnabled: true,
			Username:              "fencelock", Password: aclPassword,
			SentinelUsername: sentinelUser, SentinelPassword: aclPassword,
			DisableIdentity: true, MaxRetries: -1, DialTimeout: time.Second,
		})
	}
	ctx := t.Context()
	all := append(slices.Clone(g.Servers), g.Sentinels...)

	lifeCycle(t, func() redis.UniversalClient { return asUser(t, dial("sentinel-user")) }, fencelock.Options{}, 2)
	assertNoDenials(t, all...)

	for _, perm := range strings.Fields(srule) {
		t.Run(perm, func(t *testing.T) {
			user := "without-" + perm
			setUser(t, user, without(t, srule, perm), g.Sentinels...)
			resetACLLog(t, g.Sentinels...)
			if !goRedisTransport() && (perm == "+sentinel|get-master-addr-by-name" || perm == "+sentinel|sentinels") {
				// rueidis asks both when the client is made.
				assertNotMade(t, dial(user), perm)
				waitDenial(t, perm, g.Sentinels...)
				return
			}
			c := newClient(t, asUser(t, dial(user)), nil)
			l, err := c.TryAcquire(ctx, "sentinel-"+strings.Trim(perm, "+&|"))
			if perm == "+sentinel|get-master-addr-by-name" {
				// Without it the client cannot find the master at all.
				assertRefusedBy(t, err, perm)
			} else if err != nil {
				t.Errorf("TryAcquire error = %v, want nil: %s needs %s only to follow failovers at once", err, transportName, perm)
			} else if err := l.Release(ctx); err != nil {
				t.Errorf("Release error = %v, want nil", err)
			}
			waitDenial(t, perm, g.Sentinels...)
		})
	}

	c := newClient(t, asUser(t, dial("sentinel-user")), &fencelock.Options{TTL: 3 * time.Second, RetryInterval: 100 * time.Millisecond})
	old := g.Master(t)
	resetACLLog(t, all...)
	old.Kill(t)
	g.WaitFailover(t, old)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	l, err := c.Acquire(actx, "after-failover")
	if err != nil {
		t.Fatalf("Acquire after the failover: error = %v, want the client to find the new master", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the failover: error = %v", err)
	}
	assertNoDenials(t, slices.DeleteFunc(all, func(s *redistest.Server) bool { return s == old })...)
}

// On Cluster, with the cluster rule, the life cycle passes, MinReplicas
// included, with no denial on any node; and a user missing any one
// permission of the cluster rule is refused as on a single server.
func TestACL_cluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	admin := cl.Servers[0].Client(t)
	rule := aclRuleFor(t, admin, true, "fencelock:")
	setUser(t, "fencelock", aclRule(serverPath(t, admin), true, "", true), cl.Servers...)
	dial := func(t *testing.T, user string) redis.UniversalClient {
		return cl.Client(t, &redis.ClusterOptions{ContextTimeoutEnabled: true, Username: user, Password: aclPassword, DisableIdentity: true, MaxRetries: -1})
	}
	resetStats(t, cl.Servers...)

	lifeCycle(t, func() redis.UniversalClient { return asUser(t, dial(t, "fencelock")) }, fencelock.Options{}, 1)
	watchedLoss(t, newClient(t, asUser(t, dial(t, "fencelock")), nil), cl.Client(t, nil), "watched", cl.Servers...)
	assertNoDenials(t, cl.Servers...)
	path := serverPath(t, admin)
	assertPath(t, path, cl.Servers...)

	env := aclEnv{servers: cl.Servers, admin: cl.Client(t, nil), path: path, cluster: true, slotMap: rueidisSlotMap(t, admin), dial: dial}
	for _, perm := range strings.Fields(rule) {
		if perm != "+"+path {
			t.Run(perm, func(t *testing.T) { env.missing(t, rule, perm) })
		}
	}
}

// rueidisSlotMap returns the permission with which rueidis and valkey-go
// read the slot map of the Cluster admin is a node of: CLUSTER SHARDS
// from servers of version 8 on, CLUSTER SLOTS before.
func rueidisSlotMap(t *testing.T, admin *redis.Client) string {
	t.Helper()
	if serverOf(t, admin).major >= 8 {
		return "+cluster|shards"
	}
	return "+cluster|slots"
}

// The rule's key and channel patterns cover exactly the prefix, with the
// glob characters in a prefix taken literally: a key that the unescaped
// pattern would match, and the escaped one does not, is refused.
func TestACLRule_prefixEscaped(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	const prefix = `we?rd*[x]\:`
	setUser(t, "escaped", aclRuleFor(t, admin, false, prefix), s)
	for key, allowed := range map[string]bool{
		prefix + "{lock}":       true,
		`weXrd*[x]\:{lock}`:     false, // ? taken as a glob
		`we?rdANY[x]\:{lock}`:   false, // * taken as a glob
		`we?rd*x\:{lock}`:       false, // [x] taken as a class
		"fencelock:{lock}":      false,
		`we?rd*[x]\` + "{lock}": false,
	} {
		reply, err := admin.Do(t.Context(), "ACL", "DRYRUN", "escaped", "GET", key).Text()
		if err != nil {
			t.Fatalf("ACL DRYRUN: %v", err)
		}
		if got := reply == "OK"; got != allowed {
			t.Errorf("GET %s as the user of prefix %s: %q; want allowed %v", key, prefix, reply, allowed)
		}
	}
	lifeCycle(t, func() redis.UniversalClient { return asUser(t, userClient(t, s, "escaped")) }, fencelock.Options{Prefix: prefix}, 0)
}

// electionLifeCycle campaigns, renews, proclaims, observes, hands over to
// a waiting candidate and resigns, as the user that dial connects as.
// It returns the first error, if any, and leaves nobody leading.
func electionLifeCycle(t testing.TB, ctx context.Context, name string, dial func() redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a := newClient(t, dial(), nil).Election(name)
	b := newClient(t, dial(), nil).Election(name)
	defer b.Resign(context.WithoutCancel(ctx))
	l, err := a.Campaign(ctx, "a")
	if err != nil {
		return fmt.Errorf("Campaign: %w", err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	if err := l.Renew(ctx); err != nil {
		return fmt.Errorf("Renew: %w", err)
	}
	if err := a.Proclaim(ctx, "a2"); err != nil {
		return fmt.Errorf("Proclaim: %w", err)
	}
	changes, err := b.Observe(ctx)
	if err != nil {
		return fmt.Errorf("Observe: %w", err)
	}
	if got := <-changes; got.Value != "a2" {
		return fmt.Errorf("Observe sent %+v first, want a2", got)
	}
	next := make(chan error, 1)
	go func() {
		_, err := b.Campaign(ctx, "b")
		next <- err
	}()
	if err := a.Resign(ctx); err != nil {
		return fmt.Errorf("Resign: %w", err)
	}
	if err := <-next; err != nil {
		return fmt.Errorf("next Campaign: %w", err)
	}
	// The observer must see b's term: that read is of the history after
	// an entry (XRANGE), which the first read does not make.
	for got := range changes {
		if got.Value == "b" {
			break
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("Observe did not send b's term: %w", context.Cause(ctx))
	}
	who, err := a.Leader(ctx)
	if err != nil || who.Value != "b" {
		return fmt.Errorf("Leader = %+v, %v; want b", who, err)
	}
	if err := b.Resign(ctx); err != nil {
		return fmt.Errorf("second Resign: %w", err)
	}
	return nil
}

// With ACLOptions.Elections the rule serves elections too, with no denial
// on any server; without it, or without any one permission it adds, the
// server refuses and ACL LOG names what.
func TestACL_election(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	path := serverPath(t, admin)
	rule := func(election bool) string {
		return fencelock.ACLRule(&fencelock.ACLOptions{
			OlderServers: path == "lua", Redis84: path == "delex", Valkey9: path == "delifeq", Elections: election,
		})
	}
	full := rule(true)
	setUser(t, "elector", full, s)
	resetACLLog(t, s)
	if err := electionLifeCycle(t, t.Context(), "acl-full", func() redis.UniversalClient { return asUser(t, userClient(t, s, "elector")) }); err != nil {
		t.Fatalf("election as a user with the rule %q: %v", full, err)
	}
	assertNoDenials(t, s)

	setUser(t, "locker", rule(false), s)
	if err := electionLifeCycle(t, t.Context(), "acl-lock-rule", func() redis.UniversalClient { return asUser(t, userClient(t, s, "locker")) }); err == nil {
		t.Errorf("election as a user with the lock's rule only: no error, want a refusal")
	}
	for _, perm := range strings.Fields(full) {
		if slices.Contains(strings.Fields(rule(false)), perm) {
			continue // the lock's own, tested by TestACL_missingPermission
		}
		t.Run(perm, func(t *testing.T) {
			user := "elector-without-" + perm
			setUser(t, user, without(t, full, perm), s)
			resetACLLog(t, s)
			// An observer retries what it is refused, so the life cycle
			// may wait for its deadline: stop it once the denial is seen.
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				electionLifeCycle(t, ctx, "acl-"+perm[1:], func() redis.UniversalClient { return asUser(t, userClient(t, s, user)) })
			}()
			waitDenial(t, perm, s)
			cancel()
			<-done
		})
	}
}

// A server that requires a password, reached without one, is reported as
// such: Redis 7+ refuses an unauthenticated command of more than a few
// arguments (an acquisition's script) with a bare protocol error, which
// says nothing of authentication.
func TestNoAuth_reported(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	if err := s.Client(t).ConfigSet(t.Context(), "requirepass", "secret-pw").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, nil)
	ctx := t.Context()
	_, err := c.TryAcquire(ctx, "noauth")
	if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("TryAcquire without the password: error = %v, want it to say NOAUTH", err)
	}
	if _, err := c.Holder(ctx, "noauth"); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("Holder without the password: error = %v, want it to say NOAUTH", err)
	}
}
