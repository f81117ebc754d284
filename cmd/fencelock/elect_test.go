package main

import (
	"bufio"
	"encoding/json"
	"errors"
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
	"github.com/redis/go-redis/v9"
)

// readyTerm reads a term-trap child's "ready PID TERM TOKEN" line, and
// checks that the term is the token.
func readyTerm(t *testing.T, out *bufio.Reader) (pid int, term int64) {
	t.Helper()
	line := readLine(t, out)
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "ready" || f[2] != f[3] {
		t.Fatalf("COMMAND said %q, want ready PID TERM TOKEN with the term as token", line)
	}
	pid = readyPID(t, line)
	term, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || term <= 0 {
		t.Fatalf("COMMAND's FENCELOCK_TERM %q is not a term", f[2])
	}
	return pid, term
}

// waitCampaigning waits until n candidates wait for the election's lock
// to be released (their shared subscription's channel has n clients).
func waitCampaigning(t *testing.T, rdb *redis.Client, name string, n int64) {
	t.Helper()
	channel := "fencelock:{" + name + "}:released"
	redistest.WaitFor(t, 15*time.Second, strconv.FormatInt(n, 10)+" candidates campaigning", func() bool {
		got, err := rdb.PubSubNumSub(t.Context(), channel).Result()
		return err == nil && got[channel] >= n
	})
}

// watchLine reads one line of leader --watch --json.
func watchLine(t *testing.T, out *bufio.Reader) leaderInfo {
	t.Helper()
	line := readLine(t, out)
	var info leaderInfo
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		t.Fatalf("leader --watch --json said %q: %v", line, err)
	}
	return info
}

// watchUntil reads leader --watch --json lines until one names term, and
// returns the lines read: each a leader of a greater term than the last,
// or "no leader".
func watchUntil(t *testing.T, out *bufio.Reader, term int64, last *int64) []leaderInfo {
	t.Helper()
	var seen []leaderInfo
	for {
		info := watchLine(t, out)
		seen = append(seen, info)
		if info.Leader {
			if info.Term <= *last {
				t.Errorf("leader --watch: term %d after term %d, want increasing terms", info.Term, *last)
			}
			*last = info.Term
		}
		if info.Term == term {
			return seen
		}
		if info.Term > term {
			t.Fatalf("leader --watch: term %d, past the awaited %d: %+v", info.Term, term, seen)
		}
	}
}

// A second elect takes over when the first's command exits (the first
// resigns, and the second, which waited, leads at once), and a third when
// the second is killed (its command dies with it; the third leads once
// the lock expires). leader --watch sees each term in order, and each
// end between them.
func TestElect_takeover(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	url := redisURL(s)
	// --ttl 10s: the guard kills a COMMAND whose fencelock a loaded
	// machine starves for two thirds of the TTL, as it must; c waits for
	// the killed b's lease to run out.
	elect := func(value string, flags ...string) (*exec.Cmd, *bufio.Reader) {
		args := append([]string{"elect", "--redis", url, "--ttl", "10s", "--value", value}, flags...)
		return startFencelock(t, "term-trap", append(args, "jobs", "--", os.Args[0])...)
	}
	watch, watchOut := startFencelock(t, "", "leader", "--watch", "--json", "--redis", url, "jobs")
	if info := watchLine(t, watchOut); info.Leader || info.Election != "jobs" {
		t.Fatalf("leader --watch before any campaign: %+v, want no leader", info)
	}

	maddr := metricsAddr(t)
	a, aOut := elect("a", "--metrics-addr", maddr)
	pidA, termA := readyTerm(t, aOut)
	if got, _ := scrape(t, maddr); got[`fencelock_leases_held{lock="jobs"}`] != 1 || got[`fencelock_acquires_total{lock="jobs",result="acquired"}`] != 1 {
		t.Errorf("elect --metrics-addr while leading: %v, want the leadership held, acquired once", got)
	}
	var last int64
	if seen := watchUntil(t, watchOut, termA, &last); seen[len(seen)-1].Value != "a" {
		t.Errorf("leader --watch: %+v, want a leading", seen)
	}
	b, bOut := elect("b")
	waitCampaigning(t, rdb, "jobs", 1)
	syscall.Kill(pidA, syscall.SIGHUP) // A's command exits 3
	if code := waitExit(t, a); code != 3 {
		t.Errorf("first elect exit = %d, want its command's 3", code)
	}
	pidB, termB := readyTerm(t, bOut)
	if termB <= termA {
		t.Errorf("second term %d, want greater than the first %d", termB, termA)
	}
	seen := watchUntil(t, watchOut, termB, &last)
	if len(seen) != 2 || seen[0].Leader || seen[1].Value != "b" {
		t.Errorf("leader --watch after the first resigned: %+v, want no leader, then b", seen)
	}

	c, cOut := elect("c")
	waitCampaigning(t, rdb, "jobs", 1)
	b.Process.Kill()
	waitExit(t, b)
	waitDead(t, pidB) // its command died with it
	_, termC := readyTerm(t, cOut)
	if termC <= termB {
		t.Errorf("third term %d, want greater than the second %d", termC, termB)
	}
	if seen := watchUntil(t, watchOut, termC, &last); seen[len(seen)-1].Value != "c" {
		t.Errorf("leader --watch after the second was killed: %+v, want c at last", seen)
	}

	c.Process.Signal(syscall.SIGTERM) // forwarded: the command exits 3
	if code := waitExit(t, c); code != 3 {
		t.Errorf("third elect exit = %d, want its command's 3", code)
	}
	watch.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, watch); code != 0 {
		t.Errorf("leader --watch exit after SIGTERM = %d, want 0", code)
	}
}

