// Package script holds the library's Lua scripts and runs them: each
// script is a file of lua/, headed by its KEYS/ARGV/returns contract, and
// every script of the library, on every path, is sent by Run, which holds
// the one NOSCRIPT fallback.
//
// Scripts that extend another (a leadership's renewal is a lock's renewal
// and more) are composed, not rewritten: the extending file is prefixed
// with the other wrapped as a function of its own KEYS and ARGV, so that
// one step of the protocol has one copy of its code.
package script

import (
	"context"
	"embed"
	"errors"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var files embed.FS

// A Script is one script of lua/, or a composition of several.
type Script struct {
	// Name is the file the script is sent as: "acquire" for
	// lua/acquire.lua; a composed script is named for its last file.
	Name string
	// Src is what the server runs.
	Src string

	sha, src any // boxed once, for the commands' arguments
}

func newScript(name string, src string) *Script {
	return &Script{Name: name, Src: src, sha: redis.NewScript(src).Hash(), src: src}
}

// SHA returns the script's SHA-1, which EVALSHA sends.
func (s *Script) SHA() string { return s.sha.(string) }

// Args returns the start of a run's arguments, for numKeys keys (a
// decimal string: a Cluster client reads it as one), with room for n keys
// and arguments, which the caller appends.
func (s *Script) Args(numKeys string, n int) []any {
	return append(make([]any, 0, 3+n), "evalsha", s.sha, numKeys)
}

// Processor sends one command: a client, a batcher, or a pipeline that
// queues it.
type Processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Run sends the command that newCmd makes of args (from s.Args) through
// p: EVALSHA, and if the server lacks the script (SCRIPT FLUSH, a restart,
// a failover), again as EVAL with the source, which caches it for the
// next run, as redis.Script.Run does. Unlike it, Run takes arguments the
// caller prepared, boxed once, and a command of the caller's type (an
// IntCmd reads an integer reply without boxing it), so a run costs
// go-redis's own allocations and little more. It returns the command
// sent last and its error; on an error the command's reply must not be
// read (a batch its caller left may still fill it).
func Run[C redis.Cmder](ctx context.Context, p Processor, s *Script, args []any, newCmd func(context.Context, ...any) C) (C, error) {
	cmd := newCmd(ctx, args...)
	err := p.Process(ctx, cmd)
	if NoScript(err) {
		args[0], args[1] = "eval", s.src
		cmd = newCmd(ctx, args...)
		err = p.Process(ctx, cmd)
	}
	return cmd, err
}

// Int runs s as Run does, for an integer reply.
func (s *Script) Int(ctx context.Context, p Processor, args []any) (int64, error) {
	cmd, err := Run(ctx, p, s, args, redis.NewIntCmd)
	if err != nil {
		return 0, err
	}
	return cmd.Val(), nil
}

// Eval runs s as Run does, for a reply that is not an integer.
func (s *Script) Eval(ctx context.Context, p Processor, args []any) (any, error) {
	cmd, err := Run(ctx, p, s, args, redis.NewCmd)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// NoScript reports whether err says that the server does not have the
// script: go-redis may have normalised the reply to ErrNoScript.
func NoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

func read(name string) string {
	b, err := files.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic(err) // the files are embedded: only a typo gets here
	}
	return string(b)
}

// compose returns the script of file tail with each of fns (files too)
// prepended as a local function of its own KEYS and ARGV (parameters
// that shadow the globals), named for its file.
func compose(tail string, fns ...string) *Script {
	src := ""
	for _, f := range fns {
		src += "local function " + f + "(KEYS, ARGV)\n" + read(f) + "\nend\n"
	}
	return newScript(tail, src+read(tail))
}

// The scripts. Each file's header gives its contract.
var (
	Acquire   = compose("acquire")
	Renew     = compose("renew")
	Release   = compose("release")
	Holder    = compose("holder")
	Writeback = compose("quorum_writeback")
	Announce  = compose("announce")
	Leader    = compose("leader")

	// A semaphore's permit is taken, given back and read by a lock's own
	// code, slot by slot.
	Permits          = compose("permits")
	Permit           = compose("permit", "acquire", "permits")
	Semaphore        = compose("semaphore", "acquire", "permits", "permit")
	SemaphoreRelease = compose("semaphore_release", "release")
	Slots            = compose("slots", "holder")

	// An election's leadership is taken, renewed and given back by a
	// lock's own code, and announced by the same code as a Proclaim.
	Campaign    = compose("campaign", "acquire", "announce")
	RenewLeader = compose("renew_leader", "renew")
	Resign      = compose("resign", "release")
)

// All returns every script, for tests that load them or recognise them
// by their SHA.
func All() []*Script {
	return []*Script{Acquire, Renew, Release, Holder, Writeback, Announce, Leader,
		Permits, Permit, Semaphore, SemaphoreRelease, Slots, Campaign, RenewLeader, Resign}
}
