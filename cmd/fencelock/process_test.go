package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
)

// These tests run fencelock as a real process (this test binary in
// main mode), so real signals go through main's handling.

// startFencelock starts fencelock with args; COMMAND is this binary in
// child mode. It returns the process and a reader of its stdout.
func startFencelock(t *testing.T, mode string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd, out, _ := startFencelockWith(t, nil, mode, args...)
	return cmd, out
}

// startFencelockWith is startFencelock with setup applied to the command
// before it starts; it also returns fencelock's stderr.
func startFencelockWith(t *testing.T, setup func(*exec.Cmd), mode string, args ...string) (*exec.Cmd, *bufio.Reader, *output) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), mainEnv+"=1", childEnv+"="+mode)
	stderr := newOutput()
	cmd.Stderr = stderr
	// A pipe of our own, not StdoutPipe: Wait closes that one's read end
	// once the process has exited, with what COMMAND said last maybe still
	// unread by the test.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout = w
	if setup != nil {
		setup(cmd)
	}
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	// One goroutine owns cmd.Wait; waitExit and the cleanup wait on it,
	// bounded.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waits.Store(cmd, done)
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("fencelock (pid %d) not reaped 10s after SIGKILL", cmd.Process.Pid)
		}
		waits.Delete(cmd)
		if t.Failed() {
			t.Logf("fencelock stderr:\n%s", stderr)
		}
	})
	return cmd, bufio.NewReader(out), stderr
}

// waits maps each command started by startFencelockWith to the channel
// that its one cmd.Wait reports on.
var waits sync.Map // *exec.Cmd → chan error

// readLine reads one line of output, failing the test if none comes.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		return s
	case <-time.After(15 * time.Second):
		t.Fatalf("no output within 15s")
		return ""
	}
}

// waitExit waits for cmd (started by startFencelockWith), bounded, and
// returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	return waitExitWithin(t, cmd, 30*time.Second)
}

// waitExitWithin is waitExit with its bound.
func waitExitWithin(t *testing.T, cmd *exec.Cmd, bound time.Duration) int {
	t.Helper()
	v, ok := waits.Load(cmd)
	if !ok {
		t.Fatalf("waitExit: not started by startFencelockWith, or waited for already")
	}
	done := v.(chan error)
	select {
	case err := <-done:
		done <- err // for the cleanup
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return cmd.ProcessState.ExitCode()
	case <-time.After(bound):
		t.Fatalf("fencelock did not exit within %v", bound)
		return -1
	}
}

func TestProcess_forwardsSignals(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, out := startFencelock(t, "trap", "run", "--redis", redisURL(s), "proc-"+strconv.Itoa(int(sig)), "--", os.Args[0])
			readyPID(t, readLine(t, out))
			cmd.Process.Signal(sig)
			if got, want := readLine(t, out), "got "+sig.String(); got != want {
				t.Errorf("COMMAND said %q, want %q", got, want)
			}
			if got := waitExit(t, cmd); got != 3 {
				t.Errorf("fencelock exit = %d, want the command's 3", got)
			}
		})
	}
}

// When the lease is lost, the whole process group of COMMAND stops: here
// a shell's child that ignores SIGTERM outlives the shell, and is killed
// when --grace runs out.
func TestProcess_lostLeaseKillsGroup(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	s := redistest.New(t)
	cmd, out, stderr := startFencelockWith(t, nil, "ignore-term", "run", "--redis", redisURL(s), "--ttl", "10s", "--grace", "300ms", "group",
		"--", sh, "-c", `"$0" & wait`, os.Args[0])
	pid := readyPID(t, readLine(t, out))
	if err := s.Client(t).Del(t.Context(), "fencelock:{group}").Err(); err != nil {
		t.Fatal(err)
	}
	if got := waitExit(t, cmd); got != exitLeaseLost {
		t.Errorf("fencelock exit = %d, want %d", got, exitLeaseLost)
	}
	// COMMAND's own status goes with COMMAND, not with what it left.
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if got, want := lines[len(lines)-1], "fencelock run: COMMAND exited after SIGTERM (signal: terminated), and what it left running in its process group was killed with SIGKILL; the lease was lost"; got != want {
		t.Errorf("stderr's last line:\n got %s\nwant %s", got, want)
	}
	// fencelock has sent SIGKILL before exiting; the orphan may linger
	// briefly as a zombie until init reaps it.
	waitDead(t, pid)
}

