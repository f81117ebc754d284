package main

import (
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
)

func TestRun_env(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "nightly-report", "--"}, h.self("env")...)
	if code := h.run(args...); code != 0 {
		t.Fatalf("run exit = %d, want 0", code)
	}
	env := map[string]string{}
	for line := range strings.Lines(h.stdout.String()) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		env[k] = v
	}
	stored, err := rdb.Get(t.Context(), "fencelock:{nightly-report}:token").Int64()
	if err != nil {
		t.Fatalf("GET token: %v", err)
	}
	if got, want := env["FENCELOCK_NAME"], "nightly-report"; got != want {
		t.Errorf("FENCELOCK_NAME = %q, want %q", got, want)
	}
	if got, want := env["FENCELOCK_TOKEN"], strconv.FormatInt(stored, 10); got != want {
		t.Errorf("FENCELOCK_TOKEN = %q, want the issued token %q", got, want)
	}
	if env["FENCELOCK_LEASE"] == "" {
		t.Errorf("FENCELOCK_LEASE is empty")
	}
	f, err := fence.Parse(env["FENCELOCK_FENCE"])
	if err != nil {
		t.Fatalf("fence.Parse(FENCELOCK_FENCE=%q): %v", env["FENCELOCK_FENCE"], err)
	}
	if want := (fence.Fence{Lock: "nightly-report", Token: stored, Lease: env["FENCELOCK_LEASE"]}); f != want {
		t.Errorf("FENCELOCK_FENCE = %+v, want %+v", f, want)
	}
	if _, ok := env["FENCELOCK_SECRET"]; ok {
		t.Errorf("COMMAND got FENCELOCK_SECRET; the secret must stay with fencelock")
	}
	if n := rdb.Exists(t.Context(), "fencelock:{nightly-report}").Val(); n != 0 {
		t.Errorf("lock exists after run = %d, want released", n)
	}
}

func TestRun_exitStatusPassesThrough(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, want := range []int{0, 1, 3, 42, 124} {
		t.Run(strconv.Itoa(want), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.childEnv = append(h.childEnv, "FENCELOCK_TEST_CODE="+strconv.Itoa(want))
			args := append([]string{"run", "--redis", redisURL(s), "exit-" + strconv.Itoa(want), "--"}, h.self("exit")...)
			if got := h.run(args...); got != want {
				t.Errorf("run exit = %d, want the command's %d", got, want)
			}
		})
	}
}

func TestRun_leaseLost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--ttl", "900ms", "--grace", "200ms", "lost", "--"}, h.self("ignore-term")...)
	done := h.start(args...)
	h.stdout.waitFor(t, "ready")

	// An operator, an eviction or a failover removes the lock.
	if err := rdb.Del(t.Context(), "fencelock:{lost}").Err(); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := h.exit(done); got != exitLeaseLost {
		t.Fatalf("run exit = %d, want %d (lease lost)", got, exitLeaseLost)
	}
	stderr := h.stderr.String()
	for _, want := range []string{"lease lost", "SIGKILL", "signal: killed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr = %q, want it to mention %q", stderr, want)
		}
	}
}

func TestRun_forwardsSignals(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			args := append([]string{"run", "--redis", redisURL(s), "sig-" + strconv.Itoa(int(sig)), "--"}, h.self("trap")...)
			done := h.start(args...)
			h.stdout.waitFor(t, "ready")
			h.signal(sig)
			if got := h.exit(done); got != 3 {
				t.Errorf("run exit = %d, want the command's 3", got)
			}
			if got, want := h.stdout.String(), "got "+sig.String(); !strings.Contains(got, want) {
				t.Errorf("COMMAND output = %q, want %q", got, want)
			}
		})
	}
}

func TestRun_notAcquired(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	holder, err := fencelock.New(s.Client(t), nil).TryAcquire(t.Context(), "busy")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer holder.Release(t.Context())

	for _, wait := range []string{"0", "150ms"} {
		h := newHarness(t)
		args := append([]string{"run", "--redis", redisURL(s), "--wait", wait, "busy", "--"}, h.self("env")...)
		if got := h.run(args...); got != exitNotAcquired {
			t.Errorf("run --wait %s on a held lock: exit = %d, want %d", wait, got, exitNotAcquired)
		}
		if out := h.stdout.String(); out != "" {
			t.Errorf("run --wait %s on a held lock ran COMMAND: %q", wait, out)
		}
	}
}

