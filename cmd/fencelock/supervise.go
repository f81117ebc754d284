package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// A leaseClock is what supervise needs of a lease: when it ends unless
// renewed, and whether it was lost.
type leaseClock interface {
	Context() context.Context
	Deadline() time.Time
}

// supervisor watches COMMAND for run. Its promise: while fencelock lives,
// COMMAND is dead by the lease's deadline, which passes before Redis could
// let another holder in. Once the lease can no longer be renewed in time
// (its deadline is less than grace away) or is lost, COMMAND gets SIGTERM,
// and SIGKILL grace later, or at the deadline if that comes first: killLead
// before it, so that the kill has landed by then even if fencelock gets
// the processor late.
type supervisor struct {
	cmd   string // "run" or "elect", for messages
	g     *guard
	name  string
	lease leaseClock
	grace time.Duration
	// killLead is how long before the deadline SIGKILL goes out.
	killLead time.Duration
	sigs     <-chan os.Signal
	// jobs carries SIGTSTP and SIGCONT (job control), nil without it.
	jobs <-chan os.Signal
	// renewed has a value after each renewal: the deadline may have moved.
	renewed <-chan struct{}
	// say writes diagnostics without blocking (see diagnostics).
	say func(format string, args ...any)
	// renewErr returns the last renewal's error, for the message when the
	// lease runs out.
	renewErr func() error

	// expiry is when the guard kills COMMAND unless told a later time.
	expiry time.Time
}

// start starts the guard, and through it COMMAND (see startGuard), the
// guard armed with the lease's deadline less killLead before COMMAND
// starts: a fencelock stopped before its first word to the guard cannot
// let COMMAND outlive the lease, nor reach its deadline.
func (s *supervisor) start(path string, argv, env []string, stdio *exec.Cmd, group bool) error {
	at := s.lease.Deadline().Add(-s.killLead)
	g, err := startGuard(path, argv, env, stdio, group, at)
	if err != nil {
		return err
	}
	s.g, s.expiry = g, at
	return nil
}

// terminalStop words the signals that stop a background process group
// that uses the terminal.
var terminalStop = map[syscall.Signal]string{
	syscall.SIGTTIN: "SIGTTIN: it read from the terminal",
	syscall.SIGTTOU: "SIGTTOU: it wrote to the terminal or changed its settings",
}

// diagnostics writes messages to w from a goroutine of its own, so that
// no write can hold up the stop path: stderr may be a full pipe nobody
// reads (a stuck log reader, a paused pager). say never blocks; a message
// that finds the queue full is dropped. flush waits until the queue is
// written, for messages that must come after those already said.
func diagnostics(w io.Writer) (say func(format string, args ...any), flush func()) {
	q := make(chan string, 32)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range q {
			io.WriteString(w, m)
		}
	}()
	say = func(format string, args ...any) {
		select {
		case q <- fmt.Sprintf(format, args...):
		default:
		}
	}
	return say, func() { close(q); <-done }
}

// result is how COMMAND ended.
type result struct {
	code    int    // exit status to report: its own, or 128+signal
	status  string // "exit status 3", "signal: killed"; for messages
	err     error  // the guard failed: COMMAND could not be watched
	failed  int    // 126 or 127 if COMMAND could not be started
	lost    error  // why the lease was lost while COMMAND ran
	stopped string // why run terminated COMMAND, if it did
	killed  bool   // COMMAND got SIGKILL
	// left: COMMAND left processes running in its process group, which
	// got SIGTERM; after says whether COMMAND had exited by itself before
	// run stopped anything.
	left, after bool
	strays      bool // what COMMAND left in its group got SIGKILL
	termed      bool // fencelock got SIGTERM, and bounded COMMAND's exit by --grace
}

