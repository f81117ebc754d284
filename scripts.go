package fencelock

import (
	"context"
	_ "embed"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Each script lives in its own file, headed by its KEYS/ARGV/returns
// contract, and returns an integer.
var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string

	acquireRun, renewRun, releaseRun = newRunner(acquireLua), newRunner(renewLua), newRunner(releaseLua)
)

// A runner runs one script; every script of the library runs through
// one. It sends EVALSHA and falls back to EVAL on NOSCRIPT, which
// recovers from SCRIPT FLUSH, restarts and failovers, as
// redis.Script.Run does; unlike it, it reads an integer reply without
// boxing it, and takes arguments the caller prepared (see lockRef), so a
// command costs go-redis's own allocations and little more.
type runner struct {
	sha, src any // boxed once
}

func newRunner(src string) runner { return runner{sha: redis.NewScript(src).Hash(), src: src} }

// args returns the start of a command's arguments, for numKeys keys (a
// decimal string: a Cluster client reads it as one), with room for n
// keys and arguments, which the caller appends.
func (s runner) args(numKeys string, n int) []any {
	return append(make([]any, 0, 3+n), "evalsha", s.sha, numKeys)
}

// run runs the script with args from s.args, which it reuses for EVAL.
func (s runner) run(ctx context.Context, c processor, args []any) (int64, error) {
	cmd := redis.NewIntCmd(ctx, args...)
	err := c.Process(ctx, cmd)
	if noScript(err) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewIntCmd(ctx, args...)
		err = c.Process(ctx, cmd)
	}
	if err != nil {
		// Not read: the reply of a batch its caller left may still come.
		return 0, err
	}
	return cmd.Val(), nil
}

// eval runs the script with args from s.args, as run does, for a reply
// that is not an integer.
func (s runner) eval(ctx context.Context, c processor, args []any) (any, error) {
	cmd := redis.NewCmd(ctx, args...)
	err := c.Process(ctx, cmd)
	if noScript(err) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		err = c.Process(ctx, cmd)
	}
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// noScript reports whether err says that the server does not have the
// script: go-redis may have normalised the reply to ErrNoScript.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// processor sends one command: a client, or a pipeline that queues it.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}
