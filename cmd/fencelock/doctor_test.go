package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// doctorJSON runs doctor --json against s and returns its exit status and
// findings by check.
func doctorJSON(t *testing.T, s *redistest.Server) (int, doctorReport, map[string]finding) {
	t.Helper()
	return doctorRun(t, nil, "--redis", redisURL(s))
}

// doctorRun runs doctor --json with args and env, and returns its exit
// status and findings by check.
func doctorRun(t *testing.T, env map[string]string, args ...string) (int, doctorReport, map[string]finding) {
	t.Helper()
	h := newHarness(t)
	for k, v := range env {
		h.env[k] = v
	}
	code := h.run(append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(h.stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json output does not parse: %v\n%s", err, h.stdout)
	}
	byCheck := map[string]finding{}
	for _, f := range rep.Findings {
		byCheck[f.Check] = f
	}
	return code, rep, byCheck
}

func wantFinding(t *testing.T, fs map[string]finding, check, severity, text string) {
	t.Helper()
	f, ok := fs[check]
	if !ok {
		t.Errorf("doctor reported no %q finding", check)
		return
	}
	if f.Severity != severity || !strings.Contains(f.Message, text) {
		t.Errorf("doctor %q finding = %s %q, want %s mentioning %q", check, f.Severity, f.Message, severity, text)
	}
}

func TestDoctor_defaults(t *testing.T) {
	t.Parallel()
	// redistest's defaults: no persistence, noeviction, no replicas.
	code, rep, fs := doctorJSON(t, redistest.New(t))
	if code != 0 {
		t.Errorf("doctor exit = %d, want 0 (no critical finding)", code)
	}
	if !strings.HasPrefix(rep.Server, "Redis ") && !strings.HasPrefix(rep.Server, "Valkey ") {
		t.Errorf("server = %q, want flavour and version", rep.Server)
	}
	wantFinding(t, fs, "server", sevOK, "")
	wantFinding(t, fs, "mode", sevOK, "standalone")
	wantFinding(t, fs, "persistence", sevWarn, "appendonly is off")
	wantFinding(t, fs, "eviction", sevOK, "noeviction")
	wantFinding(t, fs, "replication", sevInfo, "no replicas")
	wantFinding(t, fs, "clock", sevOK, "server clock is")
	wantFinding(t, fs, "latency", sevOK, "round trip median")
	wantFinding(t, fs, "lock", sevOK, "tokens")
	if _, ok := fs["commands"]; !ok {
		t.Errorf("doctor reported nothing on native commands")
	}
	if rep.Critical != 0 {
		t.Errorf("critical = %d, want 0: %+v", rep.Critical, rep.Findings)
	}
}

func TestDoctor_eviction(t *testing.T) {
	t.Parallel()
	_, _, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"maxmemory-policy allkeys-lru"}}))
	wantFinding(t, fs, "eviction", sevWarn, "allkeys-lru")

	code, rep, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"maxmemory-policy volatile-ttl", "maxmemory 100mb"}}))
	wantFinding(t, fs, "eviction", sevCritical, "volatile-ttl")
	if code != exitCritical || rep.Critical == 0 {
		t.Errorf("doctor with an evicting maxmemory: exit = %d, critical = %d; want %d and > 0", code, rep.Critical, exitCritical)
	}
}

func TestDoctor_persistence(t *testing.T) {
	t.Parallel()
	_, _, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"appendonly yes", "appendfsync always"}}))
	wantFinding(t, fs, "persistence", sevOK, "appendfsync always")
	_, _, fs = doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"appendonly yes", "appendfsync no"}}))
	wantFinding(t, fs, "persistence", sevWarn, "appendfsync no")
}

func TestDoctor_configDisabled(t *testing.T) {
	t.Parallel()
	// As on managed services: CONFIG is renamed away.
	code, _, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"appendonly yes", `rename-command CONFIG ""`}}))
	if code != 0 {
		t.Errorf("doctor exit = %d, want 0", code)
	}
	wantFinding(t, fs, "persistence", sevWarn, "could not check appendfsync")
	wantFinding(t, fs, "eviction", sevOK, "noeviction") // from INFO, not CONFIG
	wantFinding(t, fs, "lock", sevOK, "tokens")
}

func TestDoctor_replication(t *testing.T) {
	t.Parallel()
	m := redistest.New(t)
	r := redistest.Start(t, &redistest.Options{ReplicaOf: m.Addr()})
	if err := m.Client(t).Wait(t.Context(), 1, 0).Err(); err != nil {
		t.Fatalf("WAIT for the replica: %v", err)
	}
	_, _, fs := doctorJSON(t, m)
	wantFinding(t, fs, "replication", sevWarn, "min-replicas-to-write 0")

	code, _, fs := doctorJSON(t, r)
	wantFinding(t, fs, "replication", sevCritical, "replica of")
	if code != exitCritical {
		t.Errorf("doctor on a replica: exit = %d, want %d", code, exitCritical)
	}
}

