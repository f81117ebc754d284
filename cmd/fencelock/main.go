// Command fencelock runs commands under Redis locks that issue fencing
// tokens (or under a semaphore's permits), or while leading an election, gives shell scripts the lock's
// acquire, renew and release, audits a Redis deployment for lock safety,
// and demonstrates why fencing matters.
//
// Usage:
//
//	fencelock run [flags] NAME [--] COMMAND [ARG...]
//	fencelock acquire [flags] NAME
//	fencelock renew [flags] [NAME]
//	fencelock release [flags] [NAME]
//	fencelock status [flags] NAME
//	fencelock elect [flags] NAME [--] COMMAND [ARG...]
//	fencelock leader [flags] NAME
//	fencelock doctor [flags]
//	fencelock put [flags] s3://BUCKET/KEY < FILE
//	fencelock demo [flags]
//	fencelock version
//
// Run "fencelock COMMAND -h" for the flags of each command, and see the
// exit codes in "fencelock -h".
//
// The command is a module of its own (its go.mod replaces the library and
// fenceprom by the directories above it) so that what it needs, the
// Prometheus client above all, stays out of the library's go.mod.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

// Exit codes. The child's own status passes through "run"; these are the
// codes fencelock itself chooses, after GNU timeout(1) and sysexits.h.
const (
	exitOK          = 0
	exitCritical    = 1   // doctor found a critical problem
	exitNoLeader    = 1   // leader: nobody leads the election
	exitUsage       = 2   // bad flags, arguments or environment
	exitNotAcquired = 75  // EX_TEMPFAIL: the lock is held by another lease
	exitLeaseLost   = 124 // the lease was lost (run: the command was terminated)
	exitInternal    = 125 // fencelock failed: Redis unreachable, protocol error
	exitCannotExec  = 126 // the command was found but could not be started
	exitNotFound    = 127 // the command was not found
)

const exitCodesHelp = `Exit status (each command's -h lists its own):
  0    success (run: the command's own status passes through, and a
       command killed by a signal gives 128+signal, as in the shell;
       release: also when nobody holds the lock any more)
  1    doctor found a critical problem; leader: nobody leads
  2    usage error: bad flags, arguments or environment
  75   not acquired: another lease holds the lock, or other leases hold
       every permit of run --permits (with --no-wait, or after --wait;
       -E, --conflict-exit-code, changes this status), or
       fencelock was interrupted before COMMAND started; elect: another
       candidate leads (with --no-wait, or throughout --wait)
  124  run, elect: the lease was lost or could not be renewed in time,
       and the command was terminated; renew: the lease no longer holds
       the lock; release: another lease holds it; put: the fence is stale
  125  fencelock itself failed (Redis unreachable, a password it wants
       or refuses, a server certificate that does not verify, unexpected
       reply)
  126  run, elect: the command was found but could not be started
  127  run, elect: the command was not found
`

const topUsage = `fencelock runs commands under Redis locks that issue fencing tokens.

Usage:
  fencelock run [flags] NAME [--] COMMAND [ARG...]   run a command holding a lock
                                                     (--permits N: a semaphore's permit)
  fencelock acquire [flags] NAME                     acquire; print the lease for eval
  fencelock renew [flags] [NAME]                     renew a lease printed by acquire
  fencelock release [flags] [NAME]                   release a lease printed by acquire
  fencelock status [flags] NAME                      show a lock's holder, TTL and token,
                                                     or a semaphore's slots
  fencelock resize --permits N NAME                  change a semaphore's number of permits
  fencelock elect [flags] NAME [--] COMMAND [ARG...] run a command while leading an election
  fencelock leader [flags] NAME                      show (or --watch) an election's leader
  fencelock doctor [flags]                           audit a Redis deployment for lock safety
                                                     (--resource s3://BUCKET/PREFIX: an S3 store)
  fencelock put [flags] s3://BUCKET/KEY < FILE       write a fenced S3 object (FENCELOCK_FENCE)
  fencelock demo [flags]                             watch a paused holder's stale write,
                                                     unfenced and fenced
  fencelock version                                  print the version (or --version)

Flags come before NAME; for run and elect, everything after NAME is
COMMAND (a "--" between them is optional).

Run "fencelock COMMAND -h" for a command's flags.

Lock names are 1 to 512 characters: letters, digits, spaces and
punctuation (printable ASCII), but no { or }.

Connection (every command but demo and version):
  --redis URL      or REDIS_URL (default redis://127.0.0.1:6379), one of:
    redis://[user:password@]host:port[/db]
                   one node (rediss:// for TLS, or unix:///path?db=N)
    redis+sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]
                   the master that these Sentinels name MASTER
                   (rediss+sentinel:// for TLS; user:password are the
                   Sentinels'; a missing port is 26379)
    redis+cluster://[user:password@]host:port[,host:port...]
                   a Cluster, found from these seed nodes
                   (rediss+cluster:// for TLS)
    More addresses may also come as ?addr=host:port (IPv6: ?addr=[::1]:26379).
  REDIS_USERNAME, REDIS_PASSWORD
                   ACL user and password of a node, a Cluster's nodes or a
                   Sentinel group's master, if the URL has none (for
                   redis+sentinel://, only from here); keep secrets out of argv
  --prefix P       or FENCELOCK_PREFIX (default fencelock:): the prefix of
                   every key, as the library's Options.Prefix
  --timeout D      or FENCELOCK_TIMEOUT (default 5s): how long to wait for
                   Redis to answer when connecting, and for each command
                   that does not wait for a lock
  --tls            or REDIS_TLS=1: TLS, as rediss:// URLs; with
  --cacert FILE    or REDIS_CACERT: the CA certificates to verify with
  --cert FILE      or REDIS_CERT, and
  --key FILE       or REDIS_KEY: a client certificate (mutual TLS)
  --sni NAME       or REDIS_SNI: the server name to ask for and verify
  --insecure       or REDIS_INSECURE=1: no verification (warned of)
`

