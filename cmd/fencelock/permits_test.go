package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/redistest"
)

// run --permits takes a permit, not the lock: COMMAND gets the permit's
// slot, its token and the slot's fence name, which a fenced store checks
// the token against. Slot 0 is held already, so that the slot is not
// just the first.
func TestRun_permitEnv(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	held, err := fencelock.New(rdb, nil).Semaphore("jobs", 3).TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer held.Release(t.Context())
	if held.Slot() != 0 {
		t.Fatalf("first permit's slot = %d, want 0", held.Slot())
	}

	h := newHarness(t)
	if code := h.run(append([]string{"run", "--redis", redisURL(s), "--permits", "3", "jobs", "--"}, h.self("env")...)...); code != 0 {
		t.Fatalf("run --permits exit = %d, want 0", code)
	}
	env := map[string]string{}
	for line := range strings.Lines(h.stdout.String()) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
		env[k] = v
	}
	stored, err := rdb.Get(t.Context(), "fencelock:{jobs}:permit:1:token").Int64()
	if err != nil {
		t.Fatalf("GET slot 1's token: %v", err)
	}
	slotName := fencelock.SlotName("jobs", 1)
	for k, want := range map[string]string{
		"FENCELOCK_NAME":  "jobs",
		"FENCELOCK_SLOT":  "1",
		"FENCELOCK_LOCK":  slotName,
		"FENCELOCK_TOKEN": strconv.FormatInt(stored, 10),
	} {
		if got := env[k]; got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	f, err := fence.Parse(env["FENCELOCK_FENCE"])
	if err != nil {
		t.Fatalf("fence.Parse(FENCELOCK_FENCE=%q): %v", env["FENCELOCK_FENCE"], err)
	}
	if want := (fence.Fence{Lock: slotName, Token: stored, Lease: env["FENCELOCK_LEASE"]}); f != want || f.Lease == "" {
		t.Errorf("FENCELOCK_FENCE = %+v, want %+v", f, want)
	}
	if n := rdb.Exists(t.Context(), "fencelock:{jobs}:permit:1", "fencelock:{jobs}", "fencelock:{jobs}:token").Val(); n != 0 {
		t.Errorf("after run --permits, %d of slot 1 and the lock jobs exist, want slot 1 released and the lock never taken", n)
	}
	if _, ok := env["FENCELOCK_SECRET"]; ok {
		t.Errorf("COMMAND got FENCELOCK_SECRET; the secret must stay with fencelock")
	}
}

