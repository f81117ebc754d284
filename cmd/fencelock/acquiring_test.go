package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// closedURL returns a redis:// URL whose connections are refused.
func closedURL(t *testing.T) string {
	t.Helper()
	return "redis://" + redistest.RefusedAddr(t)
}

// blackhole listens on a random port and accepts connections, but never
// answers, like a frozen or firewalled server. Each accepted connection is
// announced on the returned channel.
func blackhole(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan struct{}, 64)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), acc
}

// waitWaiting waits until a run or acquire waits for the lock name: it
// has subscribed to the lock's release channel.
func waitWaiting(t *testing.T, s *redistest.Server, name string) {
	t.Helper()
	rdb := s.Client(t)
	redistest.WaitFor(t, 15*time.Second, "a waiter for "+name, func() bool {
		n, err := rdb.PubSubNumSub(t.Context(), "fencelock:{"+name+"}:released").Result()
		return err == nil && n["fencelock:{"+name+"}:released"] > 0
	})
}

// Like flock, etcdctl lock and consul lock, run waits for a held lock by
// default; -n and --no-wait make one attempt.
func TestRun_waitsByDefault(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	holder, err := fencelock.New(s.Client(t), nil).TryAcquire(t.Context(), "default-wait")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"-n", "--no-wait", "--wait=0"} {
		h := newHarness(t)
		if got := h.run(append([]string{"run", "--redis", redisURL(s), flag, "default-wait", "--"}, h.self("env")...)...); got != exitNotAcquired {
			t.Errorf("run %s on a held lock: exit = %d, want %d", flag, got, exitNotAcquired)
		}
		if h.stdout.String() != "" {
			t.Errorf("run %s on a held lock ran COMMAND", flag)
		}
	}
	h := newHarness(t)
	done := h.start(append([]string{"run", "--redis", redisURL(s), "default-wait", "--"}, h.self("env")...)...)
	waitWaiting(t, s, "default-wait")
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := h.exit(done); got != 0 {
		t.Errorf("run after the holder released: exit = %d, want 0", got)
	}
	if !strings.Contains(h.stdout.String(), "FENCELOCK_TOKEN=") {
		t.Errorf("COMMAND did not run: %q", h.stdout)
	}
}

// "Not acquired" names who holds the lock, by public lease ID and
// remaining TTL, on one line: no library prefix inside, no second line
// from errors.Join.
func TestRun_heldMessage(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	holder, err := fencelock.New(s.Client(t), &fencelock.Options{TTL: time.Minute}).TryAcquire(t.Context(), "held-msg")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(t.Context())
	for _, args := range [][]string{
		{"run", "-n", "held-msg", "--", "true"},
		{"run", "--wait", "100ms", "held-msg", "--", "true"},
		{"acquire", "-n", "held-msg"},
		{"acquire", "--wait", "100ms", "held-msg"},
	} {
		h := newHarness(t)
		h.env["REDIS_URL"] = redisURL(s)
		if got := h.run(args...); got != exitNotAcquired {
			t.Errorf("fencelock %q: exit = %d, want %d", args, got, exitNotAcquired)
		}
		msg := oneLine(t, h.stderr.String(), "fencelock "+args[0]+": ")
		for _, want := range []string{`lock "held-msg" is held by lease ` + holder.ID(), "left of its TTL"} {
			if !strings.Contains(msg, want) {
				t.Errorf("fencelock %q: stderr %q, want %q", args, msg, want)
			}
		}
		if args[1] == "--wait" && !strings.Contains(msg, "after --wait 100ms") {
			t.Errorf("fencelock %q: stderr %q, want it to name --wait", args, msg)
		}
		if strings.Contains(msg, holder.Secret()) {
			t.Errorf("fencelock %q printed the holder's secret", args)
		}
	}
}

// oneLine checks that stderr is one line with prefix, and nothing in it
// repeats the library's "fencelock: " prefix; it returns the line.
func oneLine(t *testing.T, stderr, prefix string) string {
	t.Helper()
	line, rest, _ := strings.Cut(stderr, "\n")
	if rest != "" || !strings.HasPrefix(line, prefix) || strings.Contains(line, "fencelock: ") {
		t.Errorf("stderr = %q, want one line starting %q, without a second \"fencelock: \"", stderr, prefix)
	}
	return line
}

