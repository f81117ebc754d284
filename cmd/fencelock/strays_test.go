package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// What COMMAND leaves running in its process group (a "&" job, a child
// that outlives its parent) never outlives the lease either: when COMMAND
// exits, run sends them SIGTERM, then SIGKILL after --grace, and releases
// the lock only once they are gone. COMMAND's own status still passes
// through. Here COMMAND is a shell that starts this binary in the
// background and exits once it is ready: once head has read its first
// line.
func TestRun_stopsWhatCommandLeft(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	s := redistest.New(t)
	rdb := s.Client(t)
	for _, tc := range []struct {
		mode     string // the stray's
		sigkill  bool   // it needs SIGKILL
		exitCode int
	}{
		{mode: "ignore-term", sigkill: true},
		{mode: "trap"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			name := "left-" + tc.mode
			h := newHarness(t)
			h.childEnv = append(h.childEnv, childEnv+"="+tc.mode)
			// --grace 30s: a stray that acts on SIGTERM is gone long
			// before; one that ignores it is killed at 300ms.
			grace := "30s"
			if tc.sigkill {
				grace = "300ms"
			}
			code := h.run("run", "--redis", redisURL(s), "--ttl", "60s", "--grace", grace, name, "--", sh, "-c", `("$0" &) | head -n 1`, h.self(tc.mode)[0])
			if code != 0 {
				t.Errorf("run exit = %d, want COMMAND's 0", code)
			}
			pid := readyPID(t, strings.TrimSpace(h.stdout.String()))
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			// Killed is enough: SIGKILL pending, the stray never runs
			// again, though a loaded machine may not have ended it yet.
			if alive(pid) && !sigkillPending(pid) {
				t.Errorf("process %d, which COMMAND left running, still runs after run returned", pid)
			}
			if n := rdb.Exists(t.Context(), "fencelock:{"+name+"}").Val(); n != 0 {
				t.Errorf("lock exists after run = %d, want released", n)
			}
			stderr := h.stderr.String()
			if !strings.Contains(stderr, "left processes running in its process group: sending them SIGTERM") {
				t.Errorf("stderr = %q, want it to say what COMMAND left got SIGTERM", stderr)
			}
			if got := strings.Contains(stderr, "killed with SIGKILL"); got != tc.sigkill {
				t.Errorf("stderr = %q: says killed with SIGKILL = %t, want %t", stderr, got, tc.sigkill)
			}
		})
	}
}
