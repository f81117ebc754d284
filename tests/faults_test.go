package tests

import (
	"context"
	"crypto/sha1"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/script"
	"github.com/redis/go-redis/v9"
)

// errLostReply is what a client sees when a command ran on the server but
// its reply never arrived: a read timeout.
var errLostReply = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

// loseReplies is a go-redis hook that lets the commands it matches reach
// the server and run there, then drops their successful replies (an error
// reply such as NOSCRIPT means nothing ran): the caller gets errLostReply
// instead, as after a timeout or a reset connection. It
// matches commands sent alone and in pipelines.
type loseReplies struct {
	match func(cmd redis.Cmder) bool

	mu   sync.Mutex
	lost []string // names of the commands whose replies were dropped
}

func (h *loseReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && h.drop(cmd) {
			return errLostReply
		}
		return err
	}
}

func (h *loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if cmd.Err() == nil && h.drop(cmd) {
				err = errLostReply
			}
		}
		return err
	}
}

func (h *loseReplies) drop(cmd redis.Cmder) bool {
	if !h.match(cmd) {
		return false
	}
	cmd.SetErr(errLostReply)
	h.mu.Lock()
	h.lost = append(h.lost, cmd.Name())
	h.mu.Unlock()
	return true
}

// dropped returns the names of the commands whose replies were dropped.
func (h *loseReplies) dropped() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lost...)
}

// runsScript reports whether cmd is an EVALSHA or EVAL of the embedded
// script file, e.g. "lua/acquire.lua".
func runsScript(cmd redis.Cmder, file string) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	src, ok := scriptSources()[file]
	if !ok {
		panic("runsScript: no script " + file) // a typo would match nothing
	}
	switch cmd.Name() {
	case "evalsha":
		return args[1] == fmt.Sprintf("%x", sha1.Sum([]byte(src)))
	case "eval":
		return args[1] == src
	}
	return false
}

// scriptSources returns the library's Lua scripts as the server runs
// them, by file ("lua/acquire.lua"; a composed script under its last
// file), as the tests see what it sends by their hashes.
var scriptSources = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for _, s := range script.All() {
		m["lua/"+s.Name+".lua"] = s.Src
	}
	return m
})

// slowReplies is a go-redis hook that delays the replies of the commands
// it matches, as a slow network would: the server has run them when the
// delay starts.
type slowReplies struct {
	delay time.Duration
	match func(cmd redis.Cmder) bool
}

func (h *slowReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.match(cmd) {
			time.Sleep(h.delay) // the simulated slow reply, not a synchronisation
		}
		return err
	}
}

func (h *slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if slices.ContainsFunc(cmds, h.match) {
			time.Sleep(h.delay)
		}
		return err
	}
}
