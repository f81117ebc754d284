package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/redisfence"
	"github.com/redis/go-redis/v9"
)

const demoAbout = `Play the paused-holder story twice, without and with fencing.

Holder A acquires a lock with a short TTL and no renewal, then pauses
(think of a long GC pause, a VM migration, a SIGSTOP) until holder B has
acquired the lock after A's lease expired and written the shared report.
Then A wakes up, still believing it holds the lock, and writes too.
Without fencing the report is a plain Redis key and A's stale write
overwrites B's. With fencing the report is a fenced store
(fence/redisfence) and A's write is rejected: its token is older.

Without --redis, demo starts its own redis-server from PATH on a free
127.0.0.1 port and stops it at the end (REDIS_URL is ignored here, so the
demo never writes to a server you did not name). With --redis, it uses
keys under fencelock:demo:RANDOM: and deletes them afterwards.`

const demoExits = `  0    the demo ran: the stale write was accepted unfenced, rejected fenced
  2    usage error: bad flags or arguments
  125  the demo could not run (no redis-server, Redis unreachable) or did
       not end as it should
`

func (c *cli) demo(ctx context.Context, args []string) int {
	var (
		rawURL string
		ttl    time.Duration
	)
	cmd := c.command("demo", "[flags]", demoAbout, demoExits)
	cmd.fs.StringVar(&rawURL, "redis", "", "use the Redis node at `URL` (redis://, rediss:// or unix://) instead of starting redis-server")
	cmd.duration(&ttl, "ttl", 400*time.Millisecond, "holder A's lease TTL, which its pause outlasts (a `duration`)")
	pos, _, dashes, err := cmd.parse(args)
	if err == nil && (len(pos) > 0 || dashes) {
		err = usageErrorf("demo takes no arguments")
	}
	if err == nil {
		err = cmd.durationIn("ttl", ttl, 50*time.Millisecond, 5*time.Second)
	}
	var opts *redis.Options
	if err == nil && rawURL != "" {
		var t *redisTarget
		if t, err = redisOptions(rawURL, c.getenv); err == nil {
			opts = t.node
			if opts == nil {
				err = usageErrorf("--redis %s: demo runs on a single Redis node; give a redis:// URL", redactedURL(rawURL))
			}
		}
	}
	if err != nil {
		return cmd.exit(err)
	}

	if opts == nil {
		srv, err := startRedis(ctx)
		if err != nil {
			return c.fail("demo", exitInternal, err)
		}
		defer srv.close()
		fmt.Fprintf(c.stdout, "Started %s on %s for this demo; it stops when the demo ends.\n", srv.version(), srv.addr())
		opts = &redis.Options{Addr: srv.addr()}
	} else {
		fmt.Fprintf(c.stdout, "Using the Redis at %s.\n", redactedURL(rawURL))
	}
	opts.ContextTimeoutEnabled = true // fencelock.New requires it
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	d := &demo{rdb: rdb, ttl: ttl, id: randomHex(), out: c.stdout}
	defer d.cleanup()

	fmt.Fprintf(c.stdout, "\n1. Without fencing: the report is a plain Redis key, written with SET.\n\n")
	unfenced, err := d.story(ctx, false)
	if err != nil {
		return c.fail("demo", exitInternal, err)
	}
	fmt.Fprintf(c.stdout, "\n2. With fencing: the report is a fenced store (fence/redisfence), written with the holder's fence.\n\n")
	fenced, err := d.story(ctx, true)
	if err != nil {
		return c.fail("demo", exitInternal, err)
	}
	if !unfenced.staleAccepted || fenced.staleAccepted {
		return c.fail("demo", exitInternal, fmt.Errorf("unexpected outcome: stale write accepted without fencing: %v, with fencing: %v", unfenced.staleAccepted, fenced.staleAccepted))
	}
	fmt.Fprint(c.stdout, `
The lock was the same both times, and both times A wrote after its lease had
expired: a lock cannot stop a holder that does not know it lost it. The
fenced resource did, by rejecting the older token.

Next: fencelock doctor --redis URL       audit your Redis for lock safety
      fencelock run NAME -- COMMAND     run a job holding a lock, with
                                        FENCELOCK_FENCE in its environment
`)
	return exitOK
}

type demo struct {
	rdb *redis.Client
	ttl time.Duration
	id  string // keeps this run's keys apart from others'
	out io.Writer
}

type outcome struct {
	staleAccepted bool
}

// timeline prints events with the time since the story began.
type timeline struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (t *timeline) log(who, format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms := time.Since(t.start).Milliseconds()
	fmt.Fprintf(t.w, "  %+6dms  %s  %s\n", ms, who, fmt.Sprintf(format, args...))
}

