package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencelock/fencelock"
)

const runAbout = `Acquire the lock NAME (waiting up to --wait), run COMMAND while the lease
is renewed in the background, and release the lock when COMMAND exits.

COMMAND gets these variables in its environment:
  FENCELOCK_NAME    the lock name
  FENCELOCK_TOKEN   the fencing token: send it with every write
  FENCELOCK_LEASE   the public lease ID (not a secret)
  FENCELOCK_FENCE   the fence text form, for a Fencing-Token header:
                    TOKEN;lock="NAME";lease="ID"

If the lease is lost (the lock expired, was deleted, or could not be
renewed in time), COMMAND gets SIGTERM, then SIGKILL after --grace, the
cause is reported on stderr, and fencelock exits with 124. SIGINT, SIGTERM
and SIGHUP received by fencelock are forwarded to COMMAND, and fencelock
waits for it to exit.

COMMAND runs in its own process group, and signals go to the whole group,
so a shell's children stop too when the lease is lost. Like timeout(1),
this keeps COMMAND from reading the terminal; use --foreground for an
interactive command (signals then reach COMMAND alone).`

func (c *cli) run(ctx context.Context, args []string) int {
	var (
		cn         conn
		wait       time.Duration
		grace      time.Duration
		foreground bool
		metricsAt  string
	)
	cmd := c.command("run", "[flags] NAME -- COMMAND [ARG...]", runAbout)
	cn.addConn(cmd)
	cn.addTTL(cmd)
	cmd.fs.DurationVar(&wait, "wait", 0, "how long to wait for the lock (a `duration`); 0 makes one attempt")
	cmd.fromEnv("wait", "FENCELOCK_WAIT")
	cmd.fs.DurationVar(&grace, "grace", 10*time.Second, "`duration` between SIGTERM and SIGKILL when the lease is lost")
	cmd.fromEnv("grace", "FENCELOCK_GRACE")
	cmd.fs.BoolVar(&foreground, "foreground", false, "keep COMMAND in fencelock's process group, so it can read the terminal")
	cmd.fs.StringVar(&metricsAt, "metrics-addr", "", "serve Prometheus metrics of the lease at http://`addr`/metrics while COMMAND runs")
	cmd.fromEnv("metrics-addr", "FENCELOCK_METRICS_ADDR")
	pos, argv, dashes, err := cmd.parse(args)
	if err == nil {
		switch {
		case len(pos) == 0:
			err = usageErrorf("missing lock NAME")
		case len(pos) > 1:
			err = usageErrorf("unexpected argument %q after NAME: put COMMAND after --", pos[1])
		case !dashes:
			err = usageErrorf("missing -- before COMMAND")
		case len(argv) == 0:
			err = usageErrorf("missing COMMAND after --")
		case wait < 0:
			err = usageErrorf("--wait %v is negative", wait)
		case grace < 0:
			err = usageErrorf("--grace %v is negative", grace)
		}
	}
	var opts *redisTarget
	if err == nil {
		opts, err = cn.check(c.getenv)
	}
	if err != nil {
		return cmd.exit(err)
	}
	name := pos[0]

	// Find the command before taking the lock: a typo should not cost a
	// token or keep another holder waiting.
	// (exec.Command looks up bare names only; LookPath also checks paths.)
	if _, err := exec.LookPath(argv[0]); err != nil {
		return c.fail("run", execExit(err), err)
	}
	child := exec.Command(argv[0], argv[1:]...)
	if child.Err != nil {
		return c.fail("run", execExit(child.Err), child.Err)
	}

	if metricsAt != "" {
		m := newMetrics(name)
		stop, err := serveMetrics(metricsAt, m)
		if err != nil {
			return cmd.exit(usageError{err})
		}
		defer stop()
		cn.hooks = m.hooks()
	}

	locks, rdb := cn.locks(opts, true)
	defer rdb.Close()
	lease, code := c.acquireLease(ctx, "run", locks, name, wait)
	if lease == nil {
		return code
	}
	// Release even if ctx is done: the lock must not linger for its TTL.
	release := func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cn.ttl)
		defer cancel()
		return lease.Release(rctx)
	}

	sigs := make(chan os.Signal, 8)
	stop := c.notify(sigs)
	defer stop()
	if ctx.Err() != nil { // interrupted between acquire and now
		release()
		return c.fail("run", exitNotAcquired, fmt.Errorf("%v before COMMAND started", context.Cause(ctx)))
	}

	// A secret from an earlier "eval $(fencelock acquire --export)" in the
	// same shell is not COMMAND's business.
	env := slices.DeleteFunc(c.environ(), func(kv string) bool { return strings.HasPrefix(kv, "FENCELOCK_SECRET=") })
	child.Env = append(env,
		"FENCELOCK_NAME="+name,
		"FENCELOCK_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"FENCELOCK_LEASE="+lease.ID(),
		"FENCELOCK_FENCE="+lease.Fence().String(),
	)
	child.Stdin, child.Stdout, child.Stderr = c.stdin, c.stdout, c.stderr
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: !foreground}
	// Grandchildren that keep COMMAND's output open must not keep us
	// waiting after COMMAND has exited.
	child.WaitDelay = grace
	if err := child.Start(); err != nil {
		release()
		return c.fail("run", execExit(err), err)
	}
	res := supervise(child, lease.Context(), sigs, grace, !foreground, func(lost error) {
		fmt.Fprintf(c.stderr, "fencelock run: %v: sending SIGTERM to COMMAND, SIGKILL in %v\n", lost, grace)
	})
	rerr := release()

	switch {
	case res.lost != nil:
		how := "exited"
		if res.killed {
			how = "was killed (SIGKILL) after --grace " + grace.String()
		}
		fmt.Fprintf(c.stderr, "fencelock run: lease lost: COMMAND %s (%s)\n", how, res.state)
		return exitLeaseLost
	case errors.Is(rerr, fencelock.ErrLeaseLost):
		// Lost while COMMAND ran, though the keeper had not noticed yet.
		fmt.Fprintf(c.stderr, "fencelock run: %v (COMMAND %s)\n", rerr, res.state)
		return exitLeaseLost
	case rerr != nil:
		fmt.Fprintf(c.stderr, "fencelock run: %v; the lock expires after its TTL\n", rerr)
	}
	if res.err != nil {
		return c.fail("run", exitInternal, res.err)
	}
	return res.code
}

