package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// acquireVars runs acquire and returns what it printed, parsed.
func acquireVars(t *testing.T, s *redistest.Server, args ...string) map[string]string {
	t.Helper()
	h := newHarness(t)
	if code := h.run(append([]string{"acquire", "--redis", redisURL(s)}, args...)...); code != 0 {
		t.Fatalf("acquire exit = %d, want 0", code)
	}
	vars, err := parseShellAssignments(h.stdout.String())
	if err != nil {
		t.Fatalf("parse acquire output: %v\n%s", err, h.stdout)
	}
	return vars
}

func TestAcquireRenewRelease(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	ctx := t.Context()
	vars := acquireVars(t, s, "--ttl", "10s", "script-job")

	stored := rdb.Get(ctx, "fencelock:{script-job}:token").Val()
	if got := vars["FENCELOCK_TOKEN"]; got != stored {
		t.Errorf("FENCELOCK_TOKEN = %q, want the stored token %q", got, stored)
	}
	if got, want := vars["FENCELOCK_SECRET"], rdb.Get(ctx, "fencelock:{script-job}").Val(); got != want {
		t.Errorf("FENCELOCK_SECRET is not the lock's owner value")
	}
	if h, err := fencelock.New(rdb, nil).Holder(ctx, "script-job"); err != nil || vars["FENCELOCK_LEASE"] != h.LeaseID {
		t.Errorf("FENCELOCK_LEASE = %q, want the holder's lease ID: %+v, %v", vars["FENCELOCK_LEASE"], h, err)
	}
	f, err := fence.Parse(vars["FENCELOCK_FENCE"])
	if err != nil || f.Lock != "script-job" || strconv.FormatInt(f.Token, 10) != stored || f.Lease != vars["FENCELOCK_LEASE"] {
		t.Errorf("FENCELOCK_FENCE = %q (%+v, %v), want lock, token and lease of the acquisition", vars["FENCELOCK_FENCE"], f, err)
	}
	if got := vars["FENCELOCK_LEASE_TTL"]; got != "10s" {
		t.Errorf("FENCELOCK_LEASE_TTL = %q, want 10s", got)
	}

	// A later process of the same script renews with a longer TTL, taking
	// the lease from the environment.
	h := newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s), "--ttl", "20s"); code != 0 {
		t.Fatalf("renew exit = %d, want 0", code)
	}
	if pttl := rdb.PTTL(ctx, "fencelock:{script-job}").Val(); pttl <= 10*time.Second {
		t.Errorf("PTTL after renew --ttl 20s = %v, want > 10s", pttl)
	}

	h = newHarness(t)
	h.env = vars
	if code := h.run("release", "--redis", redisURL(s), "script-job"); code != 0 {
		t.Fatalf("release exit = %d, want 0", code)
	}
	if n := rdb.Exists(ctx, "fencelock:{script-job}").Val(); n != 0 {
		t.Errorf("lock exists after release")
	}

	// The lease is gone now: renew says so, and does not re-create the
	// lock (a second release: TestRelease_twice).
	h = newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s)); code != exitLeaseLost {
		t.Errorf("renew after release: exit = %d, want %d", code, exitLeaseLost)
	}
	if n := rdb.Exists(ctx, "fencelock:{script-job}").Val(); n != 0 {
		t.Errorf("lock exists after a renew of a released lease; renew must not re-create it")
	}
}

func TestAcquire_held(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	acquireVars(t, s, "held")
	h := newHarness(t)
	if code := h.run("acquire", "--redis", redisURL(s), "-n", "held"); code != exitNotAcquired {
		t.Errorf("acquire -n of a held lock: exit = %d, want %d", code, exitNotAcquired)
	}
	if out, want := h.stdout.String(), "(exit 75)\n"; out != want {
		t.Errorf("acquire -n of a held lock printed %q, want %q", out, want)
	}
	h = newHarness(t)
	if code := h.run("acquire", "--redis", redisURL(s), "--json", "-n", "held"); code != exitNotAcquired || h.stdout.String() != "" {
		t.Errorf("acquire --json -n of a held lock: exit = %d, output %q; want %d and nothing", code, h.stdout, exitNotAcquired)
	}
}