func main() {
	if len(os.Args) > 1 && os.Args[1] == guardArg {
		os.Exit(guardMain(os.Args[2:]))
	}
	// go-redis logs dial failures on its own; fencelock reports errors itself.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), caught(os.Interrupt, syscall.SIGTERM)...)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// run is the command's entry point: it parses args (without the program
// name), does the work and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{
		stdin:      os.Stdin,
		stdout:     stdout,
		stderr:     stderr,
		getenv:     os.Getenv,
		environ:    os.Environ,
		notify:     notifySignals,
		jobControl: jobControl,
		untilInterrupted: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		},
	}
	return c.main(ctx, args)
}

// cli holds what a command reads from and writes to the outside world, so
// tests can run commands in parallel with their own environment, standard
// input and signals.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
	// notify starts delivering the signals that run forwards to its
	// command; stop ends it.
	notify func(chan<- os.Signal) (stop func())
	// untilInterrupted returns a context that SIGINT or SIGTERM ends,
	// even if fencelock was started with them ignored: what runs until
	// interrupted (leader --watch) must be interruptible, also when a
	// script started it in the background, where the shell ignores
	// SIGINT. Commands that run COMMAND keep ignored signals ignored, as
	// nohup asks (see caught).
	untilInterrupted func(context.Context) (context.Context, context.CancelFunc)
	// jobControl, for run and elect while COMMAND runs, delivers SIGTSTP
	// and SIGCONT and keeps fencelock from being stopped by SIGTTOU;
	// stop ends it. Nil in tests that run commands in-process.
	jobControl func(chan<- os.Signal) (stop func())
}

func notifySignals(c chan<- os.Signal) func() {
	signal.Notify(c, caught(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)...)
	return func() { signal.Stop(c) }
}

// jobControl catches SIGTSTP (Ctrl-Z), to stop COMMAND with fencelock,
// and SIGCONT, to continue it with fencelock. It ignores SIGTTOU: under
// "stty tostop", fencelock in the background would be stopped at its first
// message to the terminal, just when it must kill COMMAND. (The guard
// catches SIGTTOU, so COMMAND gets the default action again.)
func jobControl(c chan<- os.Signal) func() {
	signal.Notify(c, caught(syscall.SIGTSTP, syscall.SIGCONT)...)
	signal.Ignore(syscall.SIGTTOU)
	return func() {
		signal.Stop(c)
		signal.Reset(syscall.SIGTTOU)
	}
}

// caught returns the signals of sigs that fencelock was not started with
// ignored. A signal ignored by whoever started fencelock (nohup, a
// non-interactive shell's "&") stays ignored, for fencelock and, as exec
// keeps ignored signals ignored, for COMMAND.
func caught(sigs ...os.Signal) []os.Signal {
	return slices.DeleteFunc(slices.Clone(sigs), signal.Ignored)
}

func (c *cli) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, topUsage)
		fmt.Fprint(c.stderr, "\n"+exitCodesHelp)
		return exitUsage
	}
	cmds := map[string]func(context.Context, []string) int{
		"run":     c.run,
		"acquire": c.acquire,
		"renew":   c.renew,
		"release": c.release,
		"status":  c.status,
		"resize":  c.resize,
		"elect":   c.elect,
		"leader":  c.leader,
		"doctor":  c.doctor,
		"put":     c.put,
		"demo":    c.demo,
		"version": c.version,
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, topUsage)
		fmt.Fprint(c.stdout, "\n"+exitCodesHelp)
		return exitOK
	case "--version":
		return c.version(ctx, args[1:])
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(c.stderr, "fencelock: unknown command %q\n\n%s", args[0], topUsage)
		return exitUsage
	}
	return cmd(ctx, args[1:])
}

// A usageError is one that the user should fix in the command line or the
// environment; it exits with exitUsage.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// fail reports err on stderr, on one line prefixed with the command name,
// and returns code.
func (c *cli) fail(cmd string, code int, err error) int {
	fmt.Fprintf(c.stderr, "fencelock %s: %s\n", cmd, message(err))
	return code
}

// message words err for stderr: on one line (errors.Join puts each
// error on a line of its own), without the "fencelock: " of the library's
// sentinel errors, which would repeat the prefix that fail adds.
func message(err error) string {
	s := err.Error()
	for _, e := range []error{fencelock.ErrNotAcquired, fencelock.ErrLeaseLost, fencelock.ErrInvalid, fencelock.ErrNotReplicated, fencelock.ErrNoQuorum,
		fencelock.ErrNotHeld, fencelock.ErrNoLeader, fencelock.ErrNotLeader} {
		s = strings.ReplaceAll(s, e.Error(), strings.TrimPrefix(e.Error(), "fencelock: "))
	}
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