// readyPID reads the PID from a child's "ready PID [PPID]" line.
func readyPID(t *testing.T, line string) int {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "ready" {
		t.Fatalf("child said %q, want ready PID", line)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("child said %q, want ready PID", line)
	}
	return pid
}

// waitDead waits until pid no longer runs (a zombie counts as dead),
// failing the test, and killing pid, if it still runs after 10s.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	waitState(t, pid, "dead", func(state byte) bool { return state == 0 || state == 'Z' || state == 'X' })
}

// waitStopped waits until pid is stopped (SIGSTOP, SIGTTIN...).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	waitState(t, pid, "stopped", func(state byte) bool { return state == 'T' })
}

// waitState polls the kernel's state of pid (0 once it is gone) until ok
// accepts it: a process's state changes send no event to anyone but its
// parent.
func waitState(t *testing.T, pid int, what string, ok func(state byte) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(procState(pid)) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d not %s after 10s (state %q)", pid, what, procState(pid))
		}
		time.Sleep(5 * time.Millisecond) // polls the kernel: no event to wait on
	}
}

// procState returns the state letter of pid from /proc (R, S, T, Z...),
// or 0 if there is no such process.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if syscall.Kill(pid, 0) == nil {
			return 'R' // no /proc: it exists, in some state
		}
		return 0
	}
	// pid (comm) state ...
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 'R'
}

// sigkillPending reports whether pid has been sent SIGKILL that has not
// ended it yet (/proc/PID/status: ShdPnd, SigPnd).
func sigkillPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "ShdPnd" && k != "SigPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
			return true
		}
	}
	return false
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	st := procState(pid)
	return st != 0 && st != 'Z' && st != 'X'
}

// SIGTERM to run or elect (a service manager stopping it) hands the lock
// over promptly: it is forwarded to COMMAND, which gets --grace to exit
// before SIGKILL, and the lease is then released (the leadership
// resigned), so that a waiting run or candidate holds it at once rather
// than after the TTL, 60s here.
func TestProcess_sigtermHandsOver(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, cmdName := range []string{"run", "elect"} {
		for _, tc := range []struct {
			mode string
			code int // the first fencelock's: COMMAND's
		}{{"trap", 3}, {"ignore-term", 128 + int(syscall.SIGKILL)}} {
			t.Run(cmdName+"/"+tc.mode, func(t *testing.T) {
				t.Parallel()
				name := "handover-" + cmdName + "-" + tc.mode
				a, aOut, aErr := startFencelockWith(t, nil, tc.mode, cmdName, "--redis", redisURL(s), "--ttl", "60s", "--grace", "1s", name, "--", os.Args[0])
				pidA := readyPID(t, readLine(t, aOut))
				t.Cleanup(func() { syscall.Kill(pidA, syscall.SIGKILL) })
				h := newHarness(t)
				done := h.start(append([]string{cmdName, "--redis", redisURL(s), "--ttl", "60s", name, "--"}, h.self("env")...)...)
				waitWaiting(t, s, name)

				if err := a.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if got := waitExit(t, a); got != tc.code {
					t.Errorf("first %s exit = %d, want COMMAND's %d", cmdName, got, tc.code)
				}
				waitDead(t, pidA)
				if got := h.exit(done); got != 0 {
					t.Errorf("second %s exit = %d, want 0", cmdName, got)
				}
				if got := h.stdout.String(); !strings.Contains(got, "FENCELOCK_NAME="+name+"\n") {
					t.Errorf("second %s's COMMAND said %q, want it to have run", cmdName, got)
				}
				if tc.mode == "ignore-term" && !strings.Contains(aErr.String(), "did not exit within --grace 1s of SIGTERM") {
					t.Errorf("first %s's stderr = %q, want it to say COMMAND got SIGKILL --grace after SIGTERM", cmdName, aErr)
				}
			})
		}
	}
}
