package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// doctorJSON runs doctor --json against s and returns its exit status and
// findings by check.
func doctorJSON(t *testing.T, s *redistest.Server) (int, doctorReport, map[string]finding) {
	t.Helper()
	h := newHarness(t)
	code := h.run("doctor", "--json", "--redis", redisURL(s))
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

// When the test acquire fails for want of permissions, the fix lists what
// the library sends on this server: DELEX and SET on Redis >= 8.4,
// DELIFEQ and SET on Valkey >= 9, the scripts elsewhere. The ACL rule it
// gives is enough for run, acquire, status, renew and release.
func TestDoctor_aclNeeds(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	reply, err := rdb.Do(ctx, "COMMAND", "INFO", "DELEX", "DELIFEQ").Slice()
	if err != nil || len(reply) != 2 {
		t.Fatalf("COMMAND INFO: %v, %v", reply, err)
	}
	delex, delifeq := reply[0] != nil, reply[1] != nil
	if err := rdb.Do(ctx, "ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.env = map[string]string{"REDIS_USERNAME": "noscripts", "REDIS_PASSWORD": "pw"}
	h.run("doctor", "--json", "--redis", redisURL(s))
	var rep doctorReport
	if err := json.Unmarshal([]byte(h.stdout.String()), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, h.stdout)
	}
	var lock finding
	for _, f := range rep.Findings {
		if f.Check == "lock" {
			lock = f
		}
	}
	if lock.Severity != sevCritical || !strings.Contains(lock.Message, "NOPERM") {
		t.Fatalf("lock finding = %+v, want critical with NOPERM", lock)
	}
	for cmd, want := range map[string]bool{"EVALSHA": true, "DELEX (release)": delex, "DELIFEQ (release)": delifeq, "EVALSHA and EVAL for renew and release too": !delex && !delifeq} {
		if got := strings.Contains(lock.Fix, cmd); got != want {
			t.Errorf("fix mentions %q: %v, want %v (DELEX %v, DELIFEQ %v): %s", cmd, got, want, delex, delifeq, lock.Fix)
		}
	}
	_, rule, ok := strings.Cut(lock.Fix, "ACL SETUSER USER ")
	if !ok {
		t.Fatalf("fix has no ACL rule: %s", lock.Fix)
	}
	args := []any{"ACL", "SETUSER", "locker", "on", ">pw"}
	for _, f := range strings.Fields(rule) {
		args = append(args, f)
	}
	if err := rdb.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}

	env := map[string]string{"REDIS_URL": redisURL(s), "REDIS_USERNAME": "locker", "REDIS_PASSWORD": "pw"}
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
		h.env = map[string]string{}
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
			if vars, err = parseShellAssignments(h.stdout.String()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := rdb.Exists(ctx, "fencelock:{acl-held}").Val(); n != 0 {
		t.Errorf("lock held after release as the ACL rule's user")
	}
}
