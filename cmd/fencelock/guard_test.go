package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
			args := []string{"run", "--redis", redisURL(s), "--ttl", "10s", name, "--", sh, "-c", `"$0" & wait`, os.Args[0]}
			if mode == "foreground" {
				// COMMAND itself, which reports its PID.
				args = []string{"run", "--foreground", "--redis", redisURL(s), "--ttl", "10s", name, "--", os.Args[0]}
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
			waitExit(t, cmd) // killed: its status says nothing
			for _, p := range pids {
				pid, _ := strconv.Atoi(p)
				waitDead(t, pid)
			}

			h := newHarness(t)
			h.childEnv = append(h.childEnv, "FENCELOCK_TEST_PIDS="+strings.Join(pids, " "))
			if got := h.run(append([]string{"run", "--redis", redisURL(s), "--wait", "60s", name, "--"}, h.self("check-dead")...)...); got != 0 {
				t.Errorf("second run: exit = %d, want 0 (every process of the first run's COMMAND dead)", got)
			}
		})
	}
}

// The guard is internal: run by hand, it refuses, as it does without a
// first deadline.
func TestGuard_byHand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"group", "1", "/bin/true", "true"},
		{"group", "/bin/true", "true"},
		{"foreground", "soon", "/bin/true", "true"},
	} {
		cmd := exec.Command(os.Args[0], append([]string{guardArg}, args...)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != exitUsage {
			t.Errorf("%s %q by hand: %v, %s; want exit %d", guardArg, args, err, out, exitUsage)
		}
	}
}

// The guard kills COMMAND at the deadline it was started with, though
// fencelock never sends it a word: a fencelock stopped (SIGSTOP, starved)
// between starting the guard and its first order cannot let COMMAND
// outlive the lease. Here fencelock is the test, which keeps the control
// pipe open and says nothing.
func TestGuard_firstDeadline(t *testing.T) {
	t.Parallel()
	for _, group := range []bool{true, false} {
		t.Run(fmt.Sprintf("group=%t", group), func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			env := append(os.Environ(), childEnv+"=ignore-term")
			g, err := startGuard(os.Args[0], []string{os.Args[0]}, env, &exec.Cmd{Stdout: &out}, group, time.Now().Add(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer g.control.Close()
			var pid int
			for {
				select {
				case ev, ok := <-g.events:
					if !ok {
						// In group mode the guard kills its group, itself
						// included, and reports nothing.
						err := <-g.exited
						if !group || pid == 0 {
							t.Fatalf("guard exited (%v) without reporting how COMMAND ended", err)
						}
						waitDead(t, pid)
						return
					}
					switch ev.kind {
					case "started":
						pid = ev.pid
						t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
					case "exited":
						if !ev.status.Signaled() || ev.status.Signal() != syscall.SIGKILL {
							t.Errorf("COMMAND ended: %s, want killed by SIGKILL at the deadline", describe(ev.status))
						}
						return
					case "failed":
						t.Fatalf("COMMAND failed to start: %d %s", ev.code, ev.text)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("COMMAND (pid %d) still running 30s after the guard's first deadline, want it killed then", pid)
				}
			}
		})
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

// A fencelock that is stopped (SIGSTOP) renews nothing; its guard kills
// COMMAND by the lease's deadline on its own. A second run, which gets
// the lock once the TTL has passed, finds the first COMMAND dead. When
// the first fencelock is continued, it says what happened and exits 124.
func TestProcess_supervisorStopped(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, mode := range []string{"group", "foreground"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			name := "stopped-" + mode
			args := []string{"run", "--redis", redisURL(s), "--ttl", "10s", name, "--", os.Args[0]}
			if mode == "foreground" {
				args = append([]string{"run", "--foreground"}, args[1:]...)
			}
			cmd, out, stderr := startFencelockWith(t, nil, "ignore-term", args...)
			pid := readyPID(t, readLine(t, out))
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT) })
			h := newHarness(t)
			h.childEnv = append(h.childEnv, "FENCELOCK_TEST_PIDS="+strconv.Itoa(pid))
			if got := h.run(append([]string{"run", "--redis", redisURL(s), "--wait", "60s", name, "--"}, h.self("check-dead")...)...); got != 0 {
				t.Errorf("second run: exit = %d, want 0 (the stopped run's COMMAND dead by its lease's deadline)", got)
			}
			cmd.Process.Signal(syscall.SIGCONT)
			if got := waitExitWithin(t, cmd, 10*time.Second); got != exitLeaseLost {
				t.Errorf("fencelock exit = %d, want %d", got, exitLeaseLost)
			}
			got := stderr.String()
			if !strings.Contains(got, "SIGKILL") {
				t.Errorf("stderr = %q, want it to say COMMAND got SIGKILL", got)
			}
			if strings.Contains(got, "in -") {
				t.Errorf("stderr = %q: a deadline in the past is no time to wait", got)
			}
		})
	}
}

