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
	stderr   io.Writer
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
		res    result
		ended  bool // the guard reported how COMMAND ended
		killed bool // SIGKILL went out, to COMMAND or what was left of it
		events = s.g.events
		lost   = s.lease.Context().Done()
		term   = time.NewTimer(time.Until(s.lease.Deadline().Add(-s.grace)))
		termc  = term.C
		kill   *time.Timer
		killc  <-chan time.Time
	)
	defer func() {
		term.Stop()
		if kill != nil {
			kill.Stop()
		}
		s.g.control.Close() // the guard is gone
	}()
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
		fmt.Fprintf(s.stderr, "fencelock %s: %s: sending SIGTERM to COMMAND, SIGKILL %s\n", s.cmd, why, when)
		s.g.signal(syscall.SIGTERM)
		kill = time.NewTimer(time.Until(killAt))
		killc = kill.C
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
				if why, ok := terminalStop[ev.signal]; ok && s.g.group {
					fmt.Fprintf(s.stderr, "fencelock %s: COMMAND is stopped (%s), which its own process group cannot; it holds the lock while stopped. Use --foreground for an interactive command\n", s.cmd, why)
				}
			case "exited":
				ended = true
				res.code, res.status = statusCode(ev.status), describe(ev.status)
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
				}
			}
			if !ended {
				// The guard died before COMMAND was reaped: killed with the
				// group by us, or by someone else. Whatever is left of
				// COMMAND goes too.
				s.g.kill()
				killed = true
				res.code, res.status = 128+int(syscall.SIGKILL), "signal: killed"
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
			}
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