// With --loop, elect campaigns again after its command exits and after
// the leadership is lost, each time with a greater term, until SIGTERM.
func TestElect_loop(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	e, out, stderr := startFencelockWith(t, nil, "term-trap", "elect", "--loop", "--loop-delay", "10ms", "--redis", redisURL(s), "--ttl", "30s", "looping", "--", os.Args[0])
	_, term1 := readyTerm(t, out)
	if err := rdb.Del(t.Context(), "fencelock:{looping}").Err(); err != nil { // the leadership is lost
		t.Fatal(err)
	}
	if got := readLine(t, out); got != "got terminated" {
		t.Errorf("COMMAND said %q after the leadership was lost, want got terminated", got)
	}
	pid2, term2 := readyTerm(t, out)
	syscall.Kill(pid2, syscall.SIGHUP) // the command exits 3
	if got := readLine(t, out); got != "got hangup" {
		t.Errorf("COMMAND said %q, want got hangup", got)
	}
	_, term3 := readyTerm(t, out)
	if !(term1 < term2 && term2 < term3) {
		t.Errorf("terms %d, %d, %d; want increasing", term1, term2, term3)
	}
	e.Process.Signal(syscall.SIGTERM)
	if got := readLine(t, out); got != "got terminated" {
		t.Errorf("COMMAND said %q after SIGTERM, want got terminated", got)
	}
	if code := waitExit(t, e); code != 3 {
		t.Errorf("elect --loop exit after SIGTERM = %d, want the last command's 3", code)
	}
	if n := strings.Count(stderr.String(), "campaigning again"); n != 2 {
		t.Errorf("stderr says campaigning again %d times, want 2:\n%s", n, stderr)
	}
	if _, err := fencelock.New(rdb, nil).Election("looping").Leader(t.Context()); !errors.Is(err, fencelock.ErrNoLeader) {
		t.Errorf("Leader after elect --loop ended: %v, want ErrNoLeader (it resigned)", err)
	}
}

// COMMAND gets the term, and never the secret; its status passes through,
// and elect resigns when it exits.
func TestElect_env(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	h := newHarness(t)
	h.childEnv = append(h.childEnv, "FENCELOCK_SECRET=from-an-earlier-acquire", "FENCELOCK_SECRET_FILE=/from/an/earlier/acquire")
	if code := h.run(append([]string{"elect", "--redis", redisURL(s), "--value", "me", "env-job", "--"}, h.self("env")...)...); code != 0 {
		t.Fatalf("elect exit = %d, want 0", code)
	}
	vars := map[string]string{}
	for line := range strings.Lines(h.stdout.String()) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		vars[k] = v
	}
	if vars["FENCELOCK_NAME"] != "env-job" || vars["FENCELOCK_TERM"] == "" || vars["FENCELOCK_TERM"] != vars["FENCELOCK_TOKEN"] {
		t.Errorf("COMMAND's environment %v, want the name, and the term as token", vars)
	}
	for _, k := range []string{"FENCELOCK_SECRET", "FENCELOCK_SECRET_FILE"} {
		if _, ok := vars[k]; ok {
			t.Errorf("COMMAND got %s", k)
		}
	}
	if f, err := fence.Parse(vars["FENCELOCK_FENCE"]); err != nil || strconv.FormatInt(f.Token, 10) != vars["FENCELOCK_TERM"] || f.Lease != vars["FENCELOCK_LEASE"] {
		t.Errorf("FENCELOCK_FENCE %q (%+v, %v), want the term %s and the lease", vars["FENCELOCK_FENCE"], f, err, vars["FENCELOCK_TERM"])
	}
	if _, err := fencelock.New(rdb, nil).Election("env-job").Leader(t.Context()); !errors.Is(err, fencelock.ErrNoLeader) {
		t.Errorf("Leader after elect: %v, want ErrNoLeader (it resigned)", err)
	}

	h = newHarness(t)
	h.childEnv = append(h.childEnv, "FENCELOCK_TEST_CODE=7")
	if code := h.run(append([]string{"elect", "--redis", redisURL(s), "env-job", "--"}, h.self("exit")...)...); code != 7 {
		t.Errorf("elect exit = %d, want the command's 7", code)
	}
}

