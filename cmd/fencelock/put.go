package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/fence/s3fence"
)

const putAbout = `Write standard input to the fenced object s3://BUCKET/KEY, with the
fence of FENCELOCK_FENCE (or --fence): the fencelock/fence/s3fence store,
whose write is refused if the object has seen a newer fence. Under
"fencelock run NAME -- sh -c '... | fencelock put s3://BUCKET/KEY'" a
shell job writes only while its lease is the newest: a job whose lease
was lost, then paused or delayed, is refused once a newer holder has
read or written the object, and put exits with 124.

KEY names the resource (s3fence's Store with no prefix): a key of
letters, digits and - _ . : , = @ / is the object's key as it is; other
bytes are escaped (s3fence's Key). The object holds the fence on its
first line and the input after it; read it with an s3fence Store's Load,
or skip the first line. Never delete it or let a lifecycle rule expire
it: the fence would be lost with it.

Before relying on a store, run "fencelock doctor --resource s3://BUCKET/"
once: it proves the store enforces the conditional writes this needs.

` + s3Help

const putExits = `  0    written
  2    usage error: bad flags, arguments, URL, or no or a malformed fence
  124  refused: the fence is stale (the object has seen a newer fence, or
       one of another lock): the lease that issued it is lost
  125  the write failed otherwise (store unreachable, access denied, an
       object there that s3fence did not write); it may or may not have
       taken effect
`

func (c *cli) put(ctx context.Context, args []string) int {
	var (
		f      s3Flags
		fenced string
	)
	cmd := c.command("put", "[flags] s3://BUCKET/KEY < FILE", putAbout, putExits)
	cmd.fs.StringVar(&fenced, "fence", "", "the fence `text` (default: FENCELOCK_FENCE, which fencelock run and elect set)")
	cmd.fromEnv("fence", "FENCELOCK_FENCE")
	f.add(cmd, true)
	pos, _, dashes, err := cmd.parse(args)
	switch {
	case err != nil:
	case len(pos) != 1 || dashes:
		err = usageErrorf("want one s3://BUCKET/KEY argument")
	case fenced == "":
		err = usageErrorf("no fence: run under fencelock run, or set FENCELOCK_FENCE or --fence")
	}
	var target s3Target
	var fc fence.Fence
	if err == nil {
		target, err = parseS3URL(pos[0], true)
	}
	if err == nil {
		if fc, err = fence.Parse(fenced); err != nil {
			err = usageErrorf("%s: %v", cmd.source("fence"), err)
		}
	}
	if err == nil {
		err = cmd.durationIn("timeout", f.timeout, time.Millisecond, 24*time.Hour)
	}
	if err != nil {
		return cmd.exit(err)
	}
	value, err := io.ReadAll(c.stdin)
	if err != nil {
		return c.fail("put", exitInternal, fmt.Errorf("reading standard input: %w", err))
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	client, err := c.s3Client(ctx, &f)
	var ue usageError
	if errors.As(err, &ue) {
		return cmd.exit(err)
	}
	if err != nil {
		return c.fail("put", exitInternal, err)
	}
	err = s3fence.New(client, target.bucket, nil).Put(ctx, target.path, fc, value)
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		return c.fail("put", exitStale, err)
	case err != nil:
		return c.fail("put", exitInternal, err)
	}
	return exitOK
}

// exitStale is put's status for a stale fence: the lease that issued it
// is lost, as run's 124 says of a lease it could not keep.
const exitStale = exitLeaseLost
