package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A COMMAND that runs for several TTLs while fencelock renews the lease
// is not killed: the guard's first deadline, which it was started with,
// gives way to each later one fencelock tells it.
func TestRun_renewedPastFirstDeadline(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	h.childEnv = append(h.childEnv, "FENCELOCK_TEST_SLEEP=15s")
	args := append([]string{"run", "--redis", redisURL(s), "--ttl", "6s", "--grace", "500ms", "renewed", "--"}, h.self("sleep")...)
	if got := h.run(args...); got != 0 {
		t.Errorf("run exit = %d, want 0 (COMMAND ran 2.5 TTLs, its lease renewed)\nstderr: %s", got, h.stderr.String())
	}
}

func TestRun_leaseLost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	h := newHarness(t)
	args := append([]string{"run", "--redis", redisURL(s), "--ttl", "10s", "--grace", "200ms", "lost", "--"}, h.self("ignore-term")...)
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
		{"run", "--redis", url, "name", "--ttl", "5s", "extra", "--", "true"},
		{"run", "--redis", url, "name", "-x"},
		{"run", "--redis", url, "--", "true"},
		{"run", "--redis", url, "--bogus", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "ten", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "1ns", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "48h", "name", "--", "true"},
		{"run", "--redis", url, "--wait", "-1s", "name", "--", "true"},
		{"run", "--redis", url, "--grace", "-1s", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "0", "name", "--", "true"},
		{"run", "--redis", url, "--ttl", "10", "name", "--", "true"},
		{"run", "--redis", url, "--grace", "10s", "name", "--", "true"},                   // more than half the 10s TTL
		{"run", "--redis", url, "--ttl", "2s", "--grace", "1001ms", "name", "--", "true"}, // likewise
		{"run", "--redis", url, "-n", "--wait", "1s", "name", "--", "true"},
		{"run", "--redis", url, "--wait", "-1s", "name", "--", "true"},
		{"run", "--redis", url, "--timeout", "0", "name", "--", "true"},
		{"run", "--redis", "redis://127.0.0.1:99999", "name", "--", "true"},
		{"run", "--redis", "redis://127.0.0.1:0", "name", "--", "true"},
		{"run", "--redis", "redis+sentinel://127.0.0.1:70000/m", "name", "--", "true"},
		{"run", "--redis", "redis+cluster://127.0.0.1:1,127.0.0.1:65536", "name", "--", "true"},
		{"run", "--redis", "http://example.com", "name", "--", "true"},
		{"run", "--redis", "redis://[::1", "name", "--", "true"},
		{"run", "--redis", "redis://127.0.0.1:1/notadb", "name", "--", "true"},
		{"run", "--redis", "redis+sentinel://127.0.0.1:1", "name", "--", "true"},
		{"run", "--redis", url, "--prefix", "", "name", "--", "true"},
		{"run", "--redis", url, "--lock-delay", "-1s", "name", "--", "true"},
		{"run", "--redis", url, "--lock-delay", "1ns", "name", "--", "true"},
		{"run", "--redis", url, "--lock-delay", "2h", "name", "--", "true"},
		{"run", "--redis", url, "--lock-delay", "soon", "name", "--", "true"},
		{"elect", "--redis", url, "--lock-delay", "-1s", "name", "--", "true"},
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
		{"FENCELOCK_LOCK_DELAY": "-5s"},
		{"FENCELOCK_WAIT": "x"},
		{"FENCELOCK_GRACE": "1"},
		{"FENCELOCK_GRACE": "6s"}, // more than half the default 10s TTL
		{"FENCELOCK_TTL": "0"},
		{"FENCELOCK_TTL": "0s"},
		{"FENCELOCK_TIMEOUT": "0s"},
		{"REDIS_URL": "redis://localhost:123456"},
		{"REDIS_URL": "ftp://x"},
	} {
		h := newHarness(t)
		h.env = env
		if got := h.run("run", "name", "--", "true"); got != exitUsage {
			t.Errorf("fencelock run with env %v: exit = %d, want %d", env, got, exitUsage)
		}
	}
}