// Usage errors are one line each, and say what to write.
func TestUsage_messages(t *testing.T) {
	t.Parallel()
	const url = "redis://127.0.0.1:1"
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"run", "--redis", url, "--ttl", "10", "x", "--", "true"}, "--ttl 10: a duration needs a unit, e.g. 10s"},
		{map[string]string{"FENCELOCK_WAIT": "3"}, []string{"run", "--redis", url, "x", "--", "true"}, "FENCELOCK_WAIT=3: a duration needs a unit, e.g. 3s"},
		{nil, []string{"run", "--redis", url, "--grace", "soon", "x", "--", "true"}, "--grace soon: not a duration: write e.g. 10s"},
		{nil, []string{"run", "--redis", url, "--ttl", "0", "x", "--", "true"}, "--ttl 0s: want a duration from 10ms to 24h, e.g. 30s"},
		{map[string]string{"FENCELOCK_TTL": "0"}, []string{"acquire", "--redis", url, "x"}, "FENCELOCK_TTL=0s: want a duration from 10ms"},
		{nil, []string{"acquire", "--redis", url, "--ttl", "5ms", "x"}, "--ttl 5ms: want a duration from 10ms to 24h, e.g. 30s"},
		{nil, []string{"acquire", "--redis", url, "--ttl", "25h", "x"}, "--ttl 25h0m0s: want a duration from 10ms to 24h, e.g. 30s"},
		{nil, []string{"run", "--redis", url, "--ttl", "3s", "--grace", "2s", "x", "--", "true"}, "--grace 2s is more than half of --ttl 3s"},
		{nil, []string{"run", "--redis", url, "--ttl", "30ms", "x", "--", "true"}, "--ttl 30ms: run needs a TTL of at least 100ms"},
		{map[string]string{"FENCELOCK_TTL": "10ms"}, []string{"elect", "--redis", url, "x", "--", "true"}, "FENCELOCK_TTL=10ms: elect needs a TTL of at least 100ms"},
		{nil, []string{"run", "--redis", url, "--grace", "6s", "x", "--", "true"}, "--grace 6s is more than half of --ttl 10s (the default)"},
		{nil, []string{"run", "--redis", url, "bad{name}", "--", "true"}, "no { or }"},
		{nil, []string{"status", "--redis", url, "tab\there"}, "use only letters, digits, spaces and punctuation"},
		{nil, []string{"acquire", "--redis", url, strings.Repeat("x", 513)}, "lock name has 513 characters: use 1 to 512"},
		{nil, []string{"run", "--redis", "redis://127.0.0.1:99999", "x", "--", "true"}, `port "99999" is not a number from 1 to 65535`},
		{nil, []string{"run", "--redis", url, "-n", "--wait", "1s", "x", "--", "true"}, "--no-wait and --wait 1s contradict"},
	} {
		h := newHarness(t)
		if tc.env != nil {
			h.env = tc.env
		}
		if got := h.run(tc.args...); got != exitUsage {
			t.Errorf("fencelock %q: exit = %d, want %d", tc.args, got, exitUsage)
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock "+tc.args[0]+": "); !strings.Contains(msg, tc.want) {
			t.Errorf("fencelock %q: stderr %q, want %q", tc.args, msg, tc.want)
		}
	}
}

// --ttl 0 is refused everywhere it is accepted at all, before anything is
// written: no lock is left held, no release runs with a zero timeout.
func TestTTLZero(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, args := range [][]string{
		{"run", "--ttl", "0", "zero", "--", "true"},
		{"acquire", "--ttl", "0", "zero"},
		{"acquire", "--ttl", "0s", "--json", "zero"},
		{"renew", "--ttl", "0", "zero"},
		{"doctor", "--ttl", "0"},
	} {
		for _, fromEnv := range []bool{false, true} {
			h := newHarness(t)
			h.env = map[string]string{"REDIS_URL": redisURL(s), "FENCELOCK_SECRET": "s3cret", "FENCELOCK_TOKEN": "1", "FENCELOCK_NAME": "zero"}
			a := args
			if fromEnv {
				a = append(append([]string{}, args[0]), args[3:]...)
				h.env["FENCELOCK_TTL"] = args[2]
			}
			if got := h.run(a...); got != exitUsage {
				t.Errorf("fencelock %q (FENCELOCK_TTL %q): exit = %d, want %d", a, h.env["FENCELOCK_TTL"], got, exitUsage)
			}
		}
	}
	if n := rdb.DBSize(t.Context()).Val(); n != 0 {
		t.Errorf("keys after refused --ttl 0 = %d, want 0: %v", n, rdb.Keys(t.Context(), "*").Val())
	}
}