// The documented idiom stops the script whenever acquire fails, in bash
// and dash alike: acquire then prints a failing statement, where nothing
// would make eval succeed and the script run without the lock.
func TestAcquire_evalIdiom(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	if _, err := fencelock.New(s.Client(t), &fencelock.Options{TTL: time.Minute}).TryAcquire(t.Context(), "eval-held"); err != nil {
		t.Fatal(err)
	}
	down := closedURL(t)
	for _, shell := range []string{"bash", "dash"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Errorf("no %s: install it (apt-get install %[1]s) to test the idiom in it", shell)
			continue
		}
		for _, tc := range []struct {
			what, url, args string
			want            int
		}{
			{"free lock", redisURL(s), "-n eval-free-" + shell, 0},
			{"held lock", redisURL(s), "-n eval-held", exitNotAcquired},
			{"held lock after --wait", redisURL(s), "--wait 50ms eval-held", exitNotAcquired},
			{"Redis down", down, "eval-down", exitInternal},
			{"bad flag", redisURL(s), "--ttl 10 eval-bad", exitUsage},
		} {
			// "$0" is fencelock (this test binary in main mode).
			script := `eval "$("$0" acquire --export --redis ` + tc.url + ` ` + tc.args + `)" || exit
echo "ran with token $FENCELOCK_TOKEN"`
			cmd := exec.Command(path, "-c", script, os.Args[0])
			cmd.Env = append(os.Environ(), mainEnv+"=1")
			out, err := cmd.Output()
			got := cmd.ProcessState.ExitCode()
			if got != tc.want {
				t.Errorf("%s, %s: script exit = %d (%v), want %d", shell, tc.what, got, err, tc.want)
			}
			if ran := strings.Contains(string(out), "ran with token"); ran != (tc.want == 0) {
				t.Errorf("%s, %s: script output %q; want it to run on only when acquired", shell, tc.what, out)
			}
		}
	}
}

// acquire --export leaves FENCELOCK_TTL alone: exported, it would be the
// --ttl of every later command in the shell. The lease's TTL goes out as
// FENCELOCK_LEASE_TTL, which renew alone reads.
func TestAcquire_exportKeepsTTLToTheLease(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	vars := acquireVars(t, s, "--export", "--ttl", "1m", "exported")
	if _, ok := vars["FENCELOCK_TTL"]; ok {
		t.Errorf("acquire --export set FENCELOCK_TTL=%s", vars["FENCELOCK_TTL"])
	}
	if got := vars["FENCELOCK_LEASE_TTL"]; got != "1m0s" {
		t.Errorf("FENCELOCK_LEASE_TTL = %q, want 1m0s", got)
	}

	// An unrelated run in the same shell gets the default TTL.
	h := newHarness(t)
	h.env = vars
	h.childEnv = append(h.childEnv, "FENCELOCK_LEASE_TTL=1m0s", "FENCELOCK_SECRET="+vars["FENCELOCK_SECRET"])
	done := h.start(append([]string{"run", "--redis", redisURL(s), "unrelated", "--"}, h.self("trap")...)...)
	h.stdout.waitFor(t, "ready")
	if pttl := rdb.PTTL(t.Context(), "fencelock:{unrelated}").Val(); pttl <= 0 || pttl > 10*time.Second {
		t.Errorf("PTTL of an unrelated run's lock = %v, want the default 10s", pttl)
	}
	h.signal(syscall.SIGTERM)
	h.exit(done)

	// renew keeps the lease's own TTL, from the environment or from
	// acquire's output on standard input.
	rdb.PExpire(t.Context(), "fencelock:{exported}", 5*time.Second)
	h = newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s)); code != 0 {
		t.Fatalf("renew exit = %d", code)
	}
	if pttl := rdb.PTTL(t.Context(), "fencelock:{exported}").Val(); pttl <= 10*time.Second {
		t.Errorf("PTTL after renew = %v, want the lease's 1m", pttl)
	}
	rdb.PExpire(t.Context(), "fencelock:{exported}", 5*time.Second)
	h = newHarness(t)
	h.env = map[string]string{"FENCELOCK_TTL": "20s"} // the lease's TTL wins over the general default
	for k, v := range vars {
		h.stdin += "export " + k + "=" + shellQuote(v) + "\n"
	}
	if code := h.run("renew", "--redis", redisURL(s)); code != 0 {
		t.Fatalf("renew < acquire's output: exit = %d", code)
	}
	if pttl := rdb.PTTL(t.Context(), "fencelock:{exported}").Val(); pttl <= 20*time.Second {
		t.Errorf("PTTL after renew < acquire's output = %v, want the lease's 1m", pttl)
	}
}

