package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/fencelock/fencelock"
)

// holding is COMMAND to run while a lease holds.
type holding struct {
	cmd       string // "run" or "elect", for messages
	cn        *conn
	a         *attempts
	f         *commandFlags
	lease     *fencelock.Lease
	path      string
	argv, env []string
	sigs      <-chan os.Signal
}

// prepareHolding does what run and elect do between parsing their
// arguments and taking a lease: check the flags, find COMMAND (before
// taking the lock: a typo should not cost a token or keep another holder
// waiting), follow the lease's attempts and serve its metrics with
// --metrics-addr, and connect. h lacks what comes with the lease: the
// lease, COMMAND's environment and the signals; done closes the client
// and the metrics page. On failure, reported, h is nil and code the exit
// status.
func (c *cli) prepareHolding(ctx context.Context, cmd *command, cn *conn, cf *commandFlags, name string, argv []string) (h *holding, locks *fencelock.Client, done func(), code int) {
	target, err := cn.check(cmd)
	if err == nil {
		err = cf.check(cmd, cn.ttl)
	}
	if err != nil {
		return nil, nil, nil, cmd.exit(err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, nil, c.fail(cmd.name, execExit(err), err)
	}
	a := &attempts{name: name, cmd: cmd.name, stderr: c.stderr, renewed: make(chan struct{}, 1)}
	cn.hooks = a.hooks()
	hooks, stopMetrics, err := cf.metrics.start(name, cmd.name, cn.timeout, c.stderr)
	if err != nil {
		return nil, nil, nil, cmd.exit(usageError{err})
	}
	cn.hooks = fencelock.JoinHooks(cn.hooks, hooks)
	rdb, err := cn.connect(ctx, target)
	if err != nil {
		code = c.fail(cmd.name, connectExit(ctx, exitNotAcquired), err)
		stopMetrics() // after the message, as a deferred stop would
		return nil, nil, nil, code
	}
	h = &holding{cmd: cmd.name, cn: cn, a: a, f: cf, path: path, argv: argv}
	return h, cn.locks(rdb, true), func() { rdb.Close(); stopMetrics() }, exitOK
}

// release releases the lease, even if ctx is done: the lock must not
// linger for its TTL. Not past the lease's deadline, when the lock
// expires by itself, and not at all once the lease is lost: the lock is
// gone or not ours.
func (h *holding) release(ctx context.Context) error {
	end := time.Now().Add(h.cn.timeout)
	if d := h.lease.Deadline(); d.Before(end) {
		end = d
	}
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), end)
	defer cancel()
	if h.lease.Context().Err() != nil {
		cancel()
	}
	return h.lease.Release(rctx)
}

// stopHow words how COMMAND ended after run terminated it, from its wait
// status: SIGKILL may have gone out just as COMMAND ended of SIGTERM.
func stopHow(res result) string {
	switch {
	case res.status == "signal: killed":
		return "was killed with SIGKILL"
	case res.killed:
		return "ended before SIGKILL reached it"
	}
	return "exited after SIGTERM"
}

// hold runs COMMAND with the stop guarantee (see supervisor), releases
// the lease when COMMAND has ended, and returns the exit status: the
// command's own, or 124 if the lease ran out or was lost, 125-127 if
// COMMAND could not be run.
func (c *cli) hold(ctx context.Context, h *holding) int {
	// As much again as the library keeps between the deadline and Redis's
	// expiry for clock drift, for the kill.
	killLead := min(h.f.grace, fencelock.Drift(h.cn.ttl))
	say, flush := diagnostics(c.stderr)
	s := &supervisor{cmd: h.cmd, name: h.lease.Name(), lease: h.lease, grace: h.f.grace, sigs: h.sigs, say: say, renewErr: h.a.renewErr,
		renewed: h.a.renewed, killLead: killLead}
	if err := s.start(h.path, h.argv, h.env, &exec.Cmd{Stdin: c.stdin, Stdout: c.stdout, Stderr: c.stderr}, !h.f.foreground); err != nil {
		flush()
		h.release(ctx)
		return c.fail(h.cmd, exitInternal, err)
	}
	if c.jobControl != nil {
		jobs := make(chan os.Signal, 2)
		stop := c.jobControl(jobs)
		defer stop()
		s.jobs = jobs
	}
	res := s.run()
	rerr := h.release(ctx)
	flush() // COMMAND is gone: what follows may wait for stderr
	if res.termed && res.killed && res.stopped == "" {
		fmt.Fprintf(c.stderr, "fencelock %s: COMMAND did not exit within --grace %v of SIGTERM, and was killed with SIGKILL\n", h.cmd, h.f.grace)
	}
	if res.strays && res.stopped == "" {
		fmt.Fprintf(c.stderr, "fencelock %s: what COMMAND left running in its process group did not exit after SIGTERM, and was killed with SIGKILL\n", h.cmd)
	}

	switch {
	case res.failed != 0:
		return c.fail(h.cmd, res.failed, res.err)
	case res.err != nil:
		return c.fail(h.cmd, exitInternal, res.err)
	case res.stopped != "":
		// COMMAND's status goes with COMMAND, not with what it left.
		how := stopHow(res) + " (" + res.status + ")"
		if res.after {
			how = "had exited by itself (" + res.status + ")"
		}
		switch {
		case res.strays:
			how += ", and what it left running in its process group was killed with SIGKILL"
		case res.left:
			how += ", and what it left running in its process group exited after SIGTERM"
		}
		end := "the lease was lost"
		switch {
		case res.lost != nil, errors.Is(rerr, fencelock.ErrLeaseLost):
		case rerr == nil:
			end = "the lease, renewed after all, is released"
		default:
			end = "the lock expires after its TTL (release: " + message(rerr) + ")"
		}
		fmt.Fprintf(c.stderr, "fencelock %s: COMMAND %s; %s\n", h.cmd, how, end)
		return exitLeaseLost
	case errors.Is(rerr, fencelock.ErrLeaseLost):
		// Lost while COMMAND ran, though the keeper had not noticed yet.
		fmt.Fprintf(c.stderr, "fencelock %s: %s (COMMAND %s)\n", h.cmd, message(rerr), res.status)
		return exitLeaseLost
	case rerr != nil:
		fmt.Fprintf(c.stderr, "fencelock %s: %s; the lock expires after its TTL\n", h.cmd, message(rerr))
	}
	return res.code
}
