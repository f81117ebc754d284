package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
)

const runAbout = `Acquire the lock NAME, run COMMAND while the lease is renewed in the
background, and release the lock when COMMAND exits. Like flock(1), run
waits until the lock is free; --no-wait makes one attempt, --wait bounds
the wait, and -E sets the exit status if the lock stays held.

As with flock(1) and "etcdctl lock", flags come before NAME and
everything after NAME is COMMAND; a "--" between them is optional (it
is needed before a COMMAND that starts with -).

COMMAND gets these variables in its environment:
  FENCELOCK_NAME    the lock name
  FENCELOCK_TOKEN   the fencing token: send it with every write
  FENCELOCK_LEASE   the public lease ID (not a secret)
  FENCELOCK_FENCE   the fence text form, for a Fencing-Token header:
                    "TOKEN";lock="NAME";lease="ID"

With --permits N, run takes one of the N permits of the semaphore NAME
instead of the lock NAME (a semaphore and a lock of the same name do not
exclude each other): at most N runs hold a permit at once, and the
others wait as for a lock. Each permit holds a slot, 0 to N-1, whose own
tokens fence it; COMMAND also gets
  FENCELOCK_SLOT    the permit's slot
  FENCELOCK_LOCK    the slot's fence name, "NAME{permit SLOT}": what a
                    fenced store checks FENCELOCK_TOKEN against (it is
                    also the lock of FENCELOCK_FENCE)
and everything below holds for the permit as for a lock. Give every run
of one semaphore the same N; "fencelock status --permits N NAME" shows
its slots. An empty FENCELOCK_PERMITS= undoes an exported one.

Every FENCELOCK_ variable of a lease that COMMAND sees is its own
lease's: a run within another's COMMAND does not pass on the outer
FENCELOCK_SLOT, FENCELOCK_LOCK or FENCELOCK_TERM. Nor does COMMAND
inherit FENCELOCK_PERMITS or the FENCELOCK_METRICS_ variables, which
configure this run alone: a run within COMMAND takes the lock it names,
unless given --permits itself.

--metrics-addr serves the lease's metrics while run runs; a cron job
that a scrape would miss can push them to a Pushgateway with
--metrics-push, or write them for the node exporter's textfile collector
with --metrics-textfile, when run exits. A failed push or write is said
on stderr and changes no exit status.

COMMAND never outlives the lease. Once the lease can no longer be renewed
in time (Redis is unreachable, its deadline is less than --grace away),
or is lost (the lock expired, was deleted or taken over), COMMAND gets
SIGTERM, then SIGKILL after --grace or shortly before the lease's
deadline, whichever comes first: the deadline passes before Redis could
let another holder in. The cause is reported on stderr, and run exits
with 124. So --ttl is at least 100ms: a renewal later than a shorter TTL
allows would kill COMMAND as it starts (on a busy machine, give it
seconds). If fencelock itself dies (SIGKILL, a crash), COMMAND is killed
with it (with --foreground, COMMAND alone: not the processes it started).
If fencelock is stopped (SIGSTOP, Ctrl-Z), COMMAND is killed at the
lease's deadline all the same: Ctrl-Z stops COMMAND with fencelock, fg or
bg continues both, but nothing renews the lease meanwhile.

What COMMAND leaves running in its process group when it exits (a "&"
job, a child that outlives it) holds the lease as COMMAND did, and never
outlives it either: run sends it SIGTERM, then SIGKILL after --grace or
shortly before the lease's deadline, and releases the lock only once the
group is empty. COMMAND's own exit status still passes through; stderr
says what was stopped. A COMMAND whose background work must finish waits
for it ("wait" in a shell). With --foreground, COMMAND alone is covered:
what it leaves running is not stopped, and the lock is released when
COMMAND exits. A process that leaves the group (setsid, a daemon) is out
of reach either way.

SIGINT, SIGTERM and SIGHUP received by fencelock are forwarded to
COMMAND, followed by SIGCONT so that a stopped COMMAND gets them too, and
fencelock waits for it to exit. After SIGTERM (a service manager stopping
fencelock), COMMAND gets --grace to exit, then SIGKILL, and the lock is
released at once, so that a waiting run takes it without waiting out the
TTL; COMMAND's status passes through. SIGINT and SIGHUP, which a
terminal sends an interactive COMMAND too, are forwarded alone.

COMMAND runs in its own process group, and signals go to the whole group,
so a shell's children stop too. Like timeout(1), this keeps COMMAND from
reading the terminal (it is stopped if it tries, and run says so); use
--foreground for an interactive command: it then stays in fencelock's
process group, and signals reach COMMAND alone.`

