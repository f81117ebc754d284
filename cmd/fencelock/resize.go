package main

import (
	"context"
	"fmt"
)

const resizeAbout = `Make N the number of permits of the semaphore NAME: run --permits N
and status see it from then on, and run with another number is refused
(exit 2). A semaphore records its number at its first permit; this is how
it changes on purpose. After a shrink, the permits held in slots at or
above the new N stay valid until they end, and are not issued again.`

const resizeExits = `  0    the semaphore has N permits now
  2    usage error: bad flags, arguments or environment
  125  fencelock itself failed (Redis unreachable, unexpected reply), or
       was interrupted
`

func (c *cli) resize(ctx context.Context, args []string) int {
	var (
		cn      conn
		permits int
	)
	cmd := c.command("resize", "[flags] --permits N NAME", resizeAbout, resizeExits)
	cn.addConn(cmd)
	cmd.addPermits(&permits, "the semaphore's new number of permits, `n`")
	name, rdb, code := c.dialName(ctx, cmd, &cn, args)
	if rdb == nil {
		return code
	}
	defer rdb.Close()
	if permits == 0 {
		return cmd.exit(usageErrorf("resize needs --permits N, the semaphore's new number of permits"))
	}
	rctx, cancel := cn.request(ctx)
	defer cancel()
	if err := cn.locks(rdb, false).Semaphore(name, permits).Resize(rctx); err != nil {
		return c.fail("resize", exitInternal, err)
	}
	fmt.Fprintf(c.stdout, "semaphore %q has %d permits\n", name, permits)
	return exitOK
}