func TestDoctor_text(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, &redistest.Options{Config: []string{"maxmemory-policy allkeys-lru", "maxmemory 100mb"}})
	h := newHarness(t)
	if code := h.run("doctor", "--redis", redisURL(s)); code != exitCritical {
		t.Errorf("doctor exit = %d, want %d", code, exitCritical)
	}
	out := h.stdout.String()
	for _, want := range []string{"CRITICAL  eviction", "fix: CONFIG SET maxmemory-policy noeviction", "WARN      persistence", "critical: 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctor_unreachable(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if code := h.run("doctor", "--redis", "redis://user:hunter2@127.0.0.1:1"); code != exitInternal {
		t.Errorf("doctor on a closed port: exit = %d, want %d", code, exitInternal)
	}
	if out := h.stdout.String() + h.stderr.String(); strings.Contains(out, "hunter2") || !strings.Contains(out, "CRITICAL  connect") {
		t.Errorf("doctor output = %q, want a connect finding and no password", out)
	}
}

func TestDoctor_sentinel(t *testing.T) {
	t.Parallel()
	code, _, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Sentinel: true}))
	wantFinding(t, fs, "mode", sevCritical, "Sentinel")
	if code != exitCritical {
		t.Errorf("doctor on a Sentinel: exit = %d, want %d", code, exitCritical)
	}
}

func TestDoctor_cluster(t *testing.T) {
	t.Parallel()
	// One node with cluster mode on and no slots: a Cluster that is down.
	code, _, fs := doctorJSON(t, redistest.Start(t, &redistest.Options{Config: []string{"cluster-enabled yes"}}))
	wantFinding(t, fs, "mode", sevWarn, "Cluster mode")
	wantFinding(t, fs, "lock", sevCritical, "test acquire failed")
	if code != exitCritical {
		t.Errorf("doctor on a Cluster without slots: exit = %d, want %d", code, exitCritical)
	}
}

// infoField reads one field of INFO's reply, as the test's own check.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// doctor names the server as Redis or Valkey, with its own version (not
// the Redis version Valkey says it is compatible with).
func TestDoctor_serverFlavour(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	info := s.Client(t).Info(t.Context(), "server").Val()
	want := "Redis " + infoField(info, "redis_version")
	if infoField(info, "server_name") == "valkey" {
		want = "Valkey " + infoField(info, "valkey_version")
	}
	_, rep, fs := doctorJSON(t, s)
	if rep.Server != want+", standalone" {
		t.Errorf("server = %q, want %q", rep.Server, want+", standalone")
	}
	wantFinding(t, fs, "server", sevOK, want)
}

// serverPath returns the release path the server takes: "delex",
// "delifeq" or "lua", by the test's own COMMAND INFO.
func serverPath(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	reply, err := rdb.Do(t.Context(), "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil || len(reply) != 2 {
		t.Fatalf("COMMAND INFO: %v, %v", reply, err)
	}
	switch {
	case reply[0] != nil:
		return "delex"
	case reply[1] != nil:
		return "delifeq"
	}
	return "lua"
}

// aclRule returns the library's rule for a server of path.
func aclRule(path string, cluster, minReplicas bool) string {
	return fencelock.ACLRule(&fencelock.ACLOptions{OlderServers: path == "lua", Redis84: path == "delex", Valkey9: path == "delifeq", Cluster: cluster, MinReplicas: minReplicas})
}

// setUser creates or resets an ACL user with password pw and rule, on
// every server.
func setUser(t *testing.T, user, rule string, servers ...*redistest.Server) {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">pw"}
	for _, f := range strings.Fields(rule) {
		args = append(args, f)
	}
	for _, s := range servers {
		if err := s.Client(t).Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", args, s.Addr(), err)
		}
	}
}

// grant runs a fix's "ACL SETUSER USER PERM..." (up to its first
// parenthesis or comma) on every server.
func grant(t *testing.T, fix string, servers ...*redistest.Server) {
	t.Helper()
	cmd, _, _ := strings.Cut(fix, ",")
	cmd, _, _ = strings.Cut(cmd, " (")
	var args []any
	for _, f := range strings.Fields(cmd) {
		args = append(args, f)
	}
	if len(args) < 4 || args[0] != "ACL" || args[1] != "SETUSER" {
		t.Fatalf("fix %q does not start with ACL SETUSER USER PERM...", fix)
	}
	for _, s := range servers {
		if err := s.Client(t).Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("the fix's %v: %v", args, err)
		}
	}
}