// Each command's -h shows its own flags and exit statuses only; every
// URL form of --redis is in "fencelock -h".
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd          string
		want, unwant []string
	}{
		{"run", []string{"-n, --no-wait", "--wait", "--grace", "--timeout", "--ttl", "--permits n", "FENCELOCK_SLOT", "FENCELOCK_LOCK", "75", "124", "126", "127", "flock"}, []string{"doctor found", "--json"}},
		{"acquire", []string{"-n, --no-wait", "--wait", "--ttl", "--export", "75", "(exit N)", "--secret-file", "set -x", "-E, --conflict-exit-code"}, []string{"124", "126", "--grace"}},
		{"renew", []string{"--ttl", "124", "FENCELOCK_LEASE_TTL"}, []string{"75 ", "126", "--wait"}},
		{"release", []string{"124", "--timeout"}, []string{"--ttl", "75 ", "126", "--wait"}},
		{"status", []string{"--json", "--permits n", "125"}, []string{"--ttl", "124", "75 "}},
		{"doctor", []string{"--json", "--ttl", "  1 ", "--acl-user", "--min-replicas", "--rueidis", "ACL DRYRUN", "--cacert"}, []string{"124", "75 "}},
		{"elect", []string{"-n, --no-wait", "--value", "--loop", "--loop-delay", "--wait", "--grace", "--foreground", "FENCELOCK_TERM", "124", "126", "127", "--tls", "--cacert", "--cert", "--key", "--sni", "--insecure"}, []string{"--json", "doctor found", "--permits"}},
		{"leader", []string{"--watch", "--json", "  1    nobody leads", "125"}, []string{"--ttl", "124", "75 ", "--grace"}},
		{"demo", []string{"--ttl"}, []string{"124", "--timeout"}},
		{"version", nil, []string{"124", "--redis"}},
	} {
		h := newHarness(t)
		if got := h.run(tc.cmd, "-h"); got != 0 {
			t.Errorf("fencelock %s -h: exit = %d, want 0", tc.cmd, got)
		}
		out := h.stdout.String()
		if !strings.HasPrefix(out, "Usage: fencelock "+tc.cmd) || !strings.Contains(out, "Exit status:\n") {
			t.Errorf("fencelock %s -h printed %q, want usage and the exit statuses", tc.cmd, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("fencelock %s -h lacks %q:\n%s", tc.cmd, w, out)
			}
		}
		for _, w := range tc.unwant {
			if strings.Contains(out, w) {
				t.Errorf("fencelock %s -h mentions %q, which is not its own:\n%s", tc.cmd, w, out)
			}
		}
		// --redis is a short text here; the URL forms are in fencelock -h.
		if strings.Contains(out, "[user:password@]") {
			t.Errorf("fencelock %s -h spells out every URL form:\n%s", tc.cmd, out)
		}
	}
	h := newHarness(t)
	if got := h.run("-h"); got != 0 {
		t.Errorf("fencelock -h: exit %d, want 0", got)
	}
	for _, w := range []string{"Exit status", "redis+sentinel://[user:password@]host:port", "redis+cluster://", "REDIS_USERNAME", "--timeout", "--prefix", "a server certificate", "no { or }"} {
		if !strings.Contains(h.stdout.String(), w) {
			t.Errorf("fencelock -h lacks %q:\n%s", w, h.stdout)
		}
	}
}

// With Redis frozen (SIGSTOP), renewals get no answer: COMMAND gets
// SIGTERM once the lease can no longer be renewed in time, --grace before
// its deadline, rather than after the lease is gone.
func TestRun_redisFrozen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, want string
	}{
		{"trap", "exited after SIGTERM"},           // stops on SIGTERM
		{"ignore-term", "was killed with SIGKILL"}, // SIGKILL at the deadline
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			s := redistest.New(t)
			h := newHarness(t)
			done := h.start(append([]string{"run", "--redis", redisURL(s), "--ttl", "10s", "--grace", "500ms", "frozen", "--"}, h.self(tc.mode)...)...)
			h.stdout.waitFor(t, "ready")
			frozen := time.Now()
			s.Pause(t)
			t.Cleanup(func() { s.Resume(t) })
			if got := h.exit(done); got != exitLeaseLost {
				t.Errorf("run exit = %d, want %d", got, exitLeaseLost)
			}
			t.Logf("Redis frozen → fencelock exited after %v (TTL 10s, grace 500ms)", time.Since(frozen).Round(time.Millisecond))
			stderr := h.stderr.String()
			for _, want := range []string{"cannot be renewed in time", "sending SIGTERM to COMMAND, SIGKILL at the lease's deadline", tc.want} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr = %q, want it to say %q", stderr, want)
				}
			}
			if tc.mode == "trap" && !strings.Contains(h.stdout.String(), "got terminated") {
				t.Errorf("COMMAND output = %q, want SIGTERM", h.stdout)
			}
		})
	}
}

