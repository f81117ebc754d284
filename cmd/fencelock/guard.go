package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// run does not start COMMAND itself: it starts a guard, a second fencelock
// process (re-executed with the hidden first argument guardArg), which
// starts COMMAND, waits for it and reports on it. The guard exists so that
// COMMAND dies with fencelock:
//
//   - fencelock holds the only write end of the guard's control pipe.
//     When fencelock dies, however it dies (SIGKILL, the OOM killer, a
//     crash), the kernel closes it; the guard reads end of file and kills
//     COMMAND with SIGKILL, with its whole process group unless
//     --foreground. This works on every Unix system and does not depend
//     on which thread of fencelock started the guard.
//   - Without --foreground, what COMMAND leaves running in its process
//     group when it exits (a "&" job, a child that outlives it) holds
//     the lease as COMMAND did: the guard stays until the group is empty,
//     enforcing the deadline on it, while fencelock stops it (SIGTERM,
//     then SIGKILL) before it releases the lock.
//   - On Linux, COMMAND gets SIGKILL from the kernel if the guard itself
//     dies (PR_SET_PDEATHSIG, set by setDeathSignal). The guard starts
//     COMMAND from a thread locked to its goroutine that never exits:
//     the kernel sends that signal when the thread that started the child
//     exits, not the process.
//   - The guard enforces the lease's deadline on its own: it is started
//     with the first, before COMMAND, and fencelock tells it each new one
//     (after each renewal); if no later one has come by then, the guard
//     kills COMMAND as if fencelock had died. So a fencelock that is
//     stopped (SIGSTOP, Ctrl-Z, a debugger) or starved of the processor
//     cannot let COMMAND outlive the lease, not even one stopped before
//     it has sent the guard a word.
//   - Being COMMAND's parent, the guard sees COMMAND stop (on terminal
//     input, say) and continue, which fencelock reports.
//
// Without --foreground COMMAND leads a process group of its own, whose ID
// is its PID; the guard stays in fencelock's, and sees from there whether
// anything is left in COMMAND's.
//
// The guard writes to fencelock, on its status pipe (fd 3), one line per
// event:
//
//	started PID       COMMAND runs
//	stopped SIGNAL    COMMAND was stopped by SIGNAL (a number)
//	continued         COMMAND was continued
//	exited STATUS     COMMAND ended; STATUS is its wait status (a number)
//	expired           the deadline came with no later one: the guard kills
//	                  COMMAND (and its group) now
//	left              after exited: COMMAND left processes running in its
//	                  process group; the guard exits once they are gone
//	failed CODE TEXT  COMMAND could not be started; CODE is 126 or 127
//
// and reads from fencelock, on its control pipe (fd 4), lines of
//
//	signal SIGNAL     send SIGNAL, then SIGCONT, to COMMAND, or to its
//	                  process group without --foreground (fencelock signals
//	                  the group itself once it knows it has started)
//	send SIGNAL       send SIGNAL alone (job control: SIGTSTP, SIGCONT)
//	deadline NS       kill COMMAND at NS, on CLOCK_MONOTONIC, unless a
//	                  later deadline comes first
//
// until end of file, which kills COMMAND (and its group).
const guardArg = "_guard"

// guardSignals are the signals that the guard catches rather than dies
// of: they are meant for COMMAND (the terminal sends them to the
// foreground process group, which the guard shares with fencelock, and
// with COMMAND under --foreground). SIGTTIN, SIGTTOU and SIGTSTP are
// caught so that the guard is not stopped with COMMAND (when COMMAND
// reads the terminal, or at Ctrl-Z), and can report it and go on
// enforcing the deadline. A signal that fencelock
// was started with ignored stays ignored, for COMMAND too.
var guardSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGUSR1,
	syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGTSTP,
}