func TestRun_waitsForRelease(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	holder, err := fencelock.New(s.Client(t), nil).TryAcquire(t.Context(), "queue")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--wait", "20s", "queue", "--"}, h.self("env")...)
	done := h.start(args...)
	// Whether run is already waiting or not, it gets the lock after this.
	if err := holder.Release(t.Context()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := h.exit(done); got != 0 {
		t.Fatalf("run exit = %d, want 0", got)
	}
	if want := "FENCELOCK_TOKEN=" + strconv.FormatInt(holder.Token(), 10); strings.Contains(h.stdout.String(), want) {
		t.Errorf("COMMAND got the previous holder's token (%s)", want)
	}
}

func TestRun_commandNotRunnable(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, tc := range []struct {
		cmd  string
		want int
	}{
		{"/nonexistent/fencelock-test", exitNotFound},
		{"fencelock-test-no-such-command", exitNotFound},
		{t.TempDir(), exitCannotExec}, // a directory
	} {
		h := newHarness(t)
		if got := h.run("run", "--redis", redisURL(s), "unrunnable", "--", tc.cmd); got != tc.want {
			t.Errorf("run -- %s: exit = %d, want %d", tc.cmd, got, tc.want)
		}
	}
	// The lock was never taken: no token was spent.
	if n := rdb.Exists(t.Context(), "fencelock:{unrunnable}:token").Val(); n != 0 {
		t.Errorf("token key exists after unrunnable commands; want no acquisition")
	}
}

func TestRun_usage(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a usage error must come before connecting.
	const url = "redis://127.0.0.1:1"
	for _, args := range [][]string{
		{"run"},
		{"run", "--redis", url},
		{"run", "--redis", url, "name"},
		{"run", "--redis", url, "name", "--"},
		{"run", "--redis", url, "name", "extra", "--", "true"},
		{"run", "--redis", url, "--", "true"},
		{"run", "--redis", url, "--bogus", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "ten", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "1ns", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "48h", "name", "--", "true"},
		{"run", "--redis", url, "--wait", "-1s", "name", "--", "true"},
		{"run", "--redis", url, "--grace", "-1s", "name", "--", "true"},
		{"run", "--redis", "http://example.com", "name", "--", "true"},
		{"run", "--redis", "redis://[::1", "name", "--", "true"},
		{"run", "--redis", "redis://127.0.0.1:1/notadb", "name", "--", "true"},
		{"run", "--redis", "redis+sentinel://127.0.0.1:1", "name", "--", "true"},
		{"run", "--redis", url, "--prefix", "", "name", "--", "true"},
		{"run", "--redis", url, "bad{name}", "--", "true"},
		{"bogus"},
		{},
	} {
		h := newHarness(t)
		if got := h.run(args...); got != exitUsage {
			t.Errorf("fencelock %q: exit = %d, want %d (usage)", args, got, exitUsage)
		}
	}
}

func TestRun_usageFromEnv(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{
		{"FENCELOCK_TTL": "soon"},
		{"FENCELOCK_WAIT": "x"},
		{"FENCELOCK_GRACE": "1"},
		{"REDIS_URL": "ftp://x"},
	} {
		h := newHarness(t)
		h.env = env
		if got := h.run("run", "name", "--", "true"); got != exitUsage {
			t.Errorf("fencelock run with env %v: exit = %d, want %d", env, got, exitUsage)
		}
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"run", "acquire", "renew", "release", "status", "doctor", "demo", "version"} {
		h := newHarness(t)
		if got := h.run(cmd, "-h"); got != 0 {
			t.Errorf("fencelock %s -h: exit = %d, want 0", cmd, got)
		}
		if out := h.stdout.String(); !strings.Contains(out, "Usage: fencelock "+cmd) || !strings.Contains(out, "124") {
			t.Errorf("fencelock %s -h printed %q, want usage and the exit codes", cmd, out)
		}
	}
	h := newHarness(t)
	if got := h.run("-h"); got != 0 || !strings.Contains(h.stdout.String(), "Exit status") {
		t.Errorf("fencelock -h: exit %d, output %q; want 0 and the exit codes", got, h.stdout)
	}
}

func FuzzRedisOptions(f *testing.F) {
	for _, s := range []string{
		"redis://127.0.0.1:6379", "rediss://user:secretpw@host:6380/2", "unix:///tmp/r.sock?db=1",
		"redis://:secretpw@h/x", "redis://u:secretpw@[::1", "http://u:secretpw@h", "redis+sentinel://u:secretpw@h/m",
		"redis://u:secretpw@h/?dial_timeout=bad",
		"redis+sentinel://u:secretpw@h1:1,h2:2/m/0", "rediss+sentinel://u:secretpw@h/m?addr=secretpw",
		"redis+sentinel://u:secretpw@h/m?password=secretpw", "redis+cluster://u:secretpw@h1,h2:2?dial_timeout=secretpw",
		"rediss+cluster://:secretpw@h/5", "redis+cluster://u:secretpw@h:secretpw",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		_, err := redisOptions(raw, func(string) string { return "" })
		if err == nil {
			return
		}
		// Whatever went wrong, the message must not repeat the URL's
		// password, nor anything of a URL that does not parse.
		pw, shown := "secretpw", ""
		if u, perr := url.Parse(raw); perr == nil {
			pw, _ = u.User.Password()
			shown = u.Redacted() // the password may also be the user or host
		}
		if strings.Contains(pw, "secretpw") && strings.Count(err.Error(), pw) > strings.Count(shown, pw) {
			t.Fatalf("redisOptions(%q) error %q reveals the password", raw, err)
		}
	})
}