// Under "set -x" the shell traces what eval runs, FENCELOCK_SECRET
// included; with --secret-file, acquire writes the secret to a file of
// mode 0600 instead, prints FENCELOCK_SECRET_FILE in its place, and renew
// and release read it from there: the trace of the whole life cycle,
// in bash and dash, shows no secret.
func TestAcquire_secretFile(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, shell := range []string{"bash", "dash"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Errorf("no %s: install it (apt-get install %[1]s) to test the idiom in it", shell)
			continue
		}
		name := "secret-file-" + shell
		file := filepath.Join(t.TempDir(), "lease.secret")
		// "$0" is fencelock (this test binary in main mode).
		script := `set -x
eval "$("$0" acquire --export --secret-file ` + file + ` ` + name + `)" || exit
"$0" renew || exit
"$0" status ` + name + `
"$0" release || exit`
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, path, "-c", script, os.Args[0])
		cmd.Env = append(os.Environ(), mainEnv+"=1", "REDIS_URL="+redisURL(s))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s: script failed: %v\nstdout:\n%s\nstderr:\n%s", shell, err, &stdout, &stderr)
			continue
		}
		secret, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", shell, err)
			continue
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: secret file mode %v (%v), want 0600", shell, fi.Mode().Perm(), err)
		}
		sec := strings.TrimSpace(string(secret))
		if len(sec) < 16 {
			t.Errorf("%s: secret file holds %q, want the secret", shell, secret)
			continue
		}
		if strings.Contains(stderr.String(), sec) || strings.Contains(stdout.String(), sec) {
			t.Errorf("%s: the trace shows the secret:\n%s", shell, &stderr)
		}
		if !strings.Contains(stderr.String(), "FENCELOCK_SECRET_FILE="+file) || !strings.Contains(stdout.String(), "held   yes") {
			t.Errorf("%s: trace %q, stdout %q: want FENCELOCK_SECRET_FILE set and the lock held while the script ran", shell, &stderr, &stdout)
		}
		if n := rdb.Exists(t.Context(), "fencelock:{"+name+"}").Val(); n != 0 {
			t.Errorf("%s: lock exists after the script's release", shell)
		}
	}

	// --json: no secret in the JSON, the file named instead; release reads
	// the JSON on standard input.
	file := filepath.Join(t.TempDir(), "json.secret")
	h := newHarness(t)
	if code := h.run("acquire", "--redis", redisURL(s), "--json", "--secret-file", file, "secret-file-json"); code != 0 {
		t.Fatalf("acquire --json --secret-file: exit = %d", code)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(h.stdout.String()), &got); err != nil || got["secret"] != nil || got["secret_file"] != file {
		t.Errorf("acquire --json --secret-file printed %s (%v), want secret_file and no secret", h.stdout, err)
	}
	r := newHarness(t)
	r.stdin = h.stdout.String()
	if code := r.run("release", "--redis", redisURL(s)); code != 0 || r.stderr.String() != "" {
		t.Errorf("release < acquire --json --secret-file: exit = %d, stderr %q; want 0 and nothing", code, r.stderr)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{secret-file-json}").Val(); n != 0 {
		t.Errorf("lock exists after release")
	}

	// A file that cannot be written is a usage error, before the lock is
	// taken.
	h = newHarness(t)
	if code := h.run("acquire", "--redis", redisURL(s), "--secret-file", filepath.Join(t.TempDir(), "no", "such", "dir"), "secret-file-bad"); code != exitUsage {
		t.Errorf("acquire --secret-file in a missing directory: exit = %d, want %d", code, exitUsage)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{secret-file-bad}:token").Val(); n != 0 {
		t.Errorf("acquire --secret-file in a missing directory took the lock")
	}
}

// A --secret-file that cannot be written, or not safely replaced (a
// directory, a named pipe, a path under a file), is a usage error before anything is sent: no lock is taken, no
// token issued and given back, and the output fails eval.
func TestAcquire_secretFileUnwritable(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	before := connectionsReceived(t, rdb)
	for _, tc := range []struct{ path, want string }{
		{fifo, "is not a regular file"},
		{dir, "is a directory"},
		{dir + "/", "is a directory"},
		{filepath.Join(dir, "new") + "/", "names a directory"},
		{filepath.Join(file, "secret"), "cannot create a file there"},
	} {
		h := newHarness(t)
		if got := h.run("acquire", "--redis", redisURL(s), "--secret-file", tc.path, "secret-unwritable"); got != exitUsage {
			t.Errorf("acquire --secret-file %s: exit = %d, want %d (usage)", tc.path, got, exitUsage)
		}
		if got, want := h.stdout.String(), "(exit 2)\n"; got != want {
			t.Errorf("acquire --secret-file %s: stdout = %q, want %q", tc.path, got, want)
		}
		if got := h.stderr.String(); !strings.Contains(got, "--secret-file "+tc.path+": "+tc.want) {
			t.Errorf("acquire --secret-file %s: stderr = %q, want it to say %q", tc.path, got, tc.want)
		}
	}
	if after := connectionsReceived(t, rdb); after != before {
		t.Errorf("connections received %d before, %d after: want none made", before, after)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{secret-unwritable}", "fencelock:{secret-unwritable}:token").Val(); n != 0 {
		t.Errorf("%d of the lock and its token counter exist, want neither: nothing sent", n)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%s holds %d entries after the failures, want the file and the pipe alone: no temporary file left", dir, len(entries))
	}
}

// connectionsReceived returns the server's count of connections received.
func connectionsReceived(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info := rdb.Info(t.Context(), "stats").Val()
	m := regexp.MustCompile(`total_connections_received:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("INFO stats lacks total_connections_received:\n%s", info)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