// run waits until COMMAND, what it left running in its process group,
// and the guard have exited.
func (s *supervisor) run() result {
	var (
		res       result
		ended     bool // the guard reported how COMMAND ended
		killed    bool // SIGKILL went out, to COMMAND or what was left of it
		events    = s.g.events
		lost      = s.lease.Context().Done()
		term      = time.NewTimer(time.Until(s.lease.Deadline().Add(-s.grace)))
		termc     = term.C
		kill      *time.Timer
		killc     <-chan time.Time
		killAt    time.Time // when kill fires
		forwarded time.Time // when the first signal was forwarded to COMMAND
	)
	defer func() {
		term.Stop()
		if kill != nil {
			kill.Stop()
		}
		s.g.control.Close() // the guard is gone
	}()
	// tellGuard passes the lease's deadline on to the guard, which kills
	// COMMAND by then if fencelock cannot (stopped, starved).
	tellGuard := func() {
		if at := s.lease.Deadline().Add(-s.killLead); !at.Equal(s.expiry) {
			s.expiry = at
			s.g.expireAt(at)
		}
	}
	tellGuard()
	// killBy makes sure SIGKILL goes out by at, or at once if at has come.
	killBy := func(at time.Time) {
		switch {
		case kill == nil:
			kill = time.NewTimer(time.Until(at))
		case killc != nil && at.Before(killAt):
			kill.Reset(time.Until(at))
		default:
			return
		}
		killc, killAt = kill.C, at
	}
	// stopAt returns when SIGKILL follows a SIGTERM sent now: grace later,
	// or killLead before the lease's deadline if that comes first, and
	// words it.
	stopAt := func() (time.Time, string) {
		at, when := time.Now().Add(s.grace), fmt.Sprintf("in %v", s.grace)
		if d := s.lease.Deadline().Add(-s.killLead); d.Before(at) {
			at, when = d, fmt.Sprintf("at the lease's deadline in %v", time.Until(d).Round(time.Millisecond))
		}
		return at, when
	}
	terminate := func(why string) {
		term.Stop()
		termc = nil
		res.stopped = why
		whom := "COMMAND"
		if ended {
			whom = "what COMMAND left running in its process group"
		}
		killAt, when := stopAt()
		if !time.Now().Before(killAt) {
			// The deadline has come (fencelock did not run meanwhile):
			// no time for SIGTERM.
			s.g.kill()
			killed = true
			res.killed = !ended
			res.strays = res.left
			s.say("fencelock %s: %s: the lease's deadline has come: %s got SIGKILL\n", s.cmd, why, whom)
			return
		}
		// Signal first: the message must not delay it.
		s.g.signal(syscall.SIGTERM)
		killBy(killAt)
		s.say("fencelock %s: %s: sending SIGTERM to %s, SIGKILL %s\n", s.cmd, why, whom, when)
	}
	// guardExpired fills in res when the guard killed COMMAND at the
	// lease's deadline, fencelock not having done so itself: the guard
	// said so (expired), or the deadline it was last sent has passed. A
	// later deadline sent after the guard's had come is no sign that
	// someone else killed COMMAND: fencelock was late.
	guardFired := false
	guardExpired := func(status string) {
		if killed || res.killed || status != "signal: killed" || (!guardFired && time.Now().Before(s.expiry)) {
			return
		}
		res.killed, res.err = true, nil
		if res.stopped == "" {
			res.stopped = "the lease's deadline passed before fencelock could tell its guard a later one (stopped or starved?), and the guard killed COMMAND"
		}
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch ev.kind {
			case "started":
				s.g.started(ev.pid)
			case "expired":
				guardFired = true
			case "stopped":
				why, onTerminal := terminalStop[ev.signal]
				switch {
				case onTerminal && !forwarded.IsZero() && res.stopped == "" && !killed:
					// Continued to act on a forwarded signal, COMMAND went
					// back to the terminal and was stopped again: it cannot
					// act on it, and would hold the lock forever.
					at := forwarded.Add(s.grace)
					killBy(at)
					s.say("fencelock %s: COMMAND is stopped again (%s) after the signal it was sent, so it cannot act on it: SIGKILL in %v\n", s.cmd, why, max(0, time.Until(at)).Round(time.Millisecond))
				case onTerminal && s.g.group:
					s.say("fencelock %s: COMMAND is stopped (%s), which its own process group cannot; it holds the lock while stopped. Use --foreground for an interactive command\n", s.cmd, why)
				}
			case "exited":
				ended = true
				res.code, res.status = statusCode(ev.status), describe(ev.status)
				guardExpired(res.status)
			case "left":
				// COMMAND has exited, but processes it left in its group
				// run on with its lease: they are stopped before the lease
				// is released, as COMMAND would be.
				res.left = true
				if res.stopped != "" || killed {
					continue // they got SIGTERM with COMMAND; SIGKILL is due
				}
				res.after = true
				s.g.signal(syscall.SIGTERM)
				at, when := stopAt()
				killBy(at)
				s.say("fencelock %s: COMMAND exited (%s) but left processes running in its process group: sending them SIGTERM, SIGKILL %s; the lease is released once they are gone\n", s.cmd, res.status, when)
			case "failed":
				ended = true
				if ev.code == exitNotFound || ev.code == exitCannotExec {
					res.failed = ev.code
				}
				res.err = fmt.Errorf("%s", ev.text)
			}
		case err := <-s.g.exited:
			for ev := range s.g.events { // closed now that the guard is gone
				switch ev.kind {
				case "started":
					s.g.started(ev.pid)
				case "expired":
					guardFired = true
				case "exited":
					ended = true
					res.code, res.status = statusCode(ev.status), describe(ev.status)
					guardExpired(res.status)
				case "left":
					res.left = true
				}
			}
			if !ended {
				// The guard died before COMMAND was reaped: killed by
				// someone, or by itself at the lease's deadline. Whatever
				// is left of COMMAND goes too.
				s.g.kill()
				res.code, res.status = 128+int(syscall.SIGKILL), "signal: killed"
				guardExpired(res.status)
				killed = true
				if !res.killed {
					res.err = fmt.Errorf("COMMAND's guard process ended unexpectedly (%v: %v); COMMAND was killed", s.g.proc.ProcessState, err)
				}
			}
			if s.g.groupAlive() {
				// The guard leaves COMMAND's group only once it is empty,
				// or after killing it: if it died before, what is left
				// goes at once.
				s.g.kill()
				res.strays = res.strays || res.left
			}
			return res
		case got := <-s.sigs:
			sig, ok := got.(syscall.Signal)
			if !ok {
				continue
			}
			s.g.signal(sig)
			if forwarded.IsZero() {
				forwarded = time.Now()
			}
			if sig == syscall.SIGTERM && !killed && kill == nil {
				// Asked to stop (a service manager, kill): the lock is
				// handed over once COMMAND, and what it left in its group,
				// are gone, which --grace bounds, as when the lease runs
				// out. SIGINT and SIGHUP may be a terminal's, for an
				// interactive COMMAND that handles them: forwarded alone.
				at, when := stopAt()
				killBy(at)
				res.termed = true
				s.say("fencelock %s: SIGTERM: forwarded; SIGKILL %s unless COMMAND exits\n", s.cmd, when)
			}
		case sig := <-s.jobs:
			switch sig {
			case syscall.SIGTSTP:
				// Ctrl-Z: COMMAND stops with fencelock, as a shell's job
				// does. While fencelock is stopped nothing renews the
				// lease, and the guard kills COMMAND at its deadline.
				s.g.send(syscall.SIGTSTP)
				syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			case syscall.SIGCONT:
				s.g.send(syscall.SIGCONT) // fg or bg: COMMAND goes on too
			}
		case <-s.renewed:
			tellGuard()
		case <-lost:
			lost = nil
			res.lost = context.Cause(s.lease.Context())
			if res.stopped == "" {
				terminate(message(res.lost))
			}
		case <-termc:
			d := s.lease.Deadline()
			if wait := time.Until(d.Add(-s.grace)); wait > 0 {
				term.Reset(wait) // renewed meanwhile
				tellGuard()
				continue
			}
			why := "no answer from Redis yet"
			if err := s.renewErr(); err != nil {
				why = message(err)
			}
			terminate(fmt.Sprintf("the lease on %q cannot be renewed in time (%s)", s.name, why))
		case <-killc:
			killc = nil
			s.g.kill() // COMMAND, or what is left of its group
			killed = true
			res.killed = !ended
			res.strays = res.left
		}
	}
}
