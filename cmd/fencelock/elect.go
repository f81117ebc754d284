package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/fencelock/fencelock"
)

const electAbout = `Campaign in the election NAME, run COMMAND while this candidate leads,
and resign when COMMAND exits, so that a waiting candidate leads at once.
elect waits until it leads; --no-wait (-n) makes one attempt, --wait
bounds the wait, and -E sets the exit status if another candidate leads.
As with run, flags come before NAME, everything after NAME is COMMAND,
and a "--" between them is optional. Start one elect per
host (or per process that may lead), each with the same NAME: one of
them runs COMMAND at a time.

The leadership is a lease on the lock NAME, and its token is the term:
greater than every earlier term. COMMAND gets in its environment:
  FENCELOCK_NAME    the election's name
  FENCELOCK_TERM    the term
  FENCELOCK_TOKEN   the term too: the fencing token to send with every
                    write, so that a deposed leader's writes are rejected
  FENCELOCK_LEASE   the leadership's public lease ID (not a secret)
  FENCELOCK_FENCE   the fence text form, for a Fencing-Token header

--value is what the leader announces, which "fencelock leader NAME"
shows (an address, say); by default the host name and process ID.

COMMAND never outlives the leadership, as with run: once the lease can
no longer be renewed in time, or is lost, COMMAND gets SIGTERM, then
SIGKILL after --grace or shortly before the lease's deadline, and elect
exits with 124. If fencelock itself dies, COMMAND is killed with it.
What COMMAND leaves running in its process group is stopped before the
leadership is resigned, and signals are forwarded, as run does: after
SIGTERM, COMMAND gets --grace to exit, then SIGKILL, and elect resigns
at once, so that a waiting candidate leads without waiting out the TTL.

With --loop, elect campaigns again --loop-delay after COMMAND exits or
the leadership is lost, and runs COMMAND again when it leads, until
SIGINT or SIGTERM ends it.`

const electExits = `  N    COMMAND's own exit status; 128+S if signal S killed it (with
       --loop: that of the last COMMAND, once interrupted)
  0    with --loop: interrupted while campaigning or between runs
  2    usage error: bad flags, arguments or environment
  75   not elected: another candidate leads (with --no-wait) or led
       throughout --wait (-E changes this status), or elect was
       interrupted before COMMAND started (without --loop)
  124  the leadership was lost or could not be renewed in time: elect
       terminated COMMAND (without --loop)
  125  fencelock itself failed (Redis unreachable, unexpected reply)
  126  COMMAND was found but could not be started
  127  COMMAND was not found
`

func (c *cli) elect(ctx context.Context, args []string) int {
	var (
		cn        conn
		cf        commandFlags
		wf        waitFlags
		value     string
		loop      bool
		loopDelay time.Duration
	)
	cmd := c.command("elect", "[flags] NAME [--] COMMAND [ARG...]", electAbout, electExits)
	cn.addConn(cmd)
	cn.addTTL(cmd, "FENCELOCK_TTL")
	cn.addLockDelay(cmd)
	wf.addElect(cmd)
	cmd.fs.StringVar(&value, "value", "", "what this candidate announces while it leads, e.g. its `address` (default: host name and process ID)")
	cmd.fromEnv("value", "FENCELOCK_VALUE")
	cmd.fs.BoolVar(&loop, "loop", false, "campaign again after COMMAND exits or the leadership is lost, until interrupted")
	cmd.duration(&loopDelay, "loop-delay", time.Second, "with --loop, how long to wait before campaigning again (a `duration`)")
	cf.add(cmd)
	name, argv, err := cmd.parseCommand(args)
	var policy waitPolicy
	if err == nil {
		policy, err = wf.policy(cmd)
	}
	if err == nil && loopDelay < 0 {
		err = usageErrorf("%s is negative", cmd.source("loop-delay"))
	}
	if err != nil {
		return cmd.exit(err)
	}
	h, locks, done, code := c.prepareHolding(ctx, cmd, &cn, &cf, name, argv)
	if h == nil {
		return code
	}
	defer done()
	if !cmd.set("value") {
		host, _ := os.Hostname()
		value = fmt.Sprintf("%s pid %d", host, os.Getpid())
	}
	e := locks.Election(name)
	tk := &taking{cmd: "elect", name: name, kind: "lock",
		try:  func(ctx context.Context) (*fencelock.Lease, error) { return e.TryCampaign(ctx, value) },
		wait: func(ctx context.Context) (*fencelock.Lease, error) { return e.Campaign(ctx, value) },
		held: func(ctx context.Context, after string) string { return ledMessage(ctx, &cn, e, after) },
	}
	sigs := make(chan os.Signal, 8)
	stop := c.notify(sigs)
	defer stop()
	h.sigs = sigs
	for {
		lease, code := c.acquireLease(ctx, tk, h.a, policy)
		if lease == nil {
			if loop && ctx.Err() != nil {
				return exitOK
			}
			return code
		}
		for len(sigs) > 0 { // signals from before this leadership were not COMMAND's
			<-sigs
		}
		h.lease, h.env = lease, leaseEnv(c.environ(), lease, "FENCELOCK_TERM="+strconv.FormatInt(lease.Token(), 10))
		if ctx.Err() != nil {
			h.release(ctx)
			if loop {
				return exitOK
			}
			return c.fail("elect", exitNotAcquired, errors.New("interrupted before COMMAND started"))
		}
		code = c.hold(ctx, h)
		switch {
		case !loop, ctx.Err() != nil, code == exitInternal, code == exitCannotExec, code == exitNotFound:
			return code
		}
		fmt.Fprintf(c.stderr, "fencelock elect: COMMAND ended (status %d) in term %d; campaigning again in %v\n", code, lease.Token(), loopDelay)
		delay := time.NewTimer(loopDelay)
		select {
		case <-delay.C:
		case <-ctx.Done():
			delay.Stop()
			return exitOK
		}
	}
}

// ledMessage says who leads the election instead, for "not elected".
func ledMessage(ctx context.Context, cn *conn, e *fencelock.Election, after string) string {
	rctx, cancel := cn.request(ctx)
	defer cancel()
	l, err := e.Leader(rctx)
	switch {
	case errors.Is(err, fencelock.ErrNoLeader):
		return fmt.Sprintf("election %q has no leader now, but was led by another candidate%s (or its lock is held by a lease that did not campaign)", e.Name(), after)
	case err != nil:
		return fmt.Sprintf("election %q is led by another candidate%s", e.Name(), after)
	}
	return fmt.Sprintf("election %q is led by %s%s (term %d, lease %s)", e.Name(), strconv.Quote(l.Value), after, l.Term, l.LeaseID)
}