// COMMAND is dead before another run can hold the lock: run A loses its
// connection to Redis (a partition), so its lease runs out while Redis
// lets the lock expire; run B, waiting meanwhile, gets the lock and checks
// that A's COMMAND, which ignores SIGTERM, no longer runs.
func TestRun_deadBeforeNextHolder(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewProxy(t, s.Addr())
	a := newHarness(t)
	doneA := a.start(append([]string{"run", "--redis", "redis://" + p.Addr(), "--ttl", "10s", "--grace", "1s", "handoff", "--"}, a.self("ignore-term")...)...)
	a.stdout.waitFor(t, "ready")
	pid := readyPID(t, strings.TrimSpace(a.stdout.String()))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	b := newHarness(t)
	b.childEnv = append(b.childEnv, "FENCELOCK_TEST_PIDS="+strconv.Itoa(pid))
	doneB := b.start(append([]string{"run", "--redis", redisURL(s), "handoff", "--"}, b.self("check-dead")...)...)
	p.Partition()
	if got := a.exit(doneA); got != exitLeaseLost {
		t.Errorf("run A exit = %d, want %d", got, exitLeaseLost)
	}
	if got := b.exit(doneB); got != 0 {
		t.Errorf("run B's COMMAND exit = %d, want 0: run A's COMMAND must be dead when B holds the lock", got)
	}
}

