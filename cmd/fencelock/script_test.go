package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
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
	vars := acquireVars(t, s, "--ttl", "3s", "script-job")

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
	if got := vars["FENCELOCK_LEASE_TTL"]; got != "3s" {
		t.Errorf("FENCELOCK_LEASE_TTL = %q, want 3s", got)
	}

	// A later process of the same script renews with a longer TTL, taking
	// the lease from the environment.
	h := newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s), "--ttl", "20s"); code != 0 {
		t.Fatalf("renew exit = %d, want 0", code)
	}
	if pttl := rdb.PTTL(ctx, "fencelock:{script-job}").Val(); pttl <= 3*time.Second {
		t.Errorf("PTTL after renew --ttl 20s = %v, want > 3s", pttl)
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

// A second release of a released lease says so and succeeds, as the
// library's Release is idempotent: nothing is held that could block
// anyone. A lease whose lock another lease holds now is lost: 124,
// naming the holder.
func TestRelease_twice(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	vars := acquireVars(t, s, "twice")
	for i, want := range []string{"", `lock "twice" is not held: already released (or the lease expired)`} {
		h := newHarness(t)
		h.env = vars
		if code := h.run("release", "--redis", redisURL(s)); code != 0 {
			t.Errorf("release %d: exit = %d, want 0", i+1, code)
		}
		if want == "" {
			if h.stderr.String() != "" {
				t.Errorf("release 1: stderr %q, want nothing", h.stderr)
			}
			continue
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock release: "); !strings.Contains(msg, want) || strings.Contains(msg, "lost") {
			t.Errorf("release %d: stderr %q, want %q", i+1, msg, want)
		}
	}

	vars = acquireVars(t, s, "--ttl", "1s", "taken-over")
	rdb.Del(t.Context(), "fencelock:{taken-over}") // as if it expired
	other, err := fencelock.New(rdb, &fencelock.Options{TTL: time.Minute}).TryAcquire(t.Context(), "taken-over")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(t.Context())
	h := newHarness(t)
	h.env = vars
	if code := h.run("release", "--redis", redisURL(s)); code != exitLeaseLost {
		t.Errorf("release of a lock another lease holds: exit = %d, want %d", code, exitLeaseLost)
	}
	if msg := oneLine(t, h.stderr.String(), "fencelock release: "); !strings.Contains(msg, "lease lost") || !strings.Contains(msg, "held by lease "+other.ID()) {
		t.Errorf("release of a lock another lease holds: stderr %q, want lease lost, held by lease %s", msg, other.ID())
	}
	if n := rdb.Exists(t.Context(), "fencelock:{taken-over}").Val(); n != 1 {
		t.Errorf("the other lease's lock is gone after release of the lost lease")
	}
}

func TestRelease_stdin(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, form := range []string{"shell", "json", "bare"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			name := "stdin-" + form
			h := newHarness(t)
			args := []string{"acquire", "--redis", redisURL(s), name}
			if form == "json" {
				args = append(args[:1], append([]string{"--json"}, args[1:]...)...)
			}
			if code := h.run(args...); code != 0 {
				t.Fatalf("acquire exit = %d", code)
			}
			out := h.stdout.String()

			r := newHarness(t)
			switch form {
			case "shell", "json":
				r.stdin = out
			case "bare": // the secret alone, the token from the environment
				vars, err := parseShellAssignments(out)
				if err != nil {
					t.Fatal(err)
				}
				r.stdin = vars["FENCELOCK_SECRET"] + "\n"
				r.env = map[string]string{"FENCELOCK_TOKEN": vars["FENCELOCK_TOKEN"]}
			}
			if form == "json" {
				var info leaseInfo
				if err := json.Unmarshal([]byte(out), &info); err != nil || info.Secret == "" || info.Token <= 0 || info.Name != name {
					t.Fatalf("acquire --json = %s (%v), want name, token and secret", out, err)
				}
			}
			if code := r.run("release", "--redis", redisURL(s), name); code != 0 {
				t.Fatalf("release < %s exit = %d, want 0", form, code)
			}
			if n := rdb.Exists(t.Context(), "fencelock:{"+name+"}").Val(); n != 0 {
				t.Errorf("lock exists after release")
			}
		})
	}
}

