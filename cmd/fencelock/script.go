package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock"
	"golang.org/x/term"
)

// leaseInfo is what acquire prints, and what renew and release read back.
type leaseInfo struct {
	Name   string `json:"name"`
	Token  int64  `json:"token"`
	Lease  string `json:"lease"`
	Fence  string `json:"fence"`
	Secret string `json:"secret"`
	TTLms  int64  `json:"ttl_ms"`
}

const acquireAbout = `Acquire the lock NAME and print the lease as shell assignments for eval,
or as JSON with --json. Like flock(1), acquire waits until the lock is
free; --no-wait makes one attempt, --wait bounds the wait.

  FENCELOCK_NAME       the lock name
  FENCELOCK_TOKEN      the fencing token: send it with every write
  FENCELOCK_LEASE      the public lease ID
  FENCELOCK_FENCE      the fence text form, for a Fencing-Token header
  FENCELOCK_SECRET     the owner secret: whoever has it can renew and
                       release the lock. Keep it out of logs and command lines.
  FENCELOCK_LEASE_TTL  the lease's TTL, so that a later renew uses the same

If the lock is not acquired, or anything else fails, acquire prints the
shell statement "(exit N)" instead, N being its exit status, so that
eval fails too and "|| exit" stops the script:

  eval "$(fencelock acquire --export --ttl 60s nightly)" || exit
  ... fencelock renew ...
  fencelock release

Nothing renews the lease after acquire exits: call "fencelock renew" well
within the TTL (every TTL/3, say), and "fencelock release" when done.`

const acquireExits = `  0    acquired: the lease is printed
  2    usage error: bad flags, arguments or environment
  75   not acquired: another lease holds the lock (with --no-wait, or
       after --wait), or fencelock was interrupted
  125  fencelock itself failed (Redis unreachable, unexpected reply)
`

func (c *cli) acquire(ctx context.Context, args []string) int {
	asJSON := false
	code := c.acquireLeaseInfo(ctx, args, &asJSON)
	if code != exitOK && !asJSON {
		// eval "$(fencelock acquire ...)" must fail when acquire does:
		// eval of nothing would succeed, and the script run unlocked.
		if f, ok := c.stdout.(*os.File); !ok || !isTerminal(f) {
			fmt.Fprintf(c.stdout, "(exit %d)\n", code)
		}
	}
	return code
}

func (c *cli) acquireLeaseInfo(ctx context.Context, args []string, asJSON *bool) int {
	var (
		cn     conn
		wf     waitFlags
		export bool
	)
	cmd := c.command("acquire", "[flags] NAME", acquireAbout, acquireExits)
	cn.addConn(cmd)
	cn.addTTL(cmd, "FENCELOCK_TTL")
	wf.add(cmd)
	cmd.fs.BoolVar(asJSON, "json", false, "print JSON instead of shell assignments")
	cmd.fs.BoolVar(&export, "export", false, "prefix each assignment with export, so that later commands see them")
	pos, _, dashes, err := cmd.parse(args)
	if err == nil {
		err = oneName(pos, dashes)
	}
	var policy waitPolicy
	if err == nil {
		policy, err = wf.policy(cmd)
	}
	var target *redisTarget
	if err == nil {
		target, err = cn.check(cmd)
	}
	if err != nil {
		return cmd.exit(err)
	}
	a := &attempts{name: pos[0], cmd: "acquire", stderr: c.stderr}
	cn.hooks = a.hooks()
	rdb, err := cn.connect(ctx, target)
	if err != nil {
		return c.fail("acquire", connectExit(ctx, exitNotAcquired), err)
	}
	defer rdb.Close()
	lease, code := c.acquireLease(ctx, lockTaking("acquire", &cn, cn.locks(rdb, false), pos[0]), a, policy)
	if lease == nil {
		return code
	}
	info := leaseInfo{
		Name:   lease.Name(),
		Token:  lease.Token(),
		Lease:  lease.ID(),
		Fence:  lease.Fence().String(),
		Secret: lease.Secret(),
		TTLms:  cn.ttl.Milliseconds(),
	}
	if *asJSON {
		b, _ := json.Marshal(info)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	// The TTL goes out as FENCELOCK_LEASE_TTL, which renew reads, and not
	// as FENCELOCK_TTL, the default --ttl of every later command: an
	// exported FENCELOCK_TTL would give an unrelated "fencelock run" this
	// lease's TTL.
	fmt.Fprint(c.stdout,
		shellAssign(export, "FENCELOCK_NAME", info.Name),
		shellAssign(export, "FENCELOCK_TOKEN", strconv.FormatInt(info.Token, 10)),
		shellAssign(export, "FENCELOCK_LEASE", info.Lease),
		shellAssign(export, "FENCELOCK_FENCE", info.Fence),
		shellAssign(export, "FENCELOCK_SECRET", info.Secret),
		shellAssign(export, "FENCELOCK_LEASE_TTL", cn.ttl.String()),
	)
	return exitOK
}

const leaseInputHelp = `The lease comes from the environment that "eval $(fencelock acquire ...)"
sets (FENCELOCK_SECRET, FENCELOCK_TOKEN, FENCELOCK_NAME), or, when
FENCELOCK_SECRET is not set, from standard input: acquire's output (shell
or JSON), or the secret alone on one line. NAME defaults to
FENCELOCK_NAME. The secret is never taken from the command line.`

const attachedExits = `  0    success
  2    usage error: bad flags, arguments, environment or lease input
  124  the lease no longer holds the lock (it expired, was released, or
       another lease holds it now)
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

func (c *cli) renew(ctx context.Context, args []string) int {
	return c.attached(ctx, "renew", args, `Renew a lease printed by "fencelock acquire": extend its TTL if it still
holds the lock. A lock that is gone or held by another lease is never
re-created: renew then exits with 124. The TTL is --ttl, else the
lease's own (FENCELOCK_LEASE_TTL, or acquire's output on standard
input), else FENCELOCK_TTL.

