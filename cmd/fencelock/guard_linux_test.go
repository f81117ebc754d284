package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/fencelock/fencelock/internal/redistest"
)

// openPTY opens a pseudo-terminal pair with the standard library alone:
// /dev/ptmx, then unlockpt and ptsname as ioctls.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlockpt: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("ptsname: %v", e)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// fencelock on a real terminal, as from an interactive shell: a COMMAND
// in its own process group that reads the terminal is stopped by the
// kernel (SIGTTIN), and run says so and suggests --foreground; with
// --foreground, COMMAND reads the terminal.
func TestProcess_terminalInput(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, foreground := range []bool{false, true} {
		t.Run("foreground="+strconv.FormatBool(foreground), func(t *testing.T) {
			t.Parallel()
			master, slave := openPTY(t)
			args := []string{"run", "--redis", redisURL(s), "tty-" + strconv.FormatBool(foreground), "--", os.Args[0]}
			if foreground {
				args = append([]string{"run", "--foreground"}, args[1:]...)
			}
			// fencelock leads a session whose controlling terminal is the
			// pty, in the terminal's foreground process group.
			cmd, out, stderr := startFencelockWith(t, func(c *exec.Cmd) {
				c.Stdin = slave
				c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			}, "read-stdin", args...)
			pid := readyPID(t, readLine(t, out))
			if !foreground {
				stderr.waitFor(t, "--foreground")
				if got := procState(pid); got != 'T' {
					t.Errorf("COMMAND state %q, want T (stopped)", got)
				}
				if got := stderr.String(); !strings.Contains(got, "SIGTTIN") {
					t.Errorf("stderr = %q, want it to name SIGTTIN", got)
				}
				cmd.Process.Signal(syscall.SIGTERM) // forwarded, then SIGCONT
				if got, want := waitExit(t, cmd), 128+int(syscall.SIGTERM); got != want {
					t.Errorf("fencelock exit = %d, want %d (COMMAND killed by the forwarded SIGTERM)", got, want)
				}
				return
			}
			if _, err := master.WriteString("hello\n"); err != nil {
				t.Fatal(err)
			}
			if got := readLine(t, out); got != "read hello" {
				t.Errorf("COMMAND said %q, want it to read the terminal", got)
			}
			if got := waitExit(t, cmd); got != 0 {
				t.Errorf("fencelock exit = %d, want 0", got)
			}
		})
	}
}