// BenchmarkRun_redisFrozen measures, with Redis frozen by SIGSTOP right
// after a renewal (so the lease has its full TTL left), the time from the
// freeze to COMMAND's death, against the TTL, and how long before Redis
// would let another holder in (the renewed lock's PEXPIRETIME) COMMAND
// was dead: for a COMMAND that stops on SIGTERM (sent --grace before the
// lease's deadline) and for one that only SIGKILL stops (sent at the
// deadline). fencelock runs as a process of its own.
//
//	go test -run '^$' -bench BenchmarkRun_redisFrozen -benchtime 5x ./cmd/fencelock
func BenchmarkRun_redisFrozen(b *testing.B) {
	for _, ttl := range []time.Duration{2 * time.Second, 10 * time.Second} {
		grace := ttl / 4
		for _, mode := range []string{"trap", "ignore-term"} {
			b.Run(fmt.Sprintf("ttl=%v/%s", ttl, mode), func(b *testing.B) {
				s := redistest.New(b)
				rdb := s.Client(b)
				var toDeath, margin time.Duration
				minMargin := time.Duration(math.MaxInt64)
				for i := range b.N {
					name := "frozen-" + strconv.Itoa(i)
					cmd := exec.Command(os.Args[0], "run", "--redis", redisURL(s), "--ttl", ttl.String(), "--grace", grace.String(), name, "--", os.Args[0])
					cmd.Env = append(os.Environ(), mainEnv+"=1", childEnv+"="+mode)
					out, _ := cmd.StdoutPipe()
					if err := cmd.Start(); err != nil {
						b.Fatal(err)
					}
					r := bufio.NewReader(out)
					line, _ := r.ReadString('\n')
					f := strings.Fields(line)
					if len(f) < 2 {
						b.Fatalf("COMMAND said %q", line)
					}
					pid, _ := strconv.Atoi(f[1])
					key := "fencelock:{" + name + "}"
					first := rdb.PExpireTime(b.Context(), key).Val()
					expiry := first
					for deadline := time.Now().Add(ttl); expiry == first; expiry = rdb.PExpireTime(b.Context(), key).Val() {
						if time.Now().After(deadline) {
							b.Fatal("no renewal within the TTL")
						}
						time.Sleep(time.Millisecond) // polls Redis for the renewal
					}
					frozen := time.Now()
					s.Pause(b)
					for alive(pid) {
						time.Sleep(time.Millisecond) // polls the kernel for COMMAND's death
					}
					dead := time.Now()
					s.Resume(b)
					cmd.Wait()
					toDeath += dead.Sub(frozen)
					m := time.UnixMilli(0).Add(expiry).Sub(dead)
					margin += m
					minMargin = min(minMargin, m)
				}
				b.ReportMetric(float64(toDeath.Milliseconds())/float64(b.N), "ms-freeze-to-death")
				b.ReportMetric(float64(margin.Milliseconds())/float64(b.N), "ms-dead-before-expiry")
				b.ReportMetric(float64(minMargin.Milliseconds()), "ms-dead-before-expiry-min")
				b.ReportMetric(float64(ttl.Milliseconds()), "ms-ttl")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// A run (or elect) inside another's COMMAND gives its own COMMAND the
// variables of its own lease alone: neither the outer permit's
// FENCELOCK_SLOT and FENCELOCK_LOCK nor the outer term's FENCELOCK_TERM,
// which a script building its fence from them would send under the wrong
// name. Nor does the outer run's FENCELOCK_PERMITS, which configured its
// own semaphore, make the inner run a semaphore's: the inner NAME is a
// lock.
func TestRun_nestedEnv(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	url := redisURL(s)
	for _, tc := range []struct {
		name  string
		env   map[string]string // the outer fencelock's, and its COMMAND's
		outer []string
	}{
		{name: "permit", outer: []string{"run", "--redis", url, "--permits", "2", "outer-permit"}},
		{name: "term", outer: []string{"elect", "--redis", url, "outer-term"}},
		{name: "permits-env", env: map[string]string{"FENCELOCK_PERMITS": "2"}, outer: []string{"run", "--redis", url, "outer-env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inner := "inner-" + tc.name
			h := newHarness(t)
			for k, v := range tc.env {
				h.env[k] = v
				h.childEnv = append(h.childEnv, k+"="+v)
			}
			// The outer COMMAND is fencelock (this binary in main mode),
			// whose own COMMAND prints its environment.
			h.childEnv = append(h.childEnv, mainEnv+"=1")
			args := append(append(tc.outer, "--"), os.Args[0], "run", "--redis", url, inner, "--")
			args = append(args, h.self("env")...)
			if code := h.run(args...); code != 0 {
				t.Fatalf("exit = %d, want 0", code)
			}
			env := map[string]string{}
			for line := range strings.Lines(h.stdout.String()) {
				k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
				env[k] = v
			}
			stored, err := rdb.Get(t.Context(), "fencelock:{"+inner+"}:token").Int64()
			if err != nil {
				t.Fatalf("GET the inner lock's token: %v (the inner run took no lock %q)", err, inner)
			}
			f, err := fence.Parse(env["FENCELOCK_FENCE"])
			if err != nil {
				t.Fatalf("fence.Parse(FENCELOCK_FENCE=%q): %v", env["FENCELOCK_FENCE"], err)
			}
			want := map[string]string{
				"FENCELOCK_NAME":  inner,
				"FENCELOCK_TOKEN": strconv.FormatInt(stored, 10),
				"FENCELOCK_LEASE": f.Lease,
				"FENCELOCK_FENCE": fence.Fence{Lock: inner, Token: stored, Lease: f.Lease}.String(),
			}
			if fmt.Sprint(env) != fmt.Sprint(want) {
				t.Errorf("inner COMMAND's FENCELOCK_ variables = %v, want its own lease's alone: %v", env, want)
			}
		})
	}
}

// --grace defaults to TTL/3 (or 10s if that is shorter): with --ttl 24s
// a lost lease gives COMMAND 8s between SIGTERM and SIGKILL, where half
// the TTL would give the 10s cap. 24s outlasts a loaded machine's stalls
// before COMMAND is ready, and COMMAND leaves at SIGTERM, so the test
// never waits for the deadline.
func TestRun_defaultGrace(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	h := newHarness(t)
	done := h.start(append([]string{"run", "--redis", redisURL(s), "--ttl", "24s", "default-grace", "--"}, h.self("trap")...)...)
	h.stdout.waitFor(t, "ready")
	if err := rdb.Del(t.Context(), "fencelock:{default-grace}").Err(); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := h.exit(done); got != exitLeaseLost {
		t.Errorf("run exit = %d, want %d (lease lost)", got, exitLeaseLost)
	}
	if got, want := h.stderr.String(), "sending SIGTERM to COMMAND, SIGKILL in 8s\n"; !strings.Contains(got, want) {
		t.Errorf("stderr = %q, want it to say %q", got, want)
	}
}