`+leaseInputHelp, true, func(ctx context.Context, l *fencelock.Lease) error { return l.Renew(ctx) })
}

func (c *cli) release(ctx context.Context, args []string) int {
	return c.attached(ctx, "release", args, `Release a lease printed by "fencelock acquire": delete the lock if the
lease still holds it. If the lease was lost, the lock is left alone and
release exits with 124.

`+leaseInputHelp, false, func(ctx context.Context, l *fencelock.Lease) error { return l.Release(ctx) })
}

// attached runs renew or release on a lease rebuilt from its secret;
// withTTL registers --ttl.
func (c *cli) attached(ctx context.Context, name string, args []string, about string, withTTL bool, do func(context.Context, *fencelock.Lease) error) int {
	var cn conn
	cmd := c.command(name, "[flags] [NAME]", about, attachedExits)
	cn.addConn(cmd)
	if withTTL {
		cn.addTTL(cmd, "FENCELOCK_LEASE_TTL", "FENCELOCK_TTL")
	}
	pos, _, dashes, err := cmd.parse(args)
	if err == nil && (len(pos) > 1 || dashes) {
		err = usageErrorf("want at most one NAME")
	}
	var info leaseInfo
	if err == nil {
		info, err = c.leaseInput(pos)
	}
	if err == nil && withTTL && info.TTLms != 0 {
		if from := cmd.from["ttl"]; from == "" || from == "FENCELOCK_TTL" {
			// The lease's own TTL, from acquire's output on standard input.
			cn.ttl = time.Duration(info.TTLms) * time.Millisecond
			cmd.from["ttl"] = "the lease's TTL on standard input"
		}
	}
	if err != nil {
		return cmd.exit(err)
	}
	rdb, code := c.dial(ctx, cmd, &cn)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	lease, err := cn.locks(rdb, false).Attach(info.Name, info.Secret, info.Token)
	if err != nil {
		return cmd.exit(usageError{err})
	}
	rctx, cancel := cn.request(ctx)
	defer cancel()
	if err := do(rctx, lease); err != nil {
		if errors.Is(err, fencelock.ErrLeaseLost) {
			return c.fail(name, exitLeaseLost, err)
		}
		return c.fail(name, exitInternal, err)
	}
	return exitOK
}

// leaseInput finds the lease for renew and release: NAME from pos or
// the environment, the rest from the environment or standard input.
func (c *cli) leaseInput(pos []string) (leaseInfo, error) {
	var info leaseInfo
	info.Name = c.getenv("FENCELOCK_NAME")
	token := c.getenv("FENCELOCK_TOKEN")
	if info.Secret = c.getenv("FENCELOCK_SECRET"); info.Secret == "" {
		if f, ok := c.stdin.(*os.File); ok && isTerminal(f) {
			return info, usageErrorf("no lease: set FENCELOCK_SECRET (eval the output of acquire) or pipe acquire's output to standard input")
		}
		in, err := io.ReadAll(io.LimitReader(c.stdin, 1<<16))
		if err != nil {
			return info, fmt.Errorf("standard input: %w", err)
		}
		got, err := parseLeaseInput(string(in))
		if err != nil {
			return info, usageErrorf("standard input: %v", err)
		}
		info.Secret, info.TTLms = got.Secret, got.TTLms
		if got.Name != "" {
			info.Name = got.Name
		}
		if got.Token != 0 {
			token = strconv.FormatInt(got.Token, 10)
		}
	}
	if len(pos) == 1 {
		if info.Name != "" && info.Name != pos[0] {
			return info, usageErrorf("NAME %q is not the lease's lock %q", pos[0], info.Name)
		}
		info.Name = pos[0]
	}
	switch {
	case info.Name == "":
		return info, usageErrorf("missing NAME (or FENCELOCK_NAME)")
	case info.Secret == "":
		return info, usageErrorf("no lease secret in FENCELOCK_SECRET or standard input")
	case token == "":
		return info, usageErrorf("missing FENCELOCK_TOKEN")
	}
	if err := validName(info.Name); err != nil {
		return info, err
	}
	n, err := strconv.ParseInt(token, 10, 64)
	if err != nil || n <= 0 {
		return info, usageErrorf("FENCELOCK_TOKEN %q is not a positive integer", token)
	}
	info.Token = n
	return info, nil
}

// parseLeaseInput reads acquire's output, shell or JSON, or a bare secret.
func parseLeaseInput(s string) (leaseInfo, error) {
	var info leaseInfo
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return info, errors.New("empty")
	case strings.HasPrefix(t, "{"):
		if err := json.Unmarshal([]byte(t), &info); err != nil {
			return info, fmt.Errorf("JSON: %v", err)
		}
		if info.Token < 0 {
			return info, fmt.Errorf("token %d is not positive", info.Token)
		}
	case strings.Contains(t, "="):
		vars, err := parseShellAssignments(s)
		if err != nil {
			return info, err
		}
		info.Name, info.Secret = vars["FENCELOCK_NAME"], vars["FENCELOCK_SECRET"]
		if tok := vars["FENCELOCK_TOKEN"]; tok != "" {
			n, err := strconv.ParseInt(tok, 10, 64)
			if err != nil || n <= 0 {
				return info, fmt.Errorf("FENCELOCK_TOKEN %q is not a positive integer", tok)
			}
			info.Token = n
		}
		if ttl := vars["FENCELOCK_LEASE_TTL"]; ttl != "" {
			d, err := time.ParseDuration(ttl)
			if err != nil {
				return info, fmt.Errorf("FENCELOCK_LEASE_TTL %q is not a duration", ttl)
			}
			info.TTLms = d.Milliseconds()
		}
	case strings.ContainsAny(t, "\n\t "):
		return info, errors.New("want acquire's output or the secret alone")
	default:
		info.Secret = t
	}
	if info.Secret == "" {
		return info, errors.New("no FENCELOCK_SECRET")
	}
	return info, nil
}

// isTerminal reports whether f is a terminal: a character device is not
// one (/dev/null is a character device too).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

const statusAbout = `Show who holds the lock NAME: the holder's public lease ID, the lock's
remaining TTL, and the holder's token (the last issued for NAME). It
never shows the holder's secret.`