// guardMain is the guard: args are "group" or "foreground", the lease's
// first deadline (CLOCK_MONOTONIC, ns), COMMAND's path, then its argv.
func guardMain(args []string) int {
	status, control := os.NewFile(3, "status"), os.NewFile(4, "control")
	var first int64
	var err error
	if len(args) >= 4 {
		first, err = strconv.ParseInt(args[1], 10, 64)
	}
	if len(args) < 4 || (args[0] != "group" && args[0] != "foreground") || err != nil || first <= 0 || !isPipe(status) || !isPipe(control) {
		fmt.Fprintf(os.Stderr, "fencelock: %s is used by fencelock run only\n", guardArg)
		return exitUsage
	}
	// Inherited without close-on-exec: COMMAND must not hold them open.
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	group, path, argv := args[0] == "group", args[2], args[3:]

	signal.Notify(make(chan os.Signal, 1), caught(guardSignals...)...)
	chld := make(chan os.Signal, 1) // one pending wake-up is enough: reap takes every event
	signal.Notify(chld, syscall.SIGCHLD)
	orders := make(chan order)
	go readOrders(control, orders)
	// Armed before COMMAND starts: fencelock may be stopped before its
	// first order, and COMMAND must not run a moment without a deadline.
	expiry := time.NewTimer(time.Duration(first - monoNow()))

	// This thread starts COMMAND and outlives it (see setDeathSignal).
	runtime.LockOSThread()
	attr := &syscall.SysProcAttr{Setpgid: group}
	setDeathSignal(attr)
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   attr,
	})
	if err != nil {
		fmt.Fprintf(status, "failed %d %s: %s\n", execExit(err), path, err)
		return exitOK
	}
	fmt.Fprintf(status, "started %d\n", pid)
	// Signals go to COMMAND's process group, whose ID is its PID, or to
	// COMMAND alone (--foreground). The group's ID stays COMMAND's, and no
	// other process gets it, until the group is empty.
	target := pid
	if group {
		target = -pid
	}

	// reap reports COMMAND's state changes; it returns true once COMMAND
	// has ended (and reported).
	reap := func(options int) bool {
		for {
			var ws syscall.WaitStatus
			wpid, err := syscall.Wait4(pid, &ws, options|syscall.WUNTRACED|syscall.WCONTINUED, nil)
			switch {
			case err == syscall.EINTR:
				continue
			case err != nil:
				// Not our child any more (cannot happen): nothing left to guard.
				fmt.Fprintf(status, "failed %d wait: %s\n", exitInternal, err)
				return true
			case wpid != pid:
				return false // WNOHANG: no change
			case ws.Stopped():
				fmt.Fprintf(status, "stopped %d\n", int(ws.StopSignal()))
			case ws.Continued():
				fmt.Fprintf(status, "continued\n")
			default:
				fmt.Fprintf(status, "exited %d\n", uint32(ws))
				return true
			}
		}
	}
	ended := reap(syscall.WNOHANG)
	// kill kills COMMAND, or what is left of its group, and reaps it.
	kill := func() {
		syscall.Kill(target, syscall.SIGKILL)
		if !ended {
			reap(0)
		}
	}
	var poll <-chan time.Time
	for {
		if ended {
			if !group || !groupAlive(pid) {
				return exitOK
			}
			if poll == nil {
				// COMMAND left processes running in its group: they hold
				// the lease until they are gone, and fencelock stops them.
				// A group's membership sends no event: it is polled.
				fmt.Fprintf(status, "left\n")
				t := time.NewTicker(10 * time.Millisecond)
				defer t.Stop()
				poll = t.C
			}
		}
		select {
		case <-chld:
			if !ended {
				ended = reap(syscall.WNOHANG)
			}
		case <-poll:
		case o, ok := <-orders:
			if !ok {
				// fencelock is gone, or gave up on COMMAND.
				kill()
				return exitOK
			}
			// COMMAND is not reaped yet (only this goroutine reaps), so pid
			// is still COMMAND's; or it is, and its group still has pid as
			// its ID.
			switch o.kind {
			case "signal":
				syscall.Kill(target, o.signal)
				syscall.Kill(target, syscall.SIGCONT)
			case "send":
				syscall.Kill(target, o.signal)
			case "deadline":
				expiry.Reset(time.Duration(o.at - monoNow()))
			}
		case <-expiry.C:
			// No renewal reached us by the lease's deadline: fencelock is
			// stopped, starved or wedged. COMMAND must not outlive the lease.
			// Said first: a later deadline may be on its way, and fencelock
			// must not take the kill for someone else's.
			fmt.Fprintf(status, "expired\n")
			kill()
			return exitOK
		}
	}
}

// groupAlive reports whether the process group pgid has a member left.
// Members that this process may not signal count too.
func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) != syscall.ESRCH
}

// An order is one line of the guard's control pipe.
type order struct {
	kind   string // "signal", "send", "deadline"
	signal syscall.Signal
	at     int64 // deadline: CLOCK_MONOTONIC, ns
}

// readOrders passes on what fencelock asks for, and closes orders at end
// of file.
func readOrders(control *os.File, orders chan<- order) {
	defer close(orders)
	sc := bufio.NewScanner(control)
	for sc.Scan() {
		kind, arg, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(arg, 10, 64)
		switch {
		case err != nil:
		case kind == "deadline":
			orders <- order{kind: kind, at: n}
		case (kind == "signal" || kind == "send") && n > 0:
			orders <- order{kind: kind, signal: syscall.Signal(n)}
		}
	}
}

// monoNow reads CLOCK_MONOTONIC, which fencelock and its guard share:
// unlike the wall clock it does not step, and unlike a duration sent down
// the pipe it does not grow by the time the line takes to arrive.
func monoNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return ts.Nano()
}

func isPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// A guardEvent is one line of the guard's status pipe.
type guardEvent struct {
	kind   string             // "started", "stopped", "continued", "expired", "exited", "left", "failed"
	pid    int                // started
	signal syscall.Signal     // stopped
	status syscall.WaitStatus // exited
	code   int                // failed: 126 or 127
	text   string             // failed
}