func TestRenew_lost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	vars := acquireVars(t, s, "gone")
	rdb.Del(t.Context(), "fencelock:{gone}")
	h := newHarness(t)
	h.env = vars
	if code := h.run("renew", "--redis", redisURL(s)); code != exitLeaseLost {
		t.Errorf("renew of a deleted lock: exit = %d, want %d", code, exitLeaseLost)
	}
	if !strings.Contains(h.stderr.String(), "lease lost") {
		t.Errorf("renew stderr = %q, want the cause", h.stderr)
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

func TestStatus(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "--json", "report"); code != 0 {
		t.Fatalf("status of a free lock: exit = %d", code)
	}
	var st lockStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil || st.Held || st.Token != 0 {
		t.Errorf("status --json of a never-taken lock = %s (%v), want held false, token 0", h.stdout, err)
	}

	vars := acquireVars(t, s, "--ttl", "30s", "report")
	for _, asJSON := range []bool{false, true} {
		h := newHarness(t)
		args := []string{"status", "--redis", redisURL(s), "report"}
		if asJSON {
			args = []string{"status", "--json", "--redis", redisURL(s), "report"}
		}
		if code := h.run(args...); code != 0 {
			t.Fatalf("status exit = %d", code)
		}
		out := h.stdout.String()
		if strings.Contains(out, vars["FENCELOCK_SECRET"]) {
			t.Fatalf("status printed the owner secret: %s", out)
		}
		if !asJSON {
			for _, want := range []string{"held   yes", "lease  " + vars["FENCELOCK_LEASE"], "token  " + vars["FENCELOCK_TOKEN"]} {
				if !strings.Contains(out, want) {
					t.Errorf("status output = %q, want %q", out, want)
				}
			}
			continue
		}
		var st lockStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		token, _ := strconv.ParseInt(vars["FENCELOCK_TOKEN"], 10, 64)
		if !st.Held || st.Lease != vars["FENCELOCK_LEASE"] || st.Token != token || st.TTLms <= 0 || st.TTLms > 30000 {
			t.Errorf("status --json = %+v, want held by lease %s, token %d, ttl in (0, 30s]", st, vars["FENCELOCK_LEASE"], token)
		}
	}
}

func TestScriptCommands_usage(t *testing.T) {
	t.Parallel()
	const url = "redis://127.0.0.1:1" // nothing listens: usage errors come first
	for _, tc := range []struct {
		env   map[string]string
		stdin string
		args  []string
	}{
		{args: []string{"acquire", "--redis", url}},
		{args: []string{"acquire", "--redis", url, "a", "b"}},
		{args: []string{"acquire", "--redis", url, "--wait", "-1s", "a"}},
		{args: []string{"acquire", "--redis", url, "a{b"}},
		{args: []string{"status", "--redis", url}},
		{args: []string{"status", "--redis", url, "a}b"}},
		{args: []string{"renew", "--redis", url, "a"}},                                        // no secret anywhere
		{stdin: "s3cret", args: []string{"renew", "--redis", url, "a"}},                       // no token
		{stdin: "FENCELOCK_SECRET=$(rm -rf /)", args: []string{"renew", "--redis", url, "a"}}, // not data
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "x"}, args: []string{"release", "--redis", url, "a"}},
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1", "FENCELOCK_NAME": "a"}, args: []string{"release", "--redis", url, "b"}},
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1"}, args: []string{"release", "--redis", url}}, // no name
		{env: map[string]string{"FENCELOCK_SECRET": "s", "FENCELOCK_TOKEN": "1"}, args: []string{"release", "--redis", url, "a", "b"}},
	} {
		h := newHarness(t)
		h.env, h.stdin = tc.env, tc.stdin
		if h.env == nil {
			h.env = map[string]string{}
		}
		if got := h.run(tc.args...); got != exitUsage {
			t.Errorf("fencelock %q (env %v, stdin %q): exit = %d, want %d", tc.args, tc.env, tc.stdin, got, exitUsage)
		}
	}
}