// N+1 runs of a semaphore of N: N run their COMMAND at once, the last
// waits until one ends, and never do more than N run (each COMMAND counts
// the running ones in Redis). While N run, one more attempt (-n) is
// refused: had the last run taken a permit beyond N already, it would
// not get the freed slot; had it not, the attempt would take that
// permit.
func TestRun_permitsAtMostN(t *testing.T) {
	t.Parallel()
	const n = 3
	s := redistest.New(t)
	rdb := s.Client(t)
	out := newOutput() // every COMMAND's, one "ready" line each
	t.Cleanup(func() { // COMMANDs a failed test left waiting for SIGTERM
		for _, r := range readyLines(t, out.String()) {
			syscall.Kill(r.pid, syscall.SIGKILL)
		}
	})
	var (
		hs    []*harness
		dones []<-chan int
	)
	for range n + 1 {
		h := newHarness(t)
		h.stdout = out
		args := append([]string{"run", "--redis", redisURL(s), "--permits", strconv.Itoa(n), "workers", "--"}, h.self("count-trap")...)
		h.childEnv = append(h.childEnv, "FENCELOCK_TEST_REDIS="+s.Addr(), "FENCELOCK_TEST_KEY=test:running")
		hs, dones = append(hs, h), append(dones, h.start(args...))
	}
	out.waitForN(t, "ready", n)
	first := readyLines(t, out.String())
	holders, err := fencelock.New(rdb, nil).Semaphore("workers", n).Holders(t.Context())
	if err != nil {
		t.Fatalf("Holders: %v", err)
	}
	if len(holders) != n {
		t.Errorf("with %d COMMANDs ready, %d permits are held, want %d", n, len(holders), n)
	}
	probe := newHarness(t)
	if got := probe.run(append([]string{"run", "--redis", redisURL(s), "--permits", strconv.Itoa(n), "-n", "workers", "--"}, probe.self("env")...)...); got != exitNotAcquired || probe.stdout.String() != "" {
		t.Errorf("run -n while %d COMMANDs run: exit = %d, output %q; want %d and no COMMAND", n, got, probe.stdout, exitNotAcquired)
	}
	// One ends; the waiting run takes its slot.
	if err := syscall.Kill(first[0].pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out.waitForN(t, "ready", n+1)
	all := readyLines(t, out.String())
	if got, want := all[n].slot, first[0].slot; got != want {
		t.Errorf("the waiting run's slot = %q, want the freed slot %q", got, want)
	}
	for _, r := range all[1:] {
		syscall.Kill(r.pid, syscall.SIGTERM)
	}
	for i, done := range dones {
		if code := hs[i].exit(done); code != 3 {
			t.Errorf("run %d exit = %d, want the command's 3", i, code)
		}
	}
	slots := map[string]bool{}
	for i, r := range all {
		if r.running > n {
			t.Errorf("COMMAND %d started with %d COMMANDs running, want at most %d", i, r.running, n)
		}
		if i < n {
			slots[r.slot] = true
		}
	}
	if len(slots) != n {
		t.Errorf("the first %d COMMANDs had slots %v, want %d different ones", n, slots, n)
	}
	if got := rdb.Get(t.Context(), "test:running").Val(); got != "0" {
		t.Errorf("COMMANDs running at the end = %s, want 0", got)
	}
}

type readyLine struct {
	pid     int
	slot    string
	running int
}

var readyRE = regexp.MustCompile(`(?m)^ready (\d+) slot (\d+) running (\d+)$`)

// readyLines parses count-trap's "ready" lines, in order.
func readyLines(t *testing.T, out string) []readyLine {
	t.Helper()
	var rs []readyLine
	for _, m := range readyRE.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		running, _ := strconv.Atoi(m[3])
		rs = append(rs, readyLine{pid: pid, slot: m[2], running: running})
	}
	if len(rs) != strings.Count(out, "ready") {
		t.Fatalf("COMMAND output has malformed ready lines:\n%s", out)
	}
	return rs
}

