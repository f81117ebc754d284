package main

import (
	"context"
	"errors"
	"time"

	"github.com/fencelock/fencelock"
)

const renewExits = `  0    success
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

`+leaseInputHelp, renewExits, true, func(ctx context.Context, l *fencelock.Lease) error { return l.Renew(ctx) })
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