const runExits = `  N    COMMAND's own exit status; 128+S if signal S killed it
  2    usage error: bad flags, arguments or environment
  75   not acquired: another lease holds the lock, or with --permits
       other leases hold every permit (with --no-wait, or after --wait;
       -E changes this status), or fencelock was interrupted before
       COMMAND started
  124  the lease was lost or could not be renewed in time: run
       terminated COMMAND
  125  fencelock itself failed (Redis unreachable, unexpected reply)
  126  COMMAND was found but could not be started
  127  COMMAND was not found
`

func (c *cli) run(ctx context.Context, args []string) int {
	var (
		cn      conn
		wf      waitFlags
		cf      commandFlags
		permits int
	)
	cmd := c.command("run", "[flags] NAME [--] COMMAND [ARG...]", runAbout, runExits)
	cn.addConn(cmd)
	cn.addTTL(cmd, "FENCELOCK_TTL")
	cn.addLockDelay(cmd)
	wf.add(cmd)
	cmd.addPermits(&permits, "take one of the `n` permits (1 to "+strconv.Itoa(fencelock.MaxPermits)+") of the semaphore NAME instead of the lock NAME")
	cf.add(cmd)
	name, argv, err := cmd.parseCommand(args)
	var policy waitPolicy
	if err == nil {
		policy, err = wf.policy(cmd)
	}
	if err != nil {
		return cmd.exit(err)
	}
	h, locks, done, code := c.prepareHolding(ctx, cmd, &cn, &cf, name, argv)
	if h == nil {
		return code
	}
	defer done()
	tk := lockTaking("run", &cn, locks, name)
	if permits > 0 {
		tk = permitTaking("run", &cn, locks.Semaphore(name, permits))
	}
	lease, code := c.acquireLease(ctx, tk, h.a, policy)
	if lease == nil {
		return code
	}
	sigs := make(chan os.Signal, 8)
	stop := c.notify(sigs)
	defer stop()
	h.lease, h.env, h.sigs = lease, leaseEnv(c.environ(), lease, permitEnv(lease)...), sigs
	if ctx.Err() != nil { // interrupted between acquire and now
		h.release(ctx)
		return c.fail("run", exitNotAcquired, errors.New("interrupted before COMMAND started"))
	}
	return c.hold(ctx, h)
}

// commandFlags are the flags of run and elect about COMMAND.
type commandFlags struct {
	grace      time.Duration
	foreground bool
	metrics    metricsFlags
}

func (f *commandFlags) add(cmd *command) {
	cmd.duration(&f.grace, "grace", 0, "`duration` between SIGTERM and SIGKILL when the lease runs out; at most half the TTL\n      (default 10s, or TTL/3 if that is shorter)")
	cmd.fromEnv("grace", "FENCELOCK_GRACE")
	cmd.fs.BoolVar(&f.foreground, "foreground", false, "keep COMMAND in fencelock's process group, so it can read the terminal")
	f.metrics.add(cmd)
}

// minCommandTTL is the shortest TTL under which run and elect start
// COMMAND. The first renewal is due TTL/3 after the acquisition, and must
// be answered within TTL/3 less the drift allowance, when COMMAND gets
// SIGTERM: below this, a renewal that a busy machine delays by a few
// milliseconds, or the processes started with COMMAND, cost the lease,
// and COMMAND was killed as it started (at 10 to 30ms, on an idle
// machine too). The library's MinTTL still bounds acquire's.
const minCommandTTL = 100 * time.Millisecond

