package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
)

// waitFlags are how run and acquire wait for a lock. Like flock(1),
// "etcdctl lock" and "consul lock", they wait until the lock is free by
// default; --no-wait (-n, as flock's) makes one attempt, and --wait
// bounds the wait (--wait 0 is one attempt too, as flock -w 0).
type waitFlags struct {
	wait     time.Duration
	noWait   bool
	conflict int
}

// addConflict registers -E, flock's --conflict-exit-code.
func (w *waitFlags) addConflict(cmd *command) {
	cmd.fs.IntVar(&w.conflict, "conflict-exit-code", exitNotAcquired, "exit `status` when another lease holds the lock, or another candidate leads, after the\n      one attempt or the --wait (1 to 255, as flock's -E; not 0, which would let a script run unlocked)")
	cmd.aliasFlag("E", "conflict-exit-code")
}

func (w *waitFlags) add(cmd *command) {
	cmd.duration(&w.wait, "wait", 0, "give up after waiting this long for the lock (a `duration`; default: wait until it is free;\n      0: one attempt, as --no-wait)")
	cmd.fromEnv("wait", "FENCELOCK_WAIT")
	cmd.fs.BoolVar(&w.noWait, "no-wait", false, "make one attempt: exit 75 at once if another lease holds the lock")
	cmd.aliasFlag("n", "no-wait")
	w.addConflict(cmd)
}

// addElect registers the same flags for elect, worded for an election.
func (w *waitFlags) addElect(cmd *command) {
	cmd.duration(&w.wait, "wait", 0, "give up after campaigning this long (a `duration`; default: campaign until elected;\n      0: one attempt, as --no-wait)")
	cmd.fromEnv("wait", "FENCELOCK_WAIT")
	cmd.fs.BoolVar(&w.noWait, "no-wait", false, "make one attempt: exit 75 at once if another candidate leads")
	cmd.aliasFlag("n", "no-wait")
	w.addConflict(cmd)
}

// waitPolicy is what the flags ask for: one attempt, waiting up to limit,
// or waiting until the lock is free.
type waitPolicy struct {
	once     bool
	limit    time.Duration // > 0: give up after this long
	limitBy  string        // "--wait 3s", for messages
	conflict int           // the exit status when the lock stays held: 75, or -E's
}

func (w *waitFlags) policy(cmd *command) (waitPolicy, error) {
	if w.conflict < 1 || w.conflict > 255 {
		return waitPolicy{}, usageErrorf("--conflict-exit-code %d: want 1 to 255 (0 would tell a script that it holds the lock)", w.conflict)
	}
	p, err := w.waitPolicy(cmd)
	p.conflict = w.conflict
	return p, err
}

func (w *waitFlags) waitPolicy(cmd *command) (waitPolicy, error) {
	switch {
	case w.noWait && cmd.from["wait"] == "--wait":
		return waitPolicy{}, usageErrorf("--no-wait and --wait %v contradict each other", w.wait)
	case w.noWait:
		return waitPolicy{once: true}, nil
	case !cmd.set("wait"):
		return waitPolicy{}, nil
	case w.wait < 0:
		return waitPolicy{}, usageErrorf("%s is negative", cmd.source("wait"))
	case w.wait == 0:
		return waitPolicy{once: true}, nil
	}
	return waitPolicy{limit: w.wait, limitBy: cmd.source("wait")}, nil
}

// attempts follows a lease's acquisition and renewals through the
// library's hooks: the last attempt's error tells a lock held throughout
// a wait from Redis failing, and the last renewal's error says why a
// lease runs out.
type attempts struct {
	name   string
	cmd    string
	stderr io.Writer

	mu         sync.Mutex
	kind       string // what name names, from taking.kind
	waiting    bool   // Acquire, which retries, rather than TryAcquire
	failure    error  // of the last attempt that Redis or the network failed
	failing    bool   // the last attempt failed so, rather than finding the lock held
	renewError error
	// renewed gets a value after each renewal (dropped if one is pending).
	renewed chan struct{}
}

func (a *attempts) hooks() *fencelock.Hooks {
	return &fencelock.Hooks{
		AcquireAttempt: func(ctx context.Context, i fencelock.AcquireAttemptInfo) {
			if errors.Is(i.Err, context.Canceled) || errors.Is(i.Err, context.DeadlineExceeded) ||
				(ctx.Err() != nil && errors.Is(i.Err, os.ErrDeadlineExceeded)) {
				// Cut short by the end of the wait, not failed: go-redis
				// may report it as the connection's deadline, which it
				// sets from the context's (i/o timeout).
				return
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			failed := i.Err != nil && !errors.Is(i.Err, fencelock.ErrNotAcquired)
			if failed {
				a.failure = i.Err
			}
			if failed && !a.failing && a.waiting {
				// Said once per run of failures: a wait may outlast a Redis
				// restart, and should not do so silently.
				fmt.Fprintf(a.stderr, "fencelock %s: waiting for %s %q: %s; retrying\n", a.cmd, a.kind, a.name, message(i.Err))
			}
			a.failing = failed
		},
		RenewDone: func(_ context.Context, i fencelock.RenewDoneInfo) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.renewError = i.Err
			select {
			case a.renewed <- struct{}{}:
			default:
			}
		},
	}
}

func (a *attempts) renewErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.renewError
}

// redisFailure returns the error of the last attempt if Redis or the
// network failed it, nil if it found the lock held (or nothing was sent).
func (a *attempts) redisFailure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.failing {
		return nil
	}
	return a.failure
}