// A permit's run stops its COMMAND when the lease is lost, as a lock's
// does: here slot 1's key is deleted.
func TestRun_permitLeaseLost(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	held, err := fencelock.New(rdb, nil).Semaphore("lost", 2).TryAcquire(t.Context())
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer held.Release(t.Context())
	h := newHarness(t)
	done := h.start(append([]string{"run", "--redis", redisURL(s), "--permits", "2", "--ttl", "10s", "--grace", "200ms", "lost", "--"}, h.self("ignore-term")...)...)
	h.stdout.waitFor(t, "ready")
	if err := rdb.Del(t.Context(), "fencelock:{lost}:permit:1").Err(); err != nil {
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
	if held.Context().Err() != nil {
		t.Errorf("slot 0's permit was lost with slot 1's: %v", context.Cause(held.Context()))
	}
}

// A permit's COMMAND is dead before the permit is issued again: run A
// loses its connection to Redis, so its lease runs out while its slot
// expires; run B, waiting for the one permit, checks that A's COMMAND,
// which ignores SIGTERM, no longer runs.
func TestRun_permitDeadBeforeNextHolder(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	p := redistest.NewProxy(t, s.Addr())
	a := newHarness(t)
	doneA := a.start(append([]string{"run", "--redis", "redis://" + p.Addr(), "--permits", "1", "--ttl", "10s", "--grace", "1s", "handoff", "--"}, a.self("ignore-term")...)...)
	a.stdout.waitFor(t, "ready")
	pid := readyPID(t, strings.TrimSpace(a.stdout.String()))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	b := newHarness(t)
	b.childEnv = append(b.childEnv, "FENCELOCK_TEST_PIDS="+strconv.Itoa(pid))
	doneB := b.start(append([]string{"run", "--redis", redisURL(s), "--permits", "1", "handoff", "--"}, b.self("check-dead")...)...)
	p.Partition()
	if got := a.exit(doneA); got != exitLeaseLost {
		t.Errorf("run A exit = %d, want %d", got, exitLeaseLost)
	}
	if got := b.exit(doneB); got != 0 {
		t.Errorf("run B's COMMAND exit = %d, want 0: run A's COMMAND must be dead when B holds the permit", got)
	}
}

// With every permit held, run -n exits 75 without running COMMAND.
func TestRun_permitsNotAcquired(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	sem := fencelock.New(s.Client(t), nil).Semaphore("full", 2)
	for range 2 {
		l, err := sem.TryAcquire(t.Context())
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		defer l.Release(t.Context())
	}
	h := newHarness(t)
	if got := h.run(append([]string{"run", "--redis", redisURL(s), "--permits", "2", "-n", "full", "--"}, h.self("env")...)...); got != exitNotAcquired {
		t.Errorf("run --permits 2 -n with both held: exit = %d, want %d", got, exitNotAcquired)
	}
	if out := h.stdout.String(); out != "" {
		t.Errorf("run with every permit held ran COMMAND: %q", out)
	}
	if got, want := h.stderr.String(), `every permit of semaphore "full" (2) is held by other leases`; !strings.Contains(got, want) {
		t.Errorf("stderr = %q, want it to say %q", got, want)
	}
}

// A bad --permits (or FENCELOCK_PERMITS) is a usage error, said plainly,
// before fencelock connects: the server gets no connection and no key.
func TestPermits_usage(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	connections := func() string {
		info := rdb.Info(t.Context(), "stats").Val()
		m := regexp.MustCompile(`total_connections_received:(\d+)`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("INFO stats lacks total_connections_received:\n%s", info)
		}
		return m[1]
	}
	before := connections()
	url := redisURL(s)
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{args: []string{"run", "--redis", url, "--permits", "0", "p", "--", "true"}, want: "--permits 0: want 1 to 1024 permits"},
		{args: []string{"run", "--redis", url, "--permits", "-1", "p", "--", "true"}, want: "--permits -1: want 1 to 1024 permits"},
		{args: []string{"run", "--redis", url, "--permits", "1025", "p", "--", "true"}, want: "--permits 1025: want 1 to 1024 permits"},
		{args: []string{"run", "--redis", url, "--permits", "three", "p", "--", "true"}, want: "--permits three: not a number"},
		{args: []string{"run", "--redis", url, "--permits", "1.5", "p", "--", "true"}, want: "--permits 1.5: not a number"},
		{args: []string{"run", "--redis", url, "--permits=", "p", "--", "true"}, want: "--permits : not a number"},
		{args: []string{"run", "--redis", url, "--permits", "2", "p{x}", "--", "true"}, want: "no { or }"},
		{env: map[string]string{"FENCELOCK_PERMITS": "0"}, args: []string{"run", "--redis", url, "p", "--", "true"}, want: "FENCELOCK_PERMITS=0: want 1 to 1024 permits"},
		{env: map[string]string{"FENCELOCK_PERMITS": "many"}, args: []string{"run", "--redis", url, "p", "--", "true"}, want: "FENCELOCK_PERMITS=many: not a number"},
		{args: []string{"elect", "--redis", url, "--permits", "2", "p", "--", "true"}, want: "-permits"},
		{args: []string{"status", "--redis", url, "--permits", "0", "p"}, want: "--permits 0: want 1 to 1024 permits"},
		{env: map[string]string{"FENCELOCK_PERMITS": "2000"}, args: []string{"status", "--redis", url, "p"}, want: "FENCELOCK_PERMITS=2000: want 1 to 1024 permits"},
	} {
		h := newHarness(t)
		if tc.env != nil {
			h.env = tc.env
		}
		if got := h.run(tc.args...); got != exitUsage {
			t.Errorf("fencelock %q (env %v): exit = %d, want %d (usage)", tc.args, tc.env, got, exitUsage)
		}
		if got := h.stderr.String(); !strings.Contains(got, tc.want) {
			t.Errorf("fencelock %q (env %v): stderr = %q, want it to say %q", tc.args, tc.env, got, tc.want)
		}
	}
	if after := connections(); after != before {
		t.Errorf("connections received %s before the usage errors, %s after: want none made", before, after)
	}
	if n := rdb.DBSize(t.Context()).Val(); n != 0 {
		t.Errorf("after usage errors, the server has %d keys, want 0", n)
	}
}

