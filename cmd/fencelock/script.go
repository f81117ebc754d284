package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
	"golang.org/x/term"
)

// leaseInfo is what acquire prints, and what renew and release read back.
type leaseInfo struct {
	Name   string `json:"name"`
	Token  int64  `json:"token"`
	Lease  string `json:"lease"`
	Fence  string `json:"fence"`
	Secret string `json:"secret,omitempty"`
	// SecretFile is where the secret is instead, with --secret-file.
	SecretFile string `json:"secret_file,omitempty"`
	TTLms      int64  `json:"ttl_ms"`
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

Under "set -x" the shell traces what eval runs, FENCELOCK_SECRET
included. --secret-file FILE keeps the secret out of the trace (and out
of the environment): acquire writes it to FILE, created with mode 0600,
and prints FENCELOCK_SECRET_FILE=FILE instead, from which renew and
release read it. Remove FILE when done (release leaves it, so that a
second release still finds the lease).

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
       after --wait; -E changes this status), or fencelock was interrupted
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
		cn         conn
		wf         waitFlags
		export     bool
		secretFile string
	)
	cmd := c.command("acquire", "[flags] NAME", acquireAbout, acquireExits)
	cn.addConn(cmd)
	cn.addTTL(cmd, "FENCELOCK_TTL")
	wf.add(cmd)
	cmd.fs.BoolVar(asJSON, "json", false, "print JSON instead of shell assignments")
	cmd.fs.BoolVar(&export, "export", false, "prefix each assignment with export, so that later commands see them")
	cmd.fs.StringVar(&secretFile, "secret-file", "", "write the secret to `FILE` (mode 0600) and print FENCELOCK_SECRET_FILE instead of\n      FENCELOCK_SECRET: the secret stays out of set -x traces and the environment")
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
	var sf *secretWriter
	if err == nil && secretFile != "" {
		// Before the lock is taken: a file that cannot be written must not
		// cost a lease that nobody could renew or release.
		sf, err = newSecretWriter(secretFile)
	}
	if err != nil {
		return cmd.exit(err)
	}
	if sf != nil {
		defer sf.abandon()
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
	if sf != nil {
		if err := sf.write(info.Secret); err != nil {
			// Nobody could renew or release the lease: give it back.
			rctx, cancel := cn.request(ctx)
			defer cancel()
			return c.fail("acquire", exitInternal, errors.Join(err, lease.Release(rctx)))
		}
		info.Secret, info.SecretFile = "", sf.path
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
	)
	if info.SecretFile != "" {
		fmt.Fprint(c.stdout, shellAssign(export, "FENCELOCK_SECRET_FILE", info.SecretFile))
	} else {
		fmt.Fprint(c.stdout, shellAssign(export, "FENCELOCK_SECRET", info.Secret))
	}
	fmt.Fprint(c.stdout, shellAssign(export, "FENCELOCK_LEASE_TTL", cn.ttl.String()))
	return exitOK
}

// secretWriter writes acquire's --secret-file: to a temporary file of
// mode 0600 in the same directory, renamed to the file once written, so
// that the secret is never readable by others, nor the file half written.
type secretWriter struct {
	path string // absolute, as renew and release may run elsewhere
	tmp  *os.File
}

func newSecretWriter(file string) (*secretWriter, error) {
	path, err := filepath.Abs(file)
	if err != nil {
		return nil, usageErrorf("--secret-file %s: %v", file, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fencelock-secret-*")
	if err != nil {
		return nil, usageErrorf("--secret-file %s: cannot create a file there: %v", file, err)
	}
	return &secretWriter{path: path, tmp: tmp}, nil
}

func (w *secretWriter) write(secret string) error {
	_, err := w.tmp.WriteString(secret + "\n")
	err = errors.Join(err, w.tmp.Sync(), w.tmp.Close())
	if err == nil {
		err = os.Rename(w.tmp.Name(), w.path)
	}
	if err != nil {
		return fmt.Errorf("--secret-file %s: %w", w.path, err)
	}
	w.tmp = nil
	return nil
}

// abandon removes the temporary file unless write renamed it.
func (w *secretWriter) abandon() {
	if w.tmp != nil {
		w.tmp.Close()
		os.Remove(w.tmp.Name())
	}
}

// readSecretFile reads a secret written by acquire --secret-file.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<12))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return "", errors.New("want the secret alone, as acquire --secret-file writes it")
	}
	return s, nil
}

const leaseInputHelp = `The lease comes from the environment that "eval $(fencelock acquire ...)"
sets (FENCELOCK_SECRET, or the file FENCELOCK_SECRET_FILE names, with
FENCELOCK_TOKEN and FENCELOCK_NAME), or, when neither is set, from
standard input: acquire's output (shell or JSON), or the secret alone on
one line. NAME defaults to FENCELOCK_NAME. The secret is never taken
from the command line.`