// taking is how a command takes a lock: a lease of run and acquire, or
// the leadership of elect.
type taking struct {
	cmd  string // the command, for messages
	name string // the lock's (or election's, or semaphore's) name
	kind string // what name names, for messages: "lock" or "semaphore"
	// try makes one attempt; wait waits until it holds the lock or ctx
	// ends.
	try, wait func(ctx context.Context) (*fencelock.Lease, error)
	// held says who holds the lock instead, for "not acquired"; after is
	// " after --wait D" or "".
	held func(ctx context.Context, after string) string
}

// lockTaking takes the lock name with locks.
func lockTaking(cmd string, cn *conn, locks *fencelock.Client, name string) *taking {
	return &taking{
		cmd: cmd, name: name, kind: "lock",
		try:  func(ctx context.Context) (*fencelock.Lease, error) { return locks.TryAcquire(ctx, name) },
		wait: func(ctx context.Context) (*fencelock.Lease, error) { return locks.Acquire(ctx, name) },
		held: func(ctx context.Context, after string) string { return heldMessage(ctx, cn, locks, name, after) },
	}
}

// permitTaking takes a permit of the semaphore sem.
func permitTaking(cmd string, cn *conn, sem *fencelock.Semaphore) *taking {
	return &taking{
		cmd: cmd, name: sem.Name(), kind: "semaphore",
		try:  sem.TryAcquire,
		wait: sem.Acquire,
		held: func(ctx context.Context, after string) string { return permitsHeldMessage(ctx, cn, sem, after) },
	}
}

// acquireLease takes the lock as w says, reporting failures on stderr
// on one line; a nil lease comes with the exit status: 75 if another
// lease holds the lock or fencelock was interrupted, 125 if Redis failed.
func (c *cli) acquireLease(ctx context.Context, tk *taking, a *attempts, w waitPolicy) (*fencelock.Lease, int) {
	var (
		lease *fencelock.Lease
		err   error
	)
	a.mu.Lock()
	a.waiting, a.kind = !w.once, tk.kind
	a.mu.Unlock()
	switch {
	case w.once:
		lease, err = tk.try(ctx)
	case w.limit > 0:
		wctx, cancel := context.WithTimeoutCause(ctx, w.limit, errWaitedEnough)
		lease, err = tk.wait(wctx)
		cancel()
	default:
		lease, err = tk.wait(ctx)
	}
	switch {
	case err == nil:
		return lease, exitOK
	case errors.Is(err, fencelock.ErrInvalid):
		return nil, c.fail(tk.cmd, exitUsage, err)
	case ctx.Err() != nil:
		return nil, c.fail(tk.cmd, exitNotAcquired, fmt.Errorf("interrupted while acquiring %s %q", tk.kind, tk.name))
	}
	if rerr := a.redisFailure(); rerr != nil {
		if w.limit > 0 {
			rerr = fmt.Errorf("waited %s for %s %q, but Redis failed: %w", w.limitBy, tk.kind, tk.name, rerr)
		}
		return nil, c.fail(tk.cmd, exitInternal, rerr)
	}
	if !errors.Is(err, fencelock.ErrNotAcquired) {
		return nil, c.fail(tk.cmd, exitInternal, err)
	}
	after := ""
	if w.limit > 0 {
		after = " after " + w.limitBy
	}
	return nil, c.fail(tk.cmd, w.conflict, errors.New(tk.held(ctx, after)))
}

var errWaitedEnough = errors.New("waited as long as --wait allows")

// heldMessage says who holds the lock name now, for "not acquired": the
// holder's public lease ID (never its secret) and the lock's remaining
// TTL, as far as Redis tells.
func heldMessage(ctx context.Context, cn *conn, locks *fencelock.Client, name, after string) string {
	rctx, cancel := cn.request(ctx)
	defer cancel()
	h, err := locks.Holder(rctx, name)
	switch {
	case errors.Is(err, fencelock.ErrNotHeld):
		return fmt.Sprintf("lock %q was held by another lease%s (it is free now)", name, after)
	case err != nil:
		return fmt.Sprintf("lock %q is held by another lease%s", name, after)
	case h.Delay > 0:
		return fmt.Sprintf("lock %q is kept by the lock-delay of lease %s, which expired without a release%s (%v left of the delay)", name, h.LeaseID, after, h.Delay)
	case h.TTL < 0:
		return fmt.Sprintf("lock %q is held by lease %s%s, with no TTL (its key was not set by fencelock)", name, h.LeaseID, after)
	}
	return fmt.Sprintf("lock %q is held by lease %s%s (%v left of its TTL unless renewed)", name, h.LeaseID, after, h.TTL)
}

// permitsHeldMessage says that other leases hold every permit of sem,
// for "not acquired", and when the first of them ends unless renewed, as
// far as Redis tells.
func permitsHeldMessage(ctx context.Context, cn *conn, sem *fencelock.Semaphore, after string) string {
	every := fmt.Sprintf("every permit of semaphore %q (%d)", sem.Name(), sem.Permits())
	rctx, cancel := cn.request(ctx)
	defer cancel()
	hs, err := sem.Holders(rctx)
	switch {
	case err != nil:
		return every + " is held by other leases" + after
	case len(hs) < sem.Permits():
		return fmt.Sprintf("%s was held by other leases%s (%d free now)", every, after, sem.Permits()-len(hs))
	}
	first, delayed := time.Duration(-1), 0
	for _, h := range hs {
		left := h.TTL
		if h.Delay > 0 {
			left = h.Delay
			delayed++
		}
		if left >= 0 && (first < 0 || left < first) {
			first = left
		}
	}
	if delayed > 0 {
		every += fmt.Sprintf(" (%d of them kept by the lock-delay of a lease that expired without a release)", delayed)
	}
	if first < 0 {
		return every + " is held by other leases" + after + ", with no TTL (their keys were not set by fencelock)"
	}
	return fmt.Sprintf("%s is held by other leases%s (the first ends in %v unless renewed)", every, after, first)
}