// status --permits shows each slot, held or free, with its holder's
// lease, TTL and token, as status does for a lock.
func TestStatus_permits(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	sem := fencelock.New(s.Client(t), &fencelock.Options{TTL: 30 * time.Second}).Semaphore("pool", 3)
	var ls []*fencelock.Lease
	for range 3 {
		l, err := sem.TryAcquire(t.Context())
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		defer l.Release(t.Context())
		ls = append(ls, l)
	}
	if err := ls[1].Release(t.Context()); err != nil { // slot 1 free, 0 and 2 held
		t.Fatalf("Release: %v", err)
	}

	h := newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "--json", "--permits", "3", "pool"); code != 0 {
		t.Fatalf("status --permits --json exit = %d", code)
	}
	var st semaphoreStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil {
		t.Fatalf("status --permits --json: %v\n%s", err, h.stdout)
	}
	if st.Name != "pool" || st.Permits != 3 || st.Free != 1 || len(st.Slots) != 3 {
		t.Fatalf("status --permits --json = %+v, want pool, 3 permits, 1 free, 3 slots", st)
	}
	for i, p := range st.Slots {
		want := permitStatus{Slot: i, Fence: fencelock.SlotName("pool", i)}
		if i != 1 {
			want.heldStatus = heldStatus{Held: true, Lease: ls[i].ID(), Token: ls[i].Token(), TTLms: p.TTLms}
			if p.TTLms <= 0 || p.TTLms > 30000 {
				t.Errorf("slot %d's ttl_ms = %d, want in (0, 30000]", i, p.TTLms)
			}
		}
		if p != want {
			t.Errorf("slot %d = %+v, want %+v", i, p, want)
		}
	}

	h = newHarness(t)
	h.env = map[string]string{"FENCELOCK_PERMITS": "3"}
	if code := h.run("status", "--redis", redisURL(s), "pool"); code != 0 {
		t.Fatalf("status with FENCELOCK_PERMITS exit = %d", code)
	}
	out := h.stdout.String()
	lines := strings.Split(out, "\n")
	if len(lines) < 6 || lines[0] != "semaphore  pool" || lines[1] != "permits    3, 1 free" {
		t.Fatalf("status --permits printed\n%s\nwant the semaphore, its permits and a line per slot", out)
	}
	for i, l := range ls {
		f := strings.Fields(lines[3+i])
		want := []string{strconv.Itoa(i), "yes", l.ID(), "", strconv.FormatInt(l.Token(), 10), "pool{permit", strconv.Itoa(i) + "}"}
		if i == 1 {
			want = []string{"1", "no", "-", "-", "-", "pool{permit", "1}"}
		}
		if len(f) != len(want) {
			t.Errorf("slot %d's line = %q, want fields %q", i, lines[3+i], want)
			continue
		}
		for j := range want {
			if want[j] != "" && f[j] != want[j] {
				t.Errorf("slot %d's line = %q, want fields %q", i, lines[3+i], want)
				break
			}
		}
	}
	if strings.Contains(out, ls[0].Secret()) {
		t.Errorf("status --permits printed a holder's secret:\n%s", out)
	}
}

// --permits takes up to fencelock.MaxPermits, that bound included.
func TestPermits_max(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	most := strconv.Itoa(fencelock.MaxPermits)
	h := newHarness(t)
	if code := h.run(append([]string{"run", "--redis", redisURL(s), "--permits", most, "big", "--"}, h.self("env")...)...); code != 0 {
		t.Fatalf("run --permits %s exit = %d, want 0", most, code)
	}
	if got := h.stdout.String(); !strings.Contains(got, "FENCELOCK_SLOT=0\n") {
		t.Errorf("run --permits %s: COMMAND's environment %q, want FENCELOCK_SLOT=0", most, got)
	}
	h = newHarness(t)
	if code := h.run("status", "--redis", redisURL(s), "--json", "--permits", most, "big"); code != 0 {
		t.Fatalf("status --permits %s exit = %d, want 0", most, code)
	}
	var st semaphoreStatus
	if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, h.stdout)
	}
	if st.Permits != fencelock.MaxPermits || st.Free != fencelock.MaxPermits || len(st.Slots) != fencelock.MaxPermits {
		t.Errorf("status --permits %s: %d permits, %d free, %d slots; want %[1]s of each", most, st.Permits, st.Free, len(st.Slots))
	}
}