const renewExits = `  0    success
  2    usage error: bad flags, arguments, environment or lease input
  124  the lease no longer holds the lock (it expired, was released, or
       another lease holds it now)
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

const releaseExits = `  0    released; or nobody holds the lock (released already, or the
       lease expired), which release says on stderr
  2    usage error: bad flags, arguments, environment or lease input
  124  the lease was lost: another lease holds the lock now
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

func (c *cli) renew(ctx context.Context, args []string) int {
	return c.attached(ctx, "renew", args, `Renew a lease printed by "fencelock acquire": extend its TTL if it still
holds the lock. A lock that is gone or held by another lease is never
re-created: renew then exits with 124. The TTL is --ttl, else the
lease's own (FENCELOCK_LEASE_TTL, or acquire's output on standard
input), else FENCELOCK_TTL.

`+leaseInputHelp, renewExits, true, func(ctx context.Context, l *fencelock.Lease) error { return l.Renew(ctx) })
}

func (c *cli) release(ctx context.Context, args []string) int {
	return c.attached(ctx, "release", args, `Release a lease printed by "fencelock acquire": delete the lock if the
lease still holds it. A lock that nobody holds is left alone, and
release says so and exits 0: it was released already (or the lease
expired), and this lease blocks nobody. If another lease holds the lock
now, the lease was lost: the lock is left alone and release exits 124.

`+leaseInputHelp, releaseExits, false, func(ctx context.Context, l *fencelock.Lease) error { return l.Release(ctx) })
}

// attached runs renew or release on a lease rebuilt from its secret;
// withTTL registers --ttl.
func (c *cli) attached(ctx context.Context, name string, args []string, about, exits string, withTTL bool, do func(context.Context, *fencelock.Lease) error) int {
	var cn conn
	cmd := c.command(name, "[flags] [NAME]", about, exits)
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
		if !errors.Is(err, fencelock.ErrLeaseLost) {
			return c.fail(name, exitInternal, err)
		}
		if name != "release" {
			return c.fail(name, exitLeaseLost, err)
		}
		return c.releaseLost(ctx, &cn, rdb, info.Name, err)
	}
	return exitOK
}

// releaseLost says why release found the lease lost. A lock that nobody
// holds was most likely released already (a second release, a trap on
// EXIT after an explicit one), or it expired: Redis cannot tell which.
// Either way this lease holds nothing and blocks nobody, which is what
// release is for, so it exits 0, as the library's Release is idempotent;
// renew, whose failure matters, still exits 124. A lock held by another
// lease is a lost lease: 124, naming the holder.
func (c *cli) releaseLost(ctx context.Context, cn *conn, rdb redis.UniversalClient, name string, lost error) int {
	rctx, cancel := cn.request(ctx)
	defer cancel()
	h, err := cn.locks(rdb, false).Holder(rctx, name)
	switch {
	case errors.Is(err, fencelock.ErrNotHeld):
		fmt.Fprintf(c.stderr, "fencelock release: lock %q is not held: already released (or the lease expired); nothing to do\n", name)
		return exitOK
	case err == nil:
		return c.fail("release", exitLeaseLost, fmt.Errorf("%w; lock %q is held by lease %s now", lost, name, h.LeaseID))
	}
	return c.fail("release", exitLeaseLost, lost)
}