// story plays the paused-holder story once. The order of events is fixed
// by channels: A holds the lock before B tries; B writes before A wakes.
// A's pause outlasts its TTL because B cannot acquire before the lock
// has expired in Redis.
func (d *demo) story(ctx context.Context, fenced bool) (outcome, error) {
	kind := "unfenced"
	if fenced {
		kind = "fenced"
	}
	// Each story has keys of its own, under a prefix unique to this run.
	name := "report"
	prefix := "fencelock:demo:" + d.id + ":" + kind + ":"
	locks := fencelock.New(d.rdb, &fencelock.Options{TTL: d.ttl, RenewInterval: -1, Prefix: prefix, TokenRetention: time.Minute})

	// The shared resource, and how each holder writes to it.
	var (
		write func(ctx context.Context, f fence.Fence, report string) error
		read  func(ctx context.Context) (string, error)
	)
	if fenced {
		store := redisfence.New(d.rdb, &redisfence.Options{Prefix: prefix + "fence:"})
		resource := "report"
		write = func(ctx context.Context, f fence.Fence, report string) error {
			return store.Put(ctx, resource, f, []byte(report))
		}
		read = func(ctx context.Context) (string, error) {
			v, _, err := store.Load(ctx, resource)
			return string(v), err
		}
	} else {
		key := prefix + "report"
		write = func(ctx context.Context, _ fence.Fence, report string) error {
			return d.rdb.Set(ctx, key, report, 0).Err()
		}
		read = func(ctx context.Context) (string, error) { return d.rdb.Get(ctx, key).Result() }
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	tl := &timeline{w: d.out, start: time.Now()}
	var (
		aHolds  = make(chan struct{}) // A has the lock and is paused
		bWrote  = make(chan struct{}) // B has written; A may wake
		aDone   = make(chan struct{}) // A has written and released
		errs    = make(chan error, 2)
		staleOK bool
	)

	go func() { // holder A
		errs <- func() error {
			defer close(aDone)
			lease, err := locks.TryAcquire(ctx, name)
			if err != nil {
				return fmt.Errorf("holder A: %w", err)
			}
			tl.log("A", "acquires %q: token %d, TTL %v, not renewed", name, lease.Token(), d.ttl)
			tl.log("A", "pauses (a GC pause, a VM migration, SIGSTOP...): it runs again only after B has written")
			paused := time.Now()
			close(aHolds)
			select {
			case <-bWrote:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			tl.log("A", "wakes after %v, unaware that its lease expired %v ago",
				time.Since(paused).Round(time.Millisecond), time.Since(lease.Deadline()).Round(time.Millisecond))
			report := fmt.Sprintf("report by A (token %d)", lease.Token())
			var stale *fence.StaleError
			switch err := write(ctx, lease.Fence(), report); {
			case err == nil:
				staleOK = true
				tl.log("A", "writes %q -> ACCEPTED", report)
			case errors.As(err, &stale):
				tl.log("A", "writes %q -> REJECTED: token %d is older than the report's %d", report, stale.Rejected.Token, stale.Current.Token)
			default:
				return fmt.Errorf("holder A: write: %w", err)
			}
			if err := lease.Release(ctx); errors.Is(err, fencelock.ErrLeaseLost) {
				tl.log("A", "releases -> lease lost; B's lock is left alone")
			} else if err != nil {
				return fmt.Errorf("holder A: release: %w", err)
			}
			return nil
		}()
	}()

	go func() { // holder B
		errs <- func() error {
			select {
			case <-aHolds:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			tl.log("B", "waits for %q", name)
			actx, stop := context.WithTimeout(ctx, d.ttl+10*time.Second)
			lease, err := locks.Acquire(actx, name)
			stop()
			if err != nil {
				return fmt.Errorf("holder B: %w", err)
			}
			tl.log("B", "acquires %q: token %d (A's lease expired in Redis)", name, lease.Token())
			report := fmt.Sprintf("report by B (token %d)", lease.Token())
			if err := write(ctx, lease.Fence(), report); err != nil {
				return fmt.Errorf("holder B: write: %w", err)
			}
			tl.log("B", "writes %q -> accepted", report)
			close(bWrote)
			select {
			case <-aDone:
			case <-ctx.Done():
			}
			return lease.Release(context.WithoutCancel(ctx))
		}()
	}()

	var errList []error
	for range 2 {
		if err := <-errs; err != nil {
			cancel(err) // the other holder stops waiting
			errList = append(errList, err)
		}
	}
	if err := errors.Join(errList...); err != nil {
		return outcome{}, err
	}
	final, err := read(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("read the report: %w", err)
	}
	verdict := "REJECTED: the report keeps B's write"
	if staleOK {
		verdict = "ACCEPTED: A overwrote B's newer report"
	}
	fmt.Fprintf(d.out, "\n  The report now says %q.\n  Verdict: the stale write was %s.\n", final, verdict)
	if strings.Contains(final, "by A") != staleOK {
		return outcome{}, fmt.Errorf("the report says %q, which contradicts the writes", final)
	}
	return outcome{staleAccepted: staleOK}, nil
}

// cleanup deletes the demo's keys, for a server the user named: every
// key that holds the run's prefix (the locks' and the fenced store's
// keys, whatever their layout), found by SCAN within a few seconds.
func (d *demo) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := d.rdb.Scan(ctx, 0, "*fencelock:demo:"+d.id+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if len(keys) > 0 {
		d.rdb.Del(ctx, keys...)
	}
}