// check applies --grace's default and bounds to a lease of ttl.
func (f *commandFlags) check(cmd *command, ttl time.Duration) error {
	if ttl < minCommandTTL {
		return usageErrorf("%s: %s needs a TTL of at least %v, as COMMAND would be killed before a renewal could land; on a busy machine give it seconds", cmd.source("ttl"), cmd.name, minCommandTTL)
	}
	if !cmd.set("grace") {
		f.grace = min(10*time.Second, (ttl / 3).Round(time.Millisecond))
	}
	switch {
	case f.grace < 0:
		return usageErrorf("%s is negative", cmd.source("grace"))
	case f.grace > ttl/2:
		return usageErrorf("%s is more than half of %s: COMMAND would get SIGTERM before the lease had a fair chance to be renewed; give a shorter --grace or a longer --ttl", cmd.source("grace"), cmd.source("ttl"))
	}
	return f.metrics.check(cmd)
}

// leaseEnv returns COMMAND's environment: environ with the lease's name,
// token, ID and fence, and the extra variables, and without what belongs
// to another lease or to this run alone. Every FENCELOCK_ variable of a
// lease that COMMAND sees is its own lease's: not what an outer run or
// elect (COMMAND within COMMAND) gave its own, nor what an earlier "eval
// $(fencelock acquire --export)" in the same shell left there (the owner
// secret, or where to read it, is not COMMAND's business either). Nor
// does COMMAND inherit the settings of this run's own lease and outputs
// (--permits, the metrics): they would make a run within COMMAND take a
// permit of a semaphore where it names a lock, or serve its metrics
// where this run does. The settings every command shares (REDIS_URL,
// FENCELOCK_PREFIX, FENCELOCK_TTL...) stay.
func leaseEnv(environ []string, lease *fencelock.Lease, extra ...string) []string {
	env := slices.DeleteFunc(environ, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(notInherited, k)
	})
	env = append(env,
		"FENCELOCK_NAME="+lease.Name(),
		"FENCELOCK_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"FENCELOCK_LEASE="+lease.ID(),
		"FENCELOCK_FENCE="+lease.Fence().String(),
	)
	return append(env, extra...)
}

// notInherited are the variables that COMMAND never inherits (see
// leaseEnv): those of a lease, which run and elect set for their own,
// and the settings of one run alone.
var notInherited = []string{
	"FENCELOCK_NAME", "FENCELOCK_TOKEN", "FENCELOCK_LEASE", "FENCELOCK_FENCE",
	"FENCELOCK_SLOT", "FENCELOCK_LOCK", "FENCELOCK_TERM",
	"FENCELOCK_SECRET", "FENCELOCK_SECRET_FILE", "FENCELOCK_LEASE_TTL",
	"FENCELOCK_PERMITS", "FENCELOCK_METRICS_ADDR", "FENCELOCK_METRICS_PUSH", "FENCELOCK_METRICS_TEXTFILE",
}

// permitEnv returns the variables that a permit's lease adds to
// COMMAND's environment, none for a lock's: its slot, and the slot's fence
// name, which is not the semaphore's name.
func permitEnv(lease *fencelock.Lease) []string {
	if lease.Slot() < 0 {
		return nil
	}
	return []string{
		"FENCELOCK_SLOT=" + strconv.Itoa(lease.Slot()),
		"FENCELOCK_LOCK=" + lease.Fence().Lock,
	}
}

// connectExit is the exit status after connect failed: 125, or code if
// fencelock was interrupted meanwhile.
func connectExit(ctx context.Context, code int) int {
	if ctx.Err() != nil {
		return code
	}
	return exitInternal
}

// execExit maps a failure to find or start a command to 127 or 126.
func execExit(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotExec
}