// An administrator's doctor --acl-user checks another user's permissions
// by ACL DRYRUN: the library's rule for the server passes; each missing
// permission is critical, named, with an ACL SETUSER that grants it
// (which works: after it, the check passes); a user with far more than
// locks need is warned of; a user that does not exist is critical.
func TestDoctor_acl(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	rule := aclRule(serverPath(t, admin), false, false)
	url := redisURL(s)

	setUser(t, "locks", rule, s)
	code, _, fs := doctorRun(t, nil, "--redis", url, "--acl-user", "locks")
	wantFinding(t, fs, "acl", sevOK, "ACL user locks may send all that fencelock sends")
	if f, ok := fs["privileges"]; ok {
		t.Errorf("privileges finding for the least-privilege user: %+v", f)
	}
	if code != 0 {
		t.Errorf("doctor exit = %d, want 0", code)
	}

	perms := strings.Fields(rule)
	for _, perm := range []string{"+pexpire", "+evalsha", perms[0], perms[1]} { // ~fencelock:* &fencelock:*
		t.Run(perm, func(t *testing.T) {
			user := "without-" + strings.Trim(perm, "+~&*:")
			setUser(t, user, strings.Join(slices.DeleteFunc(slices.Clone(perms), func(p string) bool { return p == perm }), " "), s)
			code, _, fs := doctorRun(t, nil, "--redis", url, "--acl-user", user)
			f := fs["acl"]
			if f.Severity != sevCritical || !strings.Contains(f.Message, "lacks "+perm) || !strings.HasPrefix(f.Fix, "ACL SETUSER "+user+" "+perm) {
				t.Errorf("acl finding = %+v, want critical, lacking %s, fixed by ACL SETUSER %s %s", f, perm, user, perm)
			}
			if code != exitCritical {
				t.Errorf("doctor exit = %d, want %d", code, exitCritical)
			}
			grant(t, f.Fix, s)
			_, _, fs = doctorRun(t, nil, "--redis", url, "--acl-user", user)
			wantFinding(t, fs, "acl", sevOK, "may send all")
		})
	}

	// The default user of redistest's servers: +@all ~* &*.
	_, _, fs = doctorRun(t, nil, "--redis", url)
	wantFinding(t, fs, "acl", sevOK, "ACL user default may send all")
	wantFinding(t, fs, "privileges", sevWarn, "FLUSHALL")
	for _, want := range []string{"CONFIG SET", "ACL SETUSER", "keys outside fencelock:*", "channels outside fencelock:*"} {
		if !strings.Contains(fs["privileges"].Message, want) {
			t.Errorf("privileges finding %q does not name %q", fs["privileges"].Message, want)
		}
	}
	if !strings.Contains(fs["privileges"].Fix, rule) {
		t.Errorf("privileges fix %q does not give the rule %q", fs["privileges"].Fix, rule)
	}

	code, _, fs = doctorRun(t, nil, "--redis", url, "--acl-user", "nobody-of-that-name")
	wantFinding(t, fs, "acl", sevCritical, "does not exist")
	if code != exitCritical {
		t.Errorf("doctor --acl-user of a missing user: exit = %d, want %d", code, exitCritical)
	}

	// With --min-replicas, WAIT is checked too: the rule lacks it.
	_, _, fs = doctorRun(t, nil, "--redis", url, "--acl-user", "locks", "--min-replicas", "1")
	wantFinding(t, fs, "acl", sevCritical, "lacks +wait")
	wantFinding(t, fs, "replication", sevCritical, "--min-replicas 1")

	// With --rueidis, what rueidis and valkey-go send too, which the
	// go-redis rule lacks; its fix works.
	_, _, fs = doctorRun(t, nil, "--redis", url, "--acl-user", "locks", "--rueidis")
	f := fs["acl"]
	if want := "lacks +discard +punsubscribe +sunsubscribe"; f.Severity != sevCritical || !strings.Contains(f.Message, want) {
		t.Fatalf("acl finding with --rueidis = %+v, want critical: %s", f, want)
	}
	grant(t, f.Fix, s)
	_, _, fs = doctorRun(t, nil, "--redis", url, "--acl-user", "locks", "--rueidis")
	wantFinding(t, fs, "acl", sevOK, "may send all")
}

// Every command permission of every rule that doctor checks has a probe:
// one without would go unchecked.
func TestACLProbe_everyCommand(t *testing.T) {
	t.Parallel()
	for i := range 1 << 6 {
		o := fencelock.ACLOptions{
			Cluster: i&1 != 0, Rueidis: i&2 != 0, Sentinel: i&4 != 0, MinReplicas: i&8 != 0,
			Redis84: i&16 != 0, Valkey9: i&32 != 0,
		}
		for _, perm := range strings.Fields(fencelock.ACLRule(&o)) {
			if perm[0] == '+' && aclProbe(perm, "fencelock:{k}", "fencelock:{k}:released") == nil {
				t.Errorf("no probe for %s, of the rule for %+v", perm, o)
			}
		}
	}
}

