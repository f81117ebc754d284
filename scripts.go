package fencelock

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

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

// runTake runs an acquisition script with args from s.args, as run does:
// its reply is an integer, or with slot not nil, {slot, integer}
// (lua/semaphore.lua), whose slot it stores there (see takeCmd).
func (s runner) runTake(ctx context.Context, c processor, args []any, slot *int) (int64, error) {
	if slot == nil {
		return s.run(ctx, c, args)
	}
	cmd := takeCmd(ctx, args, slot)
	err := c.Process(ctx, cmd)
	if noScript(err) {
		args[0], args[1] = "eval", s.src
		cmd = takeCmd(ctx, args, slot)
		err = c.Process(ctx, cmd)
	}
	if isLeft(err) {
		return 0, err // not read, as in run
	}
	return takeReply(cmd, slot)
}

// takeCmd returns the command of an acquisition script: an integer reply,
// read without boxing, or with slot, a {slot, integer} reply.
func takeCmd(ctx context.Context, args []any, slot *int) redis.Cmder {
	if slot == nil {
		return redis.NewIntCmd(ctx, args...)
	}
	return redis.NewCmd(ctx, args...)
}

// takeReply reads cmd, from takeCmd, and stores a slot reply's slot.
func takeReply(cmd redis.Cmder, slot *int) (int64, error) {
	if slot == nil {
		return cmd.(*redis.IntCmd).Result()
	}
	v, err := cmd.(*redis.Cmd).Result()
	if err != nil {
		return 0, err
	}
	r, ok := v.([]any)
	if !ok || len(r) != 2 {
		return 0, fmt.Errorf("%w: %T", errSlotReply, v)
	}
	i, ok1 := r[0].(int64)
	reply, ok2 := r[1].(int64)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("%w: (%T, %T)", errSlotReply, r[0], r[1])
	}
	*slot = int(i)
	return reply, nil
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
