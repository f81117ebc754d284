package tests

import (
	"context"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// recorder is a go-redis hook that counts round trips (one per command
// sent alone, one per pipeline) and records command names, so tests can
// check what the library sends.
type recorder struct {
	mu         sync.Mutex
	roundTrips int
	names      []string
	notify     func(name string) // optional, called for every command
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.record(cmds...)
		return next(ctx, cmds)
	}
}

func (r *recorder) record(cmds ...redis.Cmder) {
	r.mu.Lock()
	r.roundTrips++
	var notify func(string)
	for _, c := range cmds {
		r.names = append(r.names, c.Name())
	}
	notify = r.notify
	r.mu.Unlock()
	if notify != nil {
		for _, c := range cmds {
			notify(c.Name())
		}
	}
}

// reset returns the round trips and command names since the last reset.
func (r *recorder) reset() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, names := r.roundTrips, slices.Clone(r.names)
	r.roundTrips, r.names = 0, nil
	return n, names
}
