package main

import (
	"context"
	"fmt"
	"io"
	"os"
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
	strays  bool   // processes COMMAND left in its group got SIGKILL
}

// run waits until COMMAND and the guard have exited.
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
		forwarded time.Time // when the first signal was forwarded to COMMAND
		expiry    time.Time // when the guard kills COMMAND unless told later
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
		if at := s.lease.Deadline().Add(-s.killLead); !at.Equal(expiry) {
			expiry = at
			s.g.expireAt(at)
		}
	}
	tellGuard()
	// killBy makes sure SIGKILL goes out by at, or at once if at has come.
	killBy := func(at time.Time) {
		if kill != nil {
			return
		}
		kill = time.NewTimer(time.Until(at))
		killc = kill.C
	}
	terminate := func(why string) {
		term.Stop()
		termc = nil
		res.stopped = why
		killAt := time.Now().Add(s.grace)
		when := fmt.Sprintf("in %v", s.grace)
		if d := s.lease.Deadline().Add(-s.killLead); d.Before(killAt) {
			killAt = d
			when = fmt.Sprintf("at the lease's deadline in %v", time.Until(d).Round(time.Millisecond))
		}
		if !time.Now().Before(killAt) {
			// The deadline has come (fencelock did not run meanwhile):
			// no time for SIGTERM.
			s.g.kill()
			killed = true
			res.killed = !ended
			s.say("fencelock %s: %s: the lease's deadline has come: COMMAND got SIGKILL\n", s.cmd, why)
			return
		}
		// Signal first: the message must not delay it.
		s.g.signal(syscall.SIGTERM)
		killBy(killAt)
		s.say("fencelock %s: %s: sending SIGTERM to COMMAND, SIGKILL %s\n", s.cmd, why, when)
	}
	// guardExpired fills in res when the guard killed COMMAND at the
	// lease's deadline, fencelock not having done so itself.
	guardExpired := func(status string) {
		if killed || res.killed || status != "signal: killed" || time.Now().Before(expiry) {
			return
		}
		res.killed, res.err = true, nil
		if res.stopped == "" {
			res.stopped = "the lease's deadline passed while fencelock did not run (stopped?), and its guard killed COMMAND"
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
			case "failed":
				ended = true
				if ev.code == exitNotFound || ev.code == exitCannotExec {
					res.failed = ev.code
				}
				res.err = fmt.Errorf("%s", ev.text)
			}
		case err := <-s.g.exited:
			for ev := range s.g.events { // closed now that the guard is gone
				if ev.kind == "exited" {
					ended = true
					res.code, res.status = statusCode(ev.status), describe(ev.status)
					guardExpired(res.status)
				}
			}
			if !ended {
				// The guard died before COMMAND was reaped: killed with the
				// group by us, or by itself at the lease's deadline, or by
				// someone else. Whatever is left of COMMAND goes too.
				s.g.kill()
				res.code, res.status = 128+int(syscall.SIGKILL), "signal: killed"
				guardExpired(res.status)
				killed = true
				if !res.killed {
					res.err = fmt.Errorf("COMMAND's guard process ended unexpectedly (%v: %v); COMMAND was killed", s.g.proc.ProcessState, err)
				}
			}
			if res.stopped != "" && !killed && s.g.groupAlive() {
				// COMMAND is gone, others of its group are not: they get
				// the rest of the grace period, then SIGKILL.
				<-killc
				s.g.kill()
				res.strays = true
			}
			return res
		case sig := <-s.sigs:
			if sig, ok := sig.(syscall.Signal); ok {
				s.g.signal(sig)
				if forwarded.IsZero() {
					forwarded = time.Now()
				}
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
		}
	}
}