// A user with exactly the library's rule runs every fencelock command
// that takes locks (run, acquire, status, renew, release), and doctor
// too: doctor then says what it cannot audit (INFO, ACL DRYRUN) and its
// test lock passes. Nothing the commands send is refused but CLIENT
// SETINFO, which go-redis sends and whose refusal it ignores.
func TestDoctor_leastPrivilegeUser(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	admin := s.Client(t)
	setUser(t, "locker", aclRule(serverPath(t, admin), false, false), s)
	env := map[string]string{"REDIS_URL": redisURL(s), "REDIS_USERNAME": "locker", "REDIS_PASSWORD": "pw"}

	code, _, fs := doctorRun(t, env)
	wantFinding(t, fs, "server", sevWarn, "INFO is not permitted")
	wantFinding(t, fs, "acl", sevInfo, "may not run ACL DRYRUN")
	wantFinding(t, fs, "lock", sevOK, "tokens")
	if !strings.Contains(fs["acl"].Fix, "--acl-user locker") {
		t.Errorf("acl fix %q, want it to say --acl-user locker", fs["acl"].Fix)
	}
	if code != 0 {
		t.Errorf("doctor as the least-privilege user: exit = %d, want 0", code)
	}

	// What doctor was refused (INFO, ACL DRYRUN, CLIENT INFO) it said so.
	if err := admin.ACLLogReset(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	r := newHarness(t)
	r.env = env
	if code := r.run(append([]string{"run", "acl-run", "--"}, r.self("env")...)...); code != 0 {
		t.Errorf("run as the ACL rule's user: exit = %d, want 0", code)
	}
	vars := map[string]string{}
	for _, step := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"acquire", "acl-held"}, 0, ""},
		{[]string{"acquire", "-n", "acl-held"}, exitNotAcquired, "is held by lease"},
		{[]string{"status", "acl-held"}, 0, ""},
		{[]string{"renew"}, 0, ""},
		{[]string{"release"}, 0, ""},
	} {
		h := newHarness(t)
		for k, v := range env {
			h.env[k] = v
		}
		if step.args[0] == "renew" || step.args[0] == "release" {
			for k, v := range vars {
				h.env[k] = v
			}
		}
		if code := h.run(step.args...); code != step.want || !strings.Contains(h.stderr.String(), step.says) {
			t.Errorf("fencelock %q as the ACL rule's user: exit = %d, stderr %q; want %d, %q", step.args, code, h.stderr, step.want, step.says)
		}
		if step.args[0] == "acquire" && step.want == 0 {
			var err error
			if vars, err = parseShellAssignments(h.stdout.String()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := admin.Exists(t.Context(), "fencelock:{acl-held}").Val(); n != 0 {
		t.Errorf("lock held after release as the ACL rule's user")
	}
	entries, err := admin.Do(t.Context(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		m, _ := e.(map[any]any)
		if obj := fmt.Sprint(m["object"]); obj != "client|setinfo" {
			t.Errorf("ACL LOG: %v refused to the rule's user: the commands need more than the rule", m)
		}
	}
}

// On a Cluster, every master's permissions are checked with the Cluster
// rule (sharded pub/sub, CLUSTER SLOTS, COMMAND).
func TestDoctor_aclCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	rule := aclRule(serverPath(t, cl.Servers[0].Client(t)), true, false)
	setUser(t, "locks", rule, cl.Servers...)
	setUser(t, "nocluster", aclRule(serverPath(t, cl.Servers[0].Client(t)), false, false), cl.Servers...)
	url := "redis+cluster://" + strings.Join(cl.Addrs(), ",")

	code, rep, _ := doctorRun(t, nil, "--redis", url, "--acl-user", "locks")
	oks := 0
	for _, f := range rep.Findings {
		if f.Check == "acl" && f.Severity == sevOK {
			oks++
		} else if f.Check == "acl" {
			t.Errorf("acl finding %+v, want ok on every master", f)
		}
	}
	if oks != 3 || code != 0 {
		t.Errorf("doctor on a Cluster: %d masters' acl ok, exit %d; want 3, 0", oks, code)
	}
	_, rep, _ = doctorRun(t, nil, "--redis", url, "--acl-user", "nocluster")
	for _, f := range rep.Findings {
		if f.Check == "acl" && (f.Severity != sevCritical || !strings.Contains(f.Message, "+spublish") || !strings.Contains(f.Message, "+cluster|slots")) {
			t.Errorf("acl finding for the standalone rule on a Cluster = %+v, want critical lacking +spublish and +cluster|slots", f)
		}
	}
}