// With --wait, a candidate that does not lead in time exits 75, naming
// the leader; bad arguments are usage errors.
func TestElect_waitAndUsage(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	e := fencelock.New(s.Client(t), nil).Election("taken")
	if _, err := e.Campaign(t.Context(), "the incumbent"); err != nil {
		t.Fatal(err)
	}
	defer e.Resign(t.Context())
	h := newHarness(t)
	if code := h.run(append([]string{"elect", "--redis", redisURL(s), "--wait", "300ms", "taken", "--"}, h.self("env")...)...); code != exitNotAcquired {
		t.Errorf("elect --wait of a led election: exit = %d, want %d", code, exitNotAcquired)
	}
	if e := h.stderr.String(); !strings.Contains(e, `is led by "the incumbent"`) || !strings.Contains(e, "after --wait 300ms") {
		t.Errorf("stderr = %q, want it to name the leader and the wait", e)
	}
	if h.stdout.String() != "" {
		t.Errorf("COMMAND ran: %q", h.stdout)
	}

	for _, args := range [][]string{
		{"elect", "--wait", "-1s", "x", "--", "true"},
		{"elect", "x"},
		{"elect", "--", "true"},
		{"elect", "a{b", "--", "true"},
		{"elect", "--value", "", "--redis", redisURL(s), "x", "--", "true"},
		{"elect", "--loop-delay", "-1s", "x", "--", "true"},
	} {
		h := newHarness(t)
		if code := h.run(args...); code != exitUsage {
			t.Errorf("fencelock %q: exit = %d, want %d", args, code, exitUsage)
		}
	}
}

// leader prints who leads, or says nobody does (exit 1), in text or
// JSON; never the secret.
func TestLeader(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	url := redisURL(s)
	h := newHarness(t)
	if code := h.run("leader", "--redis", url, "nobody"); code != exitNoLeader || !strings.Contains(h.stdout.String(), "leader    none") {
		t.Errorf("leader of an election without one: exit = %d, %q; want %d, leader none", code, h.stdout, exitNoLeader)
	}
	h = newHarness(t)
	if code := h.run("leader", "--json", "--redis", url, "nobody"); code != exitNoLeader || strings.TrimSpace(h.stdout.String()) != `{"election":"nobody","leader":false}` {
		t.Errorf("leader --json of an election without one: exit = %d, %q", code, h.stdout)
	}

	e := fencelock.New(s.Client(t), nil).Election("led")
	l, err := e.Campaign(t.Context(), "10.0.0.7:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Resign(t.Context())
	h = newHarness(t)
	if code := h.run("leader", "--redis", url, "led"); code != 0 {
		t.Errorf("leader exit = %d, want 0", code)
	}
	for _, want := range []string{"leader    10.0.0.7:8080", "term      " + strconv.FormatInt(l.Token(), 10), "lease     " + l.ID(), "since     "} {
		if !strings.Contains(h.stdout.String(), want) {
			t.Errorf("leader output %q lacks %q", h.stdout, want)
		}
	}
	h = newHarness(t)
	if code := h.run("leader", "--json", "--redis", url, "led"); code != 0 {
		t.Errorf("leader --json exit = %d, want 0", code)
	}
	var info leaderInfo
	if err := json.Unmarshal([]byte(h.stdout.String()), &info); err != nil {
		t.Fatal(err)
	}
	if !info.Leader || info.Value != "10.0.0.7:8080" || info.Term != l.Token() || info.Lease != l.ID() || time.Since(info.Since) > time.Minute {
		t.Errorf("leader --json = %+v, want the leader's value, term %d, lease %s, since", info, l.Token(), l.ID())
	}
	if strings.Contains(h.stdout.String(), l.Secret()) {
		t.Errorf("leader printed the secret")
	}
}

// leader --watch prints the leader, each value it proclaims, its end, and
// the next term, in order.
func TestLeader_watch(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	watch, out := startFencelock(t, "", "leader", "--watch", "--redis", redisURL(s), "watched")
	if got := readLine(t, out); got != "no leader" {
		t.Fatalf("leader --watch said %q, want no leader", got)
	}
	c := fencelock.New(s.Client(t), nil)
	e1, e2 := c.Election("watched"), c.Election("watched")
	l1, err := e1.Campaign(t.Context(), "first")
	if err != nil {
		t.Fatal(err)
	}
	prefix := "term=" + strconv.FormatInt(l1.Token(), 10) + " lease=" + l1.ID() + " since="
	if got := readLine(t, out); !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, ` value="first"`) {
		t.Errorf("leader --watch said %q, want %s... value=\"first\"", got, prefix)
	}
	if err := e1.Proclaim(t.Context(), "first, renamed"); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, out); !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, ` value="first, renamed"`) {
		t.Errorf("leader --watch said %q after Proclaim, want the same term, the new value", got)
	}
	if err := e1.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := readLine(t, out); got != "no leader" {
		t.Errorf("leader --watch said %q after Resign, want no leader", got)
	}
	l2, err := e2.Campaign(t.Context(), "second")
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Resign(t.Context())
	if got := readLine(t, out); !strings.HasPrefix(got, "term="+strconv.FormatInt(l2.Token(), 10)+" ") || l2.Token() <= l1.Token() {
		t.Errorf("leader --watch said %q, want the greater term %d", got, l2.Token())
	}
	watch.Process.Signal(syscall.SIGINT)
	if code := waitExit(t, watch); code != 0 {
		t.Errorf("leader --watch exit after SIGINT = %d, want 0", code)
	}
}

