package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock"
	"github.com/redis/go-redis/v9"
)

const releaseExits = `  0    released; or nobody holds the lock (released already, or the
       lease expired), which release says on stderr
  2    usage error: bad flags, arguments, environment or lease input
  124  the lease was lost: another lease holds the lock now
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

func (c *cli) release(ctx context.Context, args []string) int {
	return c.attached(ctx, "release", args, `Release a lease printed by "fencelock acquire": delete the lock if the
lease still holds it. A lock that nobody holds is left alone, and
release says so and exits 0: it was released already (or the lease
expired), and this lease blocks nobody. If another lease holds the lock
now, the lease was lost: the lock is left alone and release exits 124.

`+leaseInputHelp, releaseExits, false, func(ctx context.Context, l *fencelock.Lease) error { return l.Release(ctx) })
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