// leaseInput finds the lease for renew and release: NAME from pos or
// the environment, the rest from the environment or standard input.
func (c *cli) leaseInput(pos []string) (leaseInfo, error) {
	var info leaseInfo
	info.Name = c.getenv("FENCELOCK_NAME")
	token := c.getenv("FENCELOCK_TOKEN")
	info.Secret, info.SecretFile = c.getenv("FENCELOCK_SECRET"), c.getenv("FENCELOCK_SECRET_FILE")
	if info.Secret == "" && info.SecretFile == "" {
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
		info.Secret, info.SecretFile, info.TTLms = got.Secret, got.SecretFile, got.TTLms
		if got.Name != "" {
			info.Name = got.Name
		}
		if got.Token != 0 {
			token = strconv.FormatInt(got.Token, 10)
		}
	}
	if info.Secret == "" && info.SecretFile != "" {
		secret, err := readSecretFile(info.SecretFile)
		if err != nil {
			return info, usageErrorf("FENCELOCK_SECRET_FILE %s: %v", info.SecretFile, err)
		}
		info.Secret = secret
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
		info.Name, info.Secret, info.SecretFile = vars["FENCELOCK_NAME"], vars["FENCELOCK_SECRET"], vars["FENCELOCK_SECRET_FILE"]
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
	if info.Secret == "" && info.SecretFile == "" {
		return info, errors.New("no FENCELOCK_SECRET")
	}
	return info, nil
}

// isTerminal reports whether f is a terminal: not merely a character
// device, which /dev/null is too.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

const statusAbout = `Show who holds the lock NAME: the holder's public lease ID, the lock's
remaining TTL, and the holder's token (the last issued for NAME). It
never shows the holder's secret.

With --permits N, show the semaphore NAME's permits instead: each slot, 0
to N-1, held or free, with its fence name, and for a held one its
holder's lease ID, remaining TTL and token, as for a lock. Slots at or
above N (held by runs given a larger N) are not read.`

const statusExits = `  0    success, whether or not the lock (or a permit) is held
  2    usage error: bad flags, arguments or environment
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

// lockStatus is what status prints of a lock.
type lockStatus struct {
	Name string `json:"name"`
	heldStatus
}

// semaphoreStatus is what status --permits prints: every slot below
// Permits, slot 0 first.
type semaphoreStatus struct {
	Name    string         `json:"name"`
	Permits int            `json:"permits"`
	Free    int            `json:"free"`
	Slots   []permitStatus `json:"slots"`
}

// permitStatus is one slot of a semaphore; Fence is its fence name.
type permitStatus struct {
	Slot  int    `json:"slot"`
	Fence string `json:"fence"`
	heldStatus
}

// heldStatus is who holds a lock or a slot, if anyone does.
type heldStatus struct {
	Held  bool   `json:"held"`
	Lease string `json:"lease,omitempty"`
	TTLms int64  `json:"ttl_ms,omitempty"` // -1: the key has no expiry
	Token int64  `json:"token,omitempty"`  // the holder's; 0 if its counter is gone
}

func newHeldStatus(h fencelock.Holder) heldStatus {
	st := heldStatus{Held: true, Lease: h.LeaseID, Token: h.Token, TTLms: h.TTL.Milliseconds()}
	if h.TTL < 0 {
		st.TTLms = -1
	}
	return st
}

// text returns the status's fields as status prints them: "-" for what
// a free lock or slot lacks.
func (st heldStatus) text(noTTL string) (held, lease, ttl, token string) {
	if !st.Held {
		return "no", "-", "-", "-"
	}
	ttl = (time.Duration(st.TTLms) * time.Millisecond).String()
	if st.TTLms < 0 {
		ttl = noTTL
	}
	token = "unknown (its counter is gone)"
	if st.Token > 0 {
		token = strconv.FormatInt(st.Token, 10)
	}
	return "yes", st.Lease, ttl, token
}

func (c *cli) status(ctx context.Context, args []string) int {
	var (
		cn      conn
		asJSON  bool
		permits int
	)
	cmd := c.command("status", "[flags] NAME", statusAbout, statusExits)
	cn.addConn(cmd)
	cmd.fs.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.addPermits(&permits, "show the `n` permits of the semaphore NAME instead of the lock NAME")
	name, rdb, code := c.dialName(ctx, cmd, &cn, args)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	rctx, cancel := cn.request(ctx)
	defer cancel()
	if permits > 0 {
		return c.semaphoreStatus(rctx, cn.locks(rdb, false).Semaphore(name, permits), asJSON)
	}
	st := lockStatus{Name: name}
	h, err := cn.locks(rdb, false).Holder(rctx, name)
	switch {
	case err == nil:
		st.heldStatus = newHeldStatus(h)
	case !errors.Is(err, fencelock.ErrNotHeld):
		return c.fail("status", exitInternal, err)
	}
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	held, lease, ttl, token := st.text("none (the lock never expires: it was not set by fencelock)")
	fmt.Fprintf(c.stdout, "lock   %s\nheld   %s\nlease  %s\nttl    %s\ntoken  %s\n", st.Name, held, lease, ttl, token)
	return exitOK
}

// semaphoreStatus prints the slots of sem, one line each.
func (c *cli) semaphoreStatus(ctx context.Context, sem *fencelock.Semaphore, asJSON bool) int {
	hs, err := sem.Holders(ctx)
	if err != nil {
		return c.fail("status", exitInternal, err)
	}
	st := semaphoreStatus{Name: sem.Name(), Permits: sem.Permits(), Free: sem.Permits() - len(hs), Slots: make([]permitStatus, sem.Permits())}
	for i := range st.Slots {
		st.Slots[i] = permitStatus{Slot: i, Fence: fencelock.SlotName(sem.Name(), i)}
	}
	for _, h := range hs {
		st.Slots[h.Slot].heldStatus = newHeldStatus(h.Holder)
	}
	if asJSON {
		b, _ := json.Marshal(st)
		fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "semaphore  %s\npermits    %d, %d free\n", st.Name, st.Permits, st.Free)
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "slot\theld\tlease\tttl\ttoken\tfence")
	for _, p := range st.Slots {
		held, lease, ttl, token := p.text("none")
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", p.Slot, held, lease, ttl, token, p.Fence)
	}
	tw.Flush()
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