// Ctrl-Z stops COMMAND with fencelock, as a shell user expects of a job,
// and fg or bg (SIGCONT) continues both.
func TestProcess_jobControl(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, mode := range []string{"group", "foreground"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := []string{"run", "--redis", redisURL(s), "--ttl", "20s", "tstp-" + mode, "--", os.Args[0]}
			if mode == "foreground" {
				args = append([]string{"run", "--foreground"}, args[1:]...)
			}
			// fencelock leads a process group, as a shell's job does.
			cmd, out, _ := startFencelockWith(t, func(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }, "trap", args...)
			pid := readyPID(t, readLine(t, out))
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
			// What the terminal sends the foreground process group: with
			// --foreground COMMAND gets it itself, else fencelock alone.
			target := cmd.Process.Pid
			if mode == "foreground" {
				target = -target
			}
			if err := syscall.Kill(target, syscall.SIGTSTP); err != nil {
				t.Fatal(err)
			}
			waitStopped(t, pid)
			waitStopped(t, cmd.Process.Pid)
			if err := syscall.Kill(target, syscall.SIGCONT); err != nil { // what fg and bg send
				t.Fatal(err)
			}
			waitState(t, pid, "continued", func(state byte) bool { return state != 'T' })
			cmd.Process.Signal(syscall.SIGTERM)
			if got, want := readLine(t, out), "got terminated"; got != want {
				t.Errorf("COMMAND said %q, want %q", got, want)
			}
			if got := waitExitWithin(t, cmd, 10*time.Second); got != 3 {
				t.Errorf("fencelock exit = %d, want the command's 3", got)
			}
		})
	}
}

// With stderr a full pipe that nobody reads, the stop path still signals
// COMMAND: a message must not come before the signal, nor hold up the
// SIGKILL that follows.
func TestProcess_stderrBlocked(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Fill the pipe.
	w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, err := w.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	w.SetWriteDeadline(time.Time{})
	cmd, out, _ := startFencelockWith(t, func(c *exec.Cmd) { c.Stderr = w }, "trap",
		"run", "--redis", redisURL(s), "--ttl", "30s", "--grace", "500ms", "stderr-full", "--", os.Args[0])
	w.Close()
	readyPID(t, readLine(t, out))
	if err := s.Client(t).Del(t.Context(), "fencelock:{stderr-full}").Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := readLine(t, out), "got terminated"; got != want {
		t.Errorf("COMMAND said %q, want %q", got, want)
	}
	go io.Copy(io.Discard, r) // now fencelock may say why, and exit
	if got := waitExitWithin(t, cmd, 10*time.Second); got != exitLeaseLost {
		t.Errorf("fencelock exit = %d, want %d", got, exitLeaseLost)
	}
}

// Messages that find the stop path's queue full are dropped, never
// waited for: with stderr a full pipe, a COMMAND that stopped on the
// terminal more times than the queue holds (each stop is said) still gets
// SIGTERM when the lease is lost.
func TestProcess_stderrBlockedQueueFull(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, err := w.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	w.SetWriteDeadline(time.Time{})
	const stops = 80 // the queue holds 32
	cmd, out, _ := startFencelockWith(t, func(c *exec.Cmd) {
		c.Stderr = w
		c.Env = append(c.Env, "FENCELOCK_TEST_STOPS="+strconv.Itoa(stops))
	}, "ttin-loop", "run", "--redis", redisURL(s), "--ttl", "30s", "--grace", "1s", "queue-full", "--", os.Args[0])
	w.Close()
	pid := readyPID(t, readLine(t, out))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	for range stops {
		waitStopped(t, pid)
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := readLine(t, out), "stopped enough"; got != want {
		t.Fatalf("COMMAND said %q, want %q", got, want)
	}
	if err := s.Client(t).Del(t.Context(), "fencelock:{queue-full}").Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := readLine(t, out), "got terminated"; got != want {
		t.Errorf("COMMAND said %q, want %q", got, want)
	}
	go io.Copy(io.Discard, r) // now fencelock may say why, and exit
	if got := waitExitWithin(t, cmd, 10*time.Second); got != exitLeaseLost {
		t.Errorf("fencelock exit = %d, want %d", got, exitLeaseLost)
	}
}
