package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fencelock/fencelock/internal/redistest"
)

// When fencelock is killed with SIGKILL, nothing of COMMAND survives it:
// neither the shell that run started nor the shell's child. A second run,
// which gets the lock once the dead one's TTL has passed, finds them all
// gone.
func TestProcess_supervisorKilled(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	s := redistest.New(t)
	for _, mode := range []string{"group", "foreground"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			name := "orphan-" + mode
			args := []string{"run", "--redis", redisURL(s), "--ttl", "2s", name, "--", sh, "-c", `"$0" & wait`, os.Args[0]}
			if mode == "foreground" {
				// COMMAND itself, which reports its PID.
				args = []string{"run", "--foreground", "--redis", redisURL(s), "--ttl", "2s", name, "--", os.Args[0]}
			}
			cmd, out := startFencelock(t, "ignore-term", args...)
			f := strings.Fields(readLine(t, out)) // ready PID PPID
			if len(f) != 3 {
				t.Fatalf("COMMAND said %q, want ready PID PPID", f)
			}
			pids := f[1:]
			if mode == "foreground" {
				pids = f[1:2] // its parent is the guard
			}
			for _, p := range pids {
				pid, _ := strconv.Atoi(p)
				t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			}

			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			for _, p := range pids {
				pid, _ := strconv.Atoi(p)
				waitDead(t, pid)
			}

			h := newHarness(t)
			h.childEnv = append(h.childEnv, "FENCELOCK_TEST_PIDS="+strings.Join(pids, " "))
			if got := h.run(append([]string{"run", "--redis", redisURL(s), "--wait", "20s", name, "--"}, h.self("check-dead")...)...); got != 0 {
				t.Errorf("second run: exit = %d, want 0 (every process of the first run's COMMAND dead)", got)
			}
		})
	}
}

// The guard is internal: run by hand, it refuses.
func TestGuard_byHand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], guardArg, "group", "/bin/true", "true")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage {
		t.Errorf("%s by hand: %v, %s; want exit %d", guardArg, err, out, exitUsage)
	}
}

// A signal forwarded to a stopped COMMAND is followed by SIGCONT, so that
// COMMAND acts on it rather than keeping the lock forever.
func TestRun_stoppedCommandGetsSignals(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, mode := range []string{"group", "foreground"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			args := []string{"run", "--redis", redisURL(s), "stopped-" + mode, "--"}
			if mode == "foreground" {
				args = append([]string{"run", "--foreground"}, args[1:]...)
			}
			done := h.start(append(args, h.self("stop-self")...)...)
			h.stdout.waitFor(t, "ready")
			pid := readyPID(t, strings.TrimSpace(h.stdout.String()))
			waitStopped(t, pid)
			h.signal(syscall.SIGTERM)
			if got := h.exit(done); got != 3 {
				t.Errorf("run exit = %d, want the command's 3", got)
			}
			if got := h.stdout.String(); !strings.Contains(got, "got terminated") {
				t.Errorf("COMMAND output = %q, want it to have got SIGTERM", got)
			}
		})
	}
}

// A COMMAND stopped by SIGTTIN (what the terminal sends a background
// process group that reads it) is reported, with the way out.
func TestRun_stoppedOnTerminalInput(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	h := newHarness(t)
	done := h.start(append([]string{"run", "--redis", redisURL(s), "ttin", "--"}, h.self("trap")...)...)
	h.stdout.waitFor(t, "ready")
	pid := readyPID(t, strings.TrimSpace(h.stdout.String()))
	if err := syscall.Kill(pid, syscall.SIGTTIN); err != nil {
		t.Fatal(err)
	}
	h.stderr.waitFor(t, "--foreground")
	if got := h.stderr.String(); !strings.Contains(got, "terminal") || !strings.Contains(got, "SIGTTIN") || !strings.Contains(got, "stopped") {
		t.Errorf("stderr = %q, want it to say COMMAND stopped on the terminal (SIGTTIN)", got)
	}
	h.signal(syscall.SIGINT)
	if got := h.exit(done); got != 3 {
		t.Errorf("run exit = %d, want the command's 3", got)
	}
}