// result is how COMMAND ended.
type result struct {
	code   int              // exit status to report: its own, or 128+signal
	state  *os.ProcessState // for messages
	err    error            // waiting failed for another reason than its status
	lost   error            // why the lease was lost while it ran
	killed bool             // it got SIGKILL after the grace period
}

// supervise waits for child to exit. It forwards signals from sigs; when
// the lease context ends it calls onLost and sends SIGTERM, then SIGKILL
// after grace. With group, signals go to the child's process group, and
// group members left after the child exits on a lost lease are killed
// when grace runs out too.
func supervise(child *exec.Cmd, lease context.Context, sigs <-chan os.Signal, grace time.Duration, group bool, onLost func(error)) result {
	pid := child.Process.Pid
	signal := func(s syscall.Signal) {
		if group {
			syscall.Kill(-pid, s) // errors: all gone already
		} else {
			child.Process.Signal(s)
		}
	}
	waitc := make(chan error, 1)
	go func() { waitc <- child.Wait() }()

	var (
		res   result
		lost  = lease.Done()
		kill  *time.Timer
		killc <-chan time.Time
	)
	defer func() {
		if kill != nil {
			kill.Stop()
		}
	}()
	for {
		select {
		case err := <-waitc:
			res.state = child.ProcessState
			res.code, res.err = exitStatus(child.ProcessState, err)
			if res.lost != nil && group && killc != nil && syscall.Kill(-pid, 0) == nil {
				// The leader is gone, others in its group are not: they
				// get the rest of the grace period, then SIGKILL.
				<-killc
				signal(syscall.SIGKILL)
				res.killed = true
			}
			return res
		case s := <-sigs:
			if s, ok := s.(syscall.Signal); ok {
				signal(s)
			}
		case <-lost:
			lost = nil
			res.lost = context.Cause(lease)
			onLost(res.lost)
			signal(syscall.SIGTERM)
			kill = time.NewTimer(grace)
			killc = kill.C
		case <-killc:
			killc = nil
			signal(syscall.SIGKILL)
			res.killed = true
		}
	}
}

// exitStatus turns how a process ended into a shell-style status.
func exitStatus(ps *os.ProcessState, err error) (int, error) {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return exitInternal, err
	}
	if ps == nil {
		return exitInternal, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ps.ExitCode(), nil
}

// execExit maps a failure to find or start a command to 127 or 126.
func execExit(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}

// acquireLease makes one attempt (wait 0) or waits up to wait for the lock,
// reporting failures on stderr; a nil lease comes with the exit status.
func (c *cli) acquireLease(ctx context.Context, cmd string, locks *fencelock.Client, name string, wait time.Duration) (*fencelock.Lease, int) {
	var (
		lease *fencelock.Lease
		err   error
	)
	if wait == 0 {
		lease, err = locks.TryAcquire(ctx, name)
	} else {
		wctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("--wait %v passed", wait))
		lease, err = locks.Acquire(wctx, name)
		cancel()
	}
	switch {
	case err == nil:
		return lease, exitOK
	case errors.Is(err, fencelock.ErrInvalid):
		return nil, c.fail(cmd, exitUsage, err)
	case errors.Is(err, fencelock.ErrNotAcquired):
		return nil, c.fail(cmd, exitNotAcquired, err)
	}
	return nil, c.fail(cmd, exitInternal, err)
}