// What acquire prints must mean the same to a real shell as to
// parseShellAssignments.
func TestShellAssign_sh(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	values := []string{"", "plain", "with space", "it's", `"double"`, "$HOME `id` $(id)", "a\nb", "back\\slash", "ünïcode", "1764431234567890;lock=\"a b\";lease=\"x\"", "'", "''", "*?[", "~", "#not-a-comment"}
	var script strings.Builder
	for i, v := range values {
		script.WriteString(shellAssign(i%2 == 0, "V"+strconv.Itoa(i), v))
	}
	var printf strings.Builder
	printf.WriteString(`eval "$(cat)"; printf '%s\0'`)
	for i := range values {
		printf.WriteString(` "$V` + strconv.Itoa(i) + `"`)
	}
	cmd := exec.Command(sh, "-c", printf.String())
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	vars, err := parseShellAssignments(script.String())
	if err != nil {
		t.Fatalf("parseShellAssignments: %v", err)
	}
	for i, want := range values {
		if i >= len(got) || got[i] != want {
			t.Errorf("sh read V%d as %q, want %q", i, got[min(i, len(got)-1)], want)
		}
		if p := vars["V"+strconv.Itoa(i)]; p != want {
			t.Errorf("parseShellAssignments read V%d as %q, want %q", i, p, want)
		}
	}
}

func TestParseShellAssignments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want map[string]string
	}{
		{"A=1\nB='x y'\n", map[string]string{"A": "1", "B": "x y"}},
		{"# comment\n\nexport A=a\\ b  # trailing\n", map[string]string{"A": "a b"}},
		{`A="q\"\$x"`, map[string]string{"A": `q"$x`}},
		{"A='it'\\''s'", map[string]string{"A": "it's"}},
		{"A=\r\nB=2\r\n", map[string]string{"A": "", "B": "2"}},
	} {
		got, err := parseShellAssignments(tc.in)
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("parseShellAssignments(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("parseShellAssignments(%q)[%s] = %q, want %q", tc.in, k, got[k], v)
			}
		}
	}
	for _, in := range []string{"A", "=1", "A=$x", "A=`id`", `A="$x"`, "A='open", `A="open`, "A=1; rm x", "A=1 B=2", "1A=x", "A=x\\"} {
		if got, err := parseShellAssignments(in); err == nil {
			t.Errorf("parseShellAssignments(%q) = %v, want an error", in, got)
		}
	}
}

func FuzzShellRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "it's", "a\nb", "$(x)", "\\", "\"", "'\\''"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, export bool) {
		line := shellAssign(export, "FENCELOCK_X", v)
		vars, err := parseShellAssignments(line)
		if err != nil {
			t.Fatalf("parseShellAssignments(%q): %v", line, err)
		}
		if got := vars["FENCELOCK_X"]; got != v {
			t.Fatalf("round trip of %q via %q = %q", v, line, got)
		}
	})
}

func FuzzParseLeaseInput(f *testing.F) {
	for _, s := range []string{
		"FENCELOCK_NAME=a\nFENCELOCK_TOKEN=5\nFENCELOCK_SECRET=s\n",
		`{"name":"a","token":5,"secret":"s"}`,
		"s3cret\n",
		"export FENCELOCK_SECRET='x y'",
		"FENCELOCK_TOKEN=-1",
		"FENCELOCK_NAME=a\nFENCELOCK_TOKEN=5\nFENCELOCK_SECRET_FILE=/tmp/s\n",
		`{"name":"a","token":5,"secret_file":"/tmp/s"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		info, err := parseLeaseInput(in)
		if err == nil && info.Secret == "" && info.SecretFile == "" {
			t.Fatalf("parseLeaseInput(%q) = %+v, nil; want a secret, a secret file or an error", in, info)
		}
		if err == nil && info.Token < 0 {
			t.Fatalf("parseLeaseInput(%q) accepted token %d", in, info.Token)
		}
	})
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

// /dev/null is a character device but no terminal: renew with standard
// input from it reads the (empty) input, as from any file, rather than
// refusing to read "from the terminal".
func TestLeaseInput_devNullIsNoTerminal(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	h := newHarness(t)
	c := h.cli()
	c.stdin = null
	if code := c.main(t.Context(), []string{"renew", "--redis", "redis://127.0.0.1:1", "x"}); code != exitUsage {
		t.Errorf("renew < /dev/null: exit = %d, want %d", code, exitUsage)
	}
	if msg := oneLine(t, h.stderr.String(), "fencelock renew: "); !strings.Contains(msg, "standard input: empty") {
		t.Errorf("renew < /dev/null: stderr %q, want it to have read standard input (empty)", msg)
	}
}
