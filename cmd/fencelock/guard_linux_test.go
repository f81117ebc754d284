package main

import (
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/redistest"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: /dev/ptmx, then unlockpt and
// ptsname as ioctls. The tests make the terminal they need rather than
// depend on the one (if any) they were started from.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// drain reads the terminal's output into an output, so that writes to
// the terminal never block.
func drain(master *os.File) *output {
	o := newOutput()
	go io.Copy(o, master) // ends when the test closes master
	return o
}

// fencelock on a real terminal, as from an interactive shell: a COMMAND
// in its own process group that reads the terminal is stopped by the
// kernel (SIGTTIN), and run says so and suggests --foreground; a
// forwarded SIGINT, with SIGCONT, ends it: of SIGINT if it acts on it
// before it reads again, else of SIGKILL --grace later, as it is stopped
// again (read-stdin-ignore-int always is). With --foreground, COMMAND
// reads the terminal.
func TestProcess_terminalInput(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, mode := range []string{"read-stdin", "read-stdin-ignore-int", "foreground"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			master, slave := openPTY(t)
			drain(master)
			args := []string{"run", "--redis", redisURL(s), "--grace", "1s", "tty-" + mode, "--", os.Args[0]}
			child := mode
			if mode == "foreground" {
				args = append([]string{"run", "--foreground"}, args[1:]...)
				child = "read-stdin"
			}
			// fencelock leads a session whose controlling terminal is the
			// pty, in the terminal's foreground process group.
			cmd, out, stderr := startFencelockWith(t, func(c *exec.Cmd) {
				c.Stdin = slave
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			}, child, args...)
			pid := readyPID(t, readLine(t, out))
			if mode == "foreground" {
				if _, err := master.WriteString("hello\n"); err != nil {
					t.Fatal(err)
				}
				if got := readLine(t, out); got != "read hello" {
					t.Errorf("COMMAND said %q, want it to read the terminal", got)
				}
				if got := waitExitWithin(t, cmd, 10*time.Second); got != 0 {
					t.Errorf("fencelock exit = %d, want 0", got)
				}
				return
			}
			stderr.waitFor(t, "--foreground")
			if got := procState(pid); got != 'T' {
				t.Errorf("COMMAND state %q, want T (stopped)", got)
			}
			if got := stderr.String(); !strings.Contains(got, "SIGTTIN") {
				t.Errorf("stderr = %q, want it to name SIGTTIN", got)
			}
			// SIGINT, which fencelock forwards alone (SIGTERM would bound
			// COMMAND's exit by --grace in any case).
			sent := time.Now()
			cmd.Process.Signal(syscall.SIGINT) // forwarded, then SIGCONT
			got := waitExitWithin(t, cmd, 10*time.Second)
			t.Logf("exit %d %v after SIGINT (--grace 1s)", got, time.Since(sent).Round(time.Millisecond))
			killed := 128 + int(syscall.SIGKILL)
			switch {
			case mode == "read-stdin-ignore-int" && got != killed:
				t.Errorf("fencelock exit = %d, want %d (COMMAND stopped again, killed --grace after the forwarded SIGINT)", got, killed)
			case got != killed && got != 128+int(syscall.SIGINT):
				t.Errorf("fencelock exit = %d, want %d (SIGINT) or %d (stopped again, then SIGKILL)", got, 128+int(syscall.SIGINT), killed)
			}
			if got == killed && !strings.Contains(stderr.String(), "stopped again") {
				t.Errorf("stderr = %q, want it to say COMMAND was stopped again", stderr)
			}
		})
	}
}

// Under "stty tostop" a background process is stopped (SIGTTOU) when it
// writes to the terminal. fencelock run in the background, its stderr the
// terminal, must still stop COMMAND when the lease is lost: its message
// must neither come before the signal nor stop fencelock. A shell with
// job control (set -m) runs it as a background job of a session on a
// pty; COMMAND's stdout is a pipe to the test.
func TestProcess_backgroundTostop(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	s := redistest.New(t)
	master, slave := openPTY(t)
	tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag |= unix.TOSTOP
	if err := unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	tty := drain(master)
	cmd, out, _ := startFencelockWith(t, func(c *exec.Cmd) {
		// sh, not fencelock, is what runs: fencelock is its background job.
		c.Path, c.Args = sh, []string{"sh", "-c", `set -m; "$0" "$@" & wait $!`, os.Args[0],
			"run", "--redis", redisURL(s), "--ttl", "30s", "--grace", "500ms", "tostop", "--", os.Args[0]}
		c.Stdin, c.Stderr = slave, slave
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}, "trap")
	readyPID(t, readLine(t, out))
	if err := s.Client(t).Del(t.Context(), "fencelock:{tostop}").Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := readLine(t, out), "got terminated"; got != want {
		t.Errorf("COMMAND said %q, want %q", got, want)
	}
	if got := waitExitWithin(t, cmd, 10*time.Second); got != exitLeaseLost {
		t.Errorf("fencelock exit = %d, want %d", got, exitLeaseLost)
	}
	tty.waitFor(t, "lease lost")
}

// A terminal is what isTerminal says is one: /dev/null, a character
// device, is not.
func TestIsTerminal(t *testing.T) {
	t.Parallel()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	_, slave := openPTY(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		f    *os.File
		want bool
	}{{null, false}, {slave, true}, {r, false}} {
		if got := isTerminal(tc.f); got != tc.want {
			t.Errorf("isTerminal(%s) = %v, want %v", tc.f.Name(), got, tc.want)
		}
	}
}