func parseGuardEvent(line string) (guardEvent, bool) {
	kind, rest, _ := strings.Cut(line, " ")
	ev := guardEvent{kind: kind}
	var err error
	switch kind {
	case "started":
		ev.pid, err = strconv.Atoi(rest)
	case "stopped":
		var n int
		n, err = strconv.Atoi(rest)
		ev.signal = syscall.Signal(n)
	case "continued", "expired", "left":
	case "exited":
		var n uint64
		n, err = strconv.ParseUint(rest, 10, 32)
		ev.status = syscall.WaitStatus(n)
	case "failed":
		code, text, _ := strings.Cut(rest, " ")
		ev.code, err = strconv.Atoi(code)
		ev.text = text
	default:
		return ev, false
	}
	return ev, err == nil
}

// guard is fencelock's side of a running guard.
type guard struct {
	proc  *exec.Cmd
	group bool
	// pgid is COMMAND's process group (its PID) once the guard said it
	// started; 0 before, and with --foreground.
	pgid    int
	control *os.File          // closing it kills COMMAND
	events  <-chan guardEvent // closed when the guard has exited
	exited  <-chan error      // the guard's Wait, once it has exited
}

// startGuard starts the guard, which starts COMMAND (path, argv) with env
// and cmd's standard input and outputs, and kills it at deadline unless
// told a later one first. With group, COMMAND gets a process group of its
// own.
func startGuard(path string, argv, env []string, stdio *exec.Cmd, group bool, deadline time.Time) (*guard, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	mode := "foreground"
	if group {
		mode = "group"
	}
	p := exec.Command(selfExe(), append([]string{guardArg, mode, strconv.FormatInt(monoAt(deadline), 10), path}, argv...)...)
	p.Args[0] = "fencelock"
	p.Env = env
	p.Stdin, p.Stdout, p.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	p.ExtraFiles = []*os.File{statusW, controlR}
	// Output copied through pipes (when fencelock's own is not a file)
	// must not keep fencelock waiting for processes that COMMAND left
	// running with it open.
	p.WaitDelay = time.Second
	err = p.Start()
	statusW.Close()
	controlR.Close()
	if err != nil {
		statusR.Close()
		controlW.Close()
		return nil, err
	}
	events := make(chan guardEvent, 8)
	go func() {
		defer close(events)
		defer statusR.Close()
		sc := bufio.NewScanner(statusR)
		for sc.Scan() {
			if ev, ok := parseGuardEvent(sc.Text()); ok {
				events <- ev
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- p.Wait() }()
	return &guard{proc: p, group: group, control: controlW, events: events, exited: exited}, nil
}

// started records COMMAND's PID, which names its process group.
func (g *guard) started(pid int) {
	if g.group {
		g.pgid = pid
	}
}

// signal sends s to COMMAND, then SIGCONT, so that a stopped COMMAND gets
// it too: to its whole process group, or through the guard to COMMAND
// alone (--foreground), or to the group before COMMAND has started.
func (g *guard) signal(s syscall.Signal) {
	if g.pgid != 0 {
		syscall.Kill(-g.pgid, s) // errors: all gone already
		syscall.Kill(-g.pgid, syscall.SIGCONT)
		return
	}
	g.order("signal %d", int(s))
}

// send sends s alone, without SIGCONT: job control.
func (g *guard) send(s syscall.Signal) {
	if g.pgid != 0 {
		syscall.Kill(-g.pgid, s)
		return
	}
	g.order("send %d", int(s))
}

// expireAt tells the guard to kill COMMAND at t unless told a later time
// first.
func (g *guard) expireAt(t time.Time) {
	g.order("deadline %d", monoAt(t))
}

// monoAt returns t on CLOCK_MONOTONIC (ns), the clock the guard reads:
// t's own monotonic reading is not comparable across processes.
func monoAt(t time.Time) int64 {
	return monoNow() + int64(time.Until(t))
}

// order writes one line to the guard, bounded: a guard that does not read
// (stopped by a SIGSTOP) must not stop fencelock, whose own kill does not
// need the pipe in group mode, and closes it otherwise.
func (g *guard) order(format string, args ...any) {
	g.control.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(g.control, format+"\n", args...)
}

// kill kills COMMAND with SIGKILL: its whole process group at once, or
// through the guard (--foreground, or before COMMAND has started).
func (g *guard) kill() {
	if g.pgid != 0 {
		syscall.Kill(-g.pgid, syscall.SIGKILL)
	}
	g.control.Close()
}

// groupAlive reports whether a member of COMMAND's process group is left.
func (g *guard) groupAlive() bool {
	return g.pgid != 0 && groupAlive(g.pgid)
}

// describe words a wait status as os.ProcessState does: "exit status 3",
// "signal: killed".
func describe(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		s := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			s += " (core dumped)"
		}
		return s
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// statusCode turns a wait status into a shell-style exit status.
func statusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