// leader --watch says on stderr why it waits when Redis fails, and goes
// on once Redis is back.
func TestLeader_watchReportsErrors(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	watch, out, stderr := startFencelockWith(t, nil, "", "leader", "--watch", "--redis", redisURL(s), "--timeout", "500ms", "flaky")
	if got := readLine(t, out); got != "no leader" {
		t.Fatalf("leader --watch said %q, want no leader", got)
	}
	s.Kill(t)
	stderr.waitFor(t, "observe read failed")
	s.Start(t)
	e := fencelock.New(s.Client(t), nil).Election("flaky")
	l, err := e.Campaign(t.Context(), "back")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Resign(t.Context())
	if got := readLine(t, out); !strings.HasPrefix(got, "term="+strconv.FormatInt(l.Token(), 10)+" ") {
		t.Errorf("leader --watch said %q once Redis was back, want term %d", got, l.Token())
	}
	watch.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, watch); code != 0 {
		t.Errorf("leader --watch exit = %d, want 0", code)
	}
}

// elect has run's no-wait flags: -n, --no-wait and --wait 0 make one
// attempt, which exits 75 at once, naming the leader, if another
// candidate leads, and leads if nobody does.
func TestElect_noWait(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	e := fencelock.New(s.Client(t), nil).Election("led")
	if _, err := e.Campaign(t.Context(), "the incumbent"); err != nil {
		t.Fatal(err)
	}
	defer e.Resign(t.Context())
	for _, flag := range [][]string{{"-n"}, {"--no-wait"}, {"--wait", "0"}} {
		h := newHarness(t)
		start := time.Now()
		code := h.run(append(append(append([]string{"elect", "--redis", redisURL(s)}, flag...), "led", "--"), h.self("env")...)...)
		if code != exitNotAcquired {
			t.Errorf("elect %s of a led election: exit = %d, want %d", flag, code, exitNotAcquired)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("elect %s of a led election took %v, want one attempt (within 5s)", flag, took)
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock elect: "); !strings.Contains(msg, `is led by "the incumbent"`) {
			t.Errorf("elect %s: stderr %q, want it to name the leader", flag, msg)
		}
		if h.stdout.String() != "" {
			t.Errorf("elect %s: COMMAND ran: %q", flag, h.stdout)
		}

		h = newHarness(t)
		if code := h.run(append(append(append([]string{"elect", "--redis", redisURL(s)}, flag...), "free-"+flag[0], "--"), h.self("env")...)...); code != 0 {
			t.Errorf("elect %s of a free election: exit = %d, want 0", flag, code)
		}
		if !strings.Contains(h.stdout.String(), "FENCELOCK_TERM=") {
			t.Errorf("elect %s of a free election: COMMAND said %q, want its term", flag, h.stdout)
		}
	}
	h := newHarness(t)
	if code := h.run("elect", "--redis", redisURL(s), "-n", "--wait", "1s", "x", "--", "true"); code != exitUsage {
		t.Errorf("elect -n --wait 1s: exit = %d, want %d", code, exitUsage)
	}
}

// leader --watch runs until interrupted, also when started with SIGINT
// and SIGTERM ignored, as a non-interactive shell starts a background
// job ("fencelock leader --watch x &" in a script).
func TestLeader_watchInterruptedThoughIgnored(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command("sh", "-c", `trap "" INT TERM; exec "$0" "$@"`, os.Args[0], "leader", "--watch", "--redis", redisURL(s), "watched")
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		p := startCmd(t, cmd)
		p.stdout.waitFor(t, "no leader")
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.done:
			if code := p.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("leader --watch, %v: exit = %d, want 0 (interrupted)\nstderr:\n%s", sig, code, p.stderr)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("leader --watch started with %v ignored did not exit within 10s of it", sig)
		}
	}
}