const statusExits = `  0    success, whether or not the lock is held
  2    usage error: bad flags, arguments or environment
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

// lockStatus is what status prints.
type lockStatus struct {
	Name  string `json:"name"`
	Held  bool   `json:"held"`
	Lease string `json:"lease,omitempty"`
	TTLms int64  `json:"ttl_ms,omitempty"` // -1: the lock has no expiry
	Token int64  `json:"token,omitempty"`  // the holder's; 0 if its counter is gone
}

func (c *cli) status(ctx context.Context, args []string) int {
	var (
		cn     conn
		asJSON bool
	)
	cmd := c.command("status", "[flags] NAME", statusAbout, statusExits)
	cn.addConn(cmd)
	cmd.fs.BoolVar(&asJSON, "json", false, "print JSON")
	name, rdb, code := c.dialName(ctx, cmd, &cn, args)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	rctx, cancel := cn.request(ctx)
	defer cancel()
	st := lockStatus{Name: name}
	h, err := cn.locks(rdb, false).Holder(rctx, name)
	switch {
	case err == nil:
		st.Held, st.Lease, st.Token = true, h.LeaseID, h.Token
		st.TTLms = h.TTL.Milliseconds()
		if h.TTL < 0 {
			st.TTLms = -1
		}
	case !errors.Is(err, fencelock.ErrNotHeld):
		return c.fail("status", exitInternal, err)
	}
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	held, lease, ttl, token := "no", "-", "-", "-"
	if st.Held {
		held, lease = "yes", st.Lease
		ttl = (time.Duration(st.TTLms) * time.Millisecond).String()
		if st.TTLms < 0 {
			ttl = "none (the lock never expires: it was not set by fencelock)"
		}
		token = "unknown (its counter is gone)"
		if st.Token > 0 {
			token = strconv.FormatInt(st.Token, 10)
		}
	}
	fmt.Fprintf(c.stdout, "lock   %s\nheld   %s\nlease  %s\nttl    %s\ntoken  %s\n", st.Name, held, lease, ttl, token)
	return exitOK
}

// oneName checks that the positional arguments are exactly one NAME, a
// valid lock name.
func oneName(pos []string, dashes bool) error {
	switch {
	case len(pos) == 0:
		return usageErrorf("missing lock NAME")
	case len(pos) > 1 || dashes:
		return usageErrorf("want exactly one NAME")
	}
	return validName(pos[0])
}

// validName checks the library's rule for lock names before anything is
// sent, and words it plainly.
func validName(name string) error {
	if fencelock.CheckName(name) == nil {
		return nil
	}
	if name == "" || len(name) > fencelock.MaxNameLen {
		return usageErrorf("lock name has %d characters: use 1 to %d letters, digits, spaces or punctuation (printable ASCII), but no { or }", len(name), fencelock.MaxNameLen)
	}
	return usageErrorf("lock name %q: use only letters, digits, spaces and punctuation (printable ASCII), but no { or } (which would break its Redis Cluster hash tag)", name)
}
