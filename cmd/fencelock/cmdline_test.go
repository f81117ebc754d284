package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/internal/redistest"
)

// run and elect take COMMAND right after NAME, as flock and etcdctl do:
// flags come before NAME, and everything after NAME is COMMAND, a "--"
// of its own included. "NAME -- COMMAND" still works, with flags between
// NAME and "--" too.
func TestCommandLine_withoutDashes(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, tc := range []struct {
		before, after []string // around COMMAND (this test binary)
		want          string
	}{
		{[]string{"run", "--redis", redisURL(s), "--ttl", "30s", "nodash"}, []string{"a", "--", "-b"}, "a\n--\n-b\n"},
		{[]string{"run", "--redis", redisURL(s), "dash", "--"}, []string{"x"}, "x\n"},
		{[]string{"run", "--redis", redisURL(s), "flags-after", "--ttl", "30s", "--"}, []string{"y"}, "y\n"},
		{[]string{"elect", "--redis", redisURL(s), "-n", "nodash-e"}, []string{"z", "--"}, "z\n--\n"},
		{[]string{"elect", "--redis", redisURL(s), "dash-e", "--"}, []string{"w"}, "w\n"},
	} {
		h := newHarness(t)
		args := append(append(tc.before, h.self("args")...), tc.after...)
		if code := h.run(args...); code != 0 {
			t.Errorf("fencelock %q: exit = %d, want 0", args, code)
		}
		if got := h.stdout.String(); got != tc.want {
			t.Errorf("fencelock %q: COMMAND's arguments %q, want %q", args, got, tc.want)
		}
	}
	for _, cmd := range []string{"run", "elect"} {
		h := newHarness(t)
		if code := h.run(cmd, "name", "-h"); code != 0 || !strings.HasPrefix(h.stdout.String(), "Usage: fencelock "+cmd) {
			t.Errorf("fencelock %s name -h: exit = %d, stdout %q; want 0 and the usage", cmd, code, h.stdout)
		}
		h = newHarness(t)
		if code := h.run(cmd, "--redis", redisURL(s), "name", "-x"); code != exitUsage || !strings.Contains(h.stderr.String(), "goes after --") {
			t.Errorf("fencelock %s name -x: exit = %d, stderr %q; want %d, saying where flags and such a COMMAND go", cmd, code, h.stderr, exitUsage)
		}
	}
	for _, args := range [][]string{
		{"run", "--redis", redisURL(s), "name"},
		{"elect", "--redis", redisURL(s), "name"},
	} {
		h := newHarness(t)
		if code := h.run(args...); code != exitUsage {
			t.Errorf("fencelock %q: exit = %d, want %d", args, code, exitUsage)
		}
		if msg := oneLine(t, h.stderr.String(), "fencelock "+args[0]+": "); !strings.Contains(msg, "missing COMMAND") {
			t.Errorf("fencelock %q: stderr %q, want missing COMMAND", args, msg)
		}
	}
}

// -E (--conflict-exit-code, as flock's) is the exit status when another
// lease holds the lock (another candidate leads) throughout the one
// attempt or the --wait; 0 is refused, as a conflict that exits 0 would
// let a script run unlocked.
func TestCommandLine_conflictExitCode(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	locks := fencelock.New(s.Client(t), &fencelock.Options{TTL: time.Minute})
	held, err := locks.TryAcquire(t.Context(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(t.Context())
	led := locks.Election("led")
	if _, err := led.Campaign(t.Context(), "incumbent"); err != nil {
		t.Fatal(err)
	}
	defer led.Resign(t.Context())
	for _, args := range [][]string{
		{"run", "-n", "-E", "9", "held", "true"},
		{"run", "--wait", "100ms", "--conflict-exit-code", "9", "held", "--", "true"},
		{"acquire", "-E", "9", "-n", "held"},
		{"elect", "-E", "9", "-n", "led", "true"},
		{"elect", "--wait", "100ms", "-E", "9", "led", "true"},
	} {
		h := newHarness(t)
		h.env["REDIS_URL"] = redisURL(s)
		if code := h.run(args...); code != 9 {
			t.Errorf("fencelock %q: exit = %d, want 9", args, code)
		}
		if args[0] == "acquire" && h.stdout.String() != "(exit 9)\n" {
			t.Errorf("fencelock %q: stdout %q, want (exit 9) for eval", args, h.stdout)
		}
	}
	h := newHarness(t)
	h.env["REDIS_URL"] = redisURL(s)
	if code := h.run("run", "-n", "-E", "9", "free", "true"); code != 0 {
		t.Errorf("run -n -E 9 of a free lock: exit = %d, want 0", code)
	}
	for _, e := range []string{"0", "256", "-1", "x"} {
		for _, cmd := range [][]string{{"run", "n", "true"}, {"acquire", "n"}, {"elect", "n", "true"}} {
			h := newHarness(t)
			h.env["REDIS_URL"] = "redis://127.0.0.1:1"
			args := append([]string{cmd[0], "-E", e}, cmd[1:]...)
			if code := h.run(args...); code != exitUsage {
				t.Errorf("fencelock %q: exit = %d, want %d", args, code, exitUsage)
			}
		}
	}
}
