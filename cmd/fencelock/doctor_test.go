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
