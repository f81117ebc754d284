package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
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
second release still finds the lease). FILE is a new name or a regular
file, which is replaced; anything else is a usage error, before the lock
is taken.

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