// Redis unreachable is exit 125 with the real error, with --wait too:
// never "not acquired".
func TestRun_redisUnreachable(t *testing.T) {
	t.Parallel()
	url := closedURL(t)
	for _, args := range [][]string{
		{"run", "--wait", "3s", "x", "--", "true"},
		{"run", "x", "--", "true"},
		{"run", "-n", "x", "--", "true"},
		{"acquire", "--wait", "3s", "x"},
		{"status", "x"},
		{"release", "x"},
	} {
		h := newHarness(t)
		h.env = map[string]string{"REDIS_URL": url, "FENCELOCK_SECRET": "s3cret", "FENCELOCK_TOKEN": "1"}
		if got := h.run(args...); got != exitInternal {
			t.Errorf("fencelock %q, Redis down: exit = %d, want %d", args, got, exitInternal)
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock "+args[0]+": "); !strings.Contains(msg, "connection refused") {
			t.Errorf("fencelock %q, Redis down: stderr %q, want the real error", args, msg)
		}
	}
}

// A Redis that goes away while run waits for the lock ends the wait with
// 125 and the real error, not 75 when --wait runs out.
func TestRun_redisFailsWhileWaiting(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	if _, err := fencelock.New(s.Client(t), &fencelock.Options{TTL: time.Minute}).TryAcquire(t.Context(), "goes-away"); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	done := h.start("run", "--redis", redisURL(s), "--wait", "3s", "goes-away", "--", "true")
	waitWaiting(t, s, "goes-away")
	s.Kill(t)
	if got := h.exit(done); got != exitInternal {
		t.Errorf("run --wait 3s, Redis killed while waiting: exit = %d, want %d", got, exitInternal)
	}
	stderr := h.stderr.String()
	if !strings.Contains(stderr, "retrying") || strings.Contains(stderr, "not acquired") {
		t.Errorf("stderr = %q, want the connection error while waiting", stderr)
	}
	if last := stderr[strings.LastIndex(strings.TrimSuffix(stderr, "\n"), "\n")+1:]; !strings.Contains(last, "Redis failed: ") || !strings.Contains(last, "connection refused") {
		t.Errorf("last line of stderr = %q, want the connection error", last)
	}
}

// Interrupted (SIGINT, SIGTERM) while connecting to a Redis that does not
// answer: the documented 75 (interrupted before COMMAND started), not 125.
func TestRun_interruptedWhileConnecting(t *testing.T) {
	t.Parallel()
	addr, accepted := blackhole(t)
	for _, cmd := range [][]string{{"run", "x", "--", "true"}, {"acquire", "x"}} {
		h := newHarness(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan int, 1)
		go func() {
			done <- h.cli().main(ctx, append([]string{cmd[0], "--redis", "redis://" + addr, "--timeout", "1m"}, cmd[1:]...))
		}()
		select {
		case <-accepted:
		case <-time.After(15 * time.Second):
			t.Fatal("fencelock never connected")
		}
		cancel() // as main does on SIGINT or SIGTERM
		if got := h.exit(done); got != exitNotAcquired {
			t.Errorf("fencelock %s interrupted while connecting: exit = %d, want %d", cmd[0], got, exitNotAcquired)
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock "+cmd[0]+": "); !strings.Contains(msg, "interrupted") {
			t.Errorf("stderr %q, want it to say interrupted", msg)
		}
	}
}

// An attempt that the end of --wait cuts short is no Redis failure, even
// when go-redis reports it as the connection's deadline (i/o timeout)
// rather than the context's: run exits 75 (not acquired), not 125.
func TestAttempts_cutShortByTheWait(t *testing.T) {
	var stderr bytes.Buffer
	a := &attempts{name: "n", cmd: "run", stderr: &stderr, waiting: true, kind: "lock"}
	h := a.hooks()
	ctx, cancel := context.WithCancel(context.Background())
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: "n", Attempt: 1, Err: fencelock.ErrNotAcquired})
	cancel()
	ioTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: "n", Attempt: 2, Err: ioTimeout})
	if err := a.redisFailure(); err != nil {
		t.Errorf("redisFailure = %v, want nil: the wait's end cut the attempt short", err)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}
	// Before the wait's end, the same error is a failure; and after it,
	// one that its end did not cause.
	h.AcquireAttempt(context.Background(), fencelock.AcquireAttemptInfo{Name: "n", Attempt: 3, Err: ioTimeout})
	if err := a.redisFailure(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("redisFailure = %v, want the i/o timeout", err)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	h.AcquireAttempt(ctx, fencelock.AcquireAttemptInfo{Name: "n", Attempt: 4, Err: refused})
	if err := a.redisFailure(); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("redisFailure = %v, want the refused dial, though it ended after the wait", err)
	}
}
